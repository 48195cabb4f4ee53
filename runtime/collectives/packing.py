"""How a value and its tangent share one message.

- `HALVES`, for collectives that treat each element alone (reductions,
  broadcasts, point to point): the value's elements, then the tangent's, one
  flat tensor. Packing and unpacking are contiguous copies.
- `INTERLEAVED`, for collectives that move rows along dim 0 (gathers, scatters,
  all-to-all, with their split sizes): value and tangent along a new last
  dimension, so every row carries its tangent with it.
"""

from __future__ import annotations

import threading

import torch


class Halves:
    @staticmethod
    def pack(value: torch.Tensor, tangent: torch.Tensor, out=None) -> torch.Tensor:
        if out is None:
            return torch.cat([value.reshape(-1), tangent.reshape(-1)])
        half = value.numel()
        out[:half].view(value.shape).copy_(value)
        out[half:].view(value.shape).copy_(tangent)
        return out

    @staticmethod
    def empty(like: torch.Tensor) -> torch.Tensor:
        return like.new_empty(2 * like.numel())

    @staticmethod
    def unpack(packed: torch.Tensor, shape) -> tuple[torch.Tensor, torch.Tensor]:
        half = packed.numel() // 2
        return packed[:half].view(shape), packed[half:].view(shape)


class Interleaved:
    @staticmethod
    def pack(value: torch.Tensor, tangent: torch.Tensor, out=None) -> torch.Tensor:
        return torch.stack([value, tangent], dim=-1)

    @staticmethod
    def empty(like: torch.Tensor) -> torch.Tensor:
        return like.new_empty((*like.shape, 2))

    @staticmethod
    def unpack(packed: torch.Tensor, shape=None) -> tuple[torch.Tensor, torch.Tensor]:
        return packed.unbind(-1)


HALVES, INTERLEAVED = Halves(), Interleaved()


def side_by_side(value: torch.Tensor, tangent) -> torch.Tensor | None:
    """The memory holding `value` and then `tangent`, as one flat tensor, when
    they lie so (contiguous, one storage, the tangent right after the value,
    no lazy bits): the `HALVES` packing already made, sent with no copies.
    `dualgen.distributed.make_packed_dual` lays duals out so; a functional
    collective's results come out so."""
    if (
        tangent is None
        or type(value) is not torch.Tensor
        or type(tangent) is not torch.Tensor
        or tangent.dtype != value.dtype
        or value.numel() == 0
        or not (value.is_contiguous() and tangent.is_contiguous())
        or value.is_conj()
        or value.is_neg()
        or tangent.is_conj()
        or tangent.is_neg()
        or tangent.data_ptr() != value.data_ptr() + value.nbytes
        or tangent.untyped_storage().data_ptr() != value.untyped_storage().data_ptr()
    ):
        return None
    return value.as_strided((2 * value.numel(),), (1,))


class Scratch(threading.local):
    """Packing buffers kept for the next collective of the same sizes: a large
    buffer allocated anew each time costs its pages again (the copies into it
    then cost as much as the message). A buffer is taken while a collective
    uses it and given back once what arrived has been copied out."""

    def __init__(self) -> None:
        self.buffers: dict = {}

    def take(self, like: torch.Tensor, index: int) -> torch.Tensor:
        buffer = self.buffers.pop(_key(like, index), None)
        return like.new_empty(2 * like.numel()) if buffer is None else buffer

    def give_back(self, like: torch.Tensor, index: int, buffer: torch.Tensor) -> None:
        if len(self.buffers) >= _KEPT:
            self.buffers.clear()
        self.buffers[_key(like, index)] = buffer


def _key(like: torch.Tensor, index: int) -> tuple:
    return (like.dtype, like.device, like.numel(), index)


_KEPT = 8  # buffers kept per thread
SCRATCH = Scratch()


def packing_for(entry):
    return HALVES if entry.elementwise else INTERLEAVED
