"""Helpers for other fused nn kernels real models reach: grid sampling, embedding
bags, CTC loss and pairwise distances.
"""

from __future__ import annotations

__all__: list[str] = []
