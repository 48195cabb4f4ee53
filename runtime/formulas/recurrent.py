"""Helpers for fused recurrent layers: mkldnn_rnn_layer (an LSTM layer over time) and
its backward, through the recurrence the kernel computes.
"""

from __future__ import annotations

__all__: list[str] = []
