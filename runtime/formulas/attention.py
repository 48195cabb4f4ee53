"""Helpers for fused attention ops: the CPU flash-attention kernel and its backward,
written through attention's definition (softmax(q k^T * scale + mask) v).
"""

from __future__ import annotations

__all__: list[str] = []
