"""Which dtype a tangent gets where tangent and primal dtypes differ.

Native forward AD evaluates a formula's every term, with zeros of the primals'
dtypes for absent tangents, so its tangents promote as the primals do; dualgen drops
those terms, and these helpers give the tangents the dtypes native's would have.
"""

from __future__ import annotations

import torch

from .rules import Rule
from .tangents import _tensors, autograd_enabled, is_differentiable_dtype


def _tangents_have_primal_dtypes(primals, tangents, indices) -> bool:
    for i, tangent in zip(indices, tangents):
        pairs = (
            zip(primals[i], tangent)
            if isinstance(tangent, list)
            else [(primals[i], tangent)]
        )
        for p, t in pairs:
            if t is not None and isinstance(p, torch.Tensor) and t.dtype != p.dtype:
                return False
    return True


def _as_meta(value):
    if isinstance(value, torch.Tensor):
        return torch.empty_strided(
            value.size(), value.stride(), dtype=value.dtype, device="meta"
        )
    if isinstance(value, (list, tuple)):
        return type(value)(_as_meta(v) for v in value)
    return value


def _zero_filled(tangent, primal):
    """A meta stand-in for each absent tangent: a zero of its primal's dtype."""
    if isinstance(tangent, list) or isinstance(primal, (list, tuple)):
        tangents = tangent or [None] * len(primal)
        return [_zero_filled(t, p) for t, p in zip(tangents, primal)]
    if tangent is None and isinstance(primal, torch.Tensor):
        return _as_meta(primal) if is_differentiable_dtype(primal) else None
    if tangent is None and type(primal) in (int, float, complex):
        # A number where the schema has a tensor: native wraps it, and its zero
        # tangent promotes as a number does (`x + 0.5` keeps x's tangent dtype,
        # `x * 0.5` gets x's dtype from `other_t * self_p`).
        return type(primal)(0)
    return _as_meta(tangent)


def _in_native_dtypes(rule: Rule, primals, tangents, outputs, results):
    """Where a tangent has another dtype than its primal, the dtypes native's
    tangents get: native evaluates a formula's every term, with zeros of the
    primals' dtypes for absent tangents, so `x * 0.5` with a float32 tangent of a
    float64 x is float64 (from `other_t * self_p`), where dualgen drops that
    term. The formula run on meta tensors tells; one meta cannot run keeps the
    dtypes it has."""
    try:
        filled = [
            _zero_filled(t, primals[i]) for i, t in zip(rule.input_indices, tangents)
        ]
        meta = rule.call([_as_meta(p) for p in primals], filled, _as_meta(outputs))
    except Exception:  # noqa: BLE001 - a formula meta tensors cannot run
        return results
    metas = meta if len(results) > 1 else (meta,)
    out = []
    for value, like in zip(results, metas):
        if (
            isinstance(value, torch.Tensor)
            and isinstance(like, torch.Tensor)
            and value.dtype != like.dtype
        ):
            with autograd_enabled():
                value = value.to(like.dtype)
        out.append(value)
    return tuple(out)


def _in_dtype_of(tangent: torch.Tensor, primal: torch.Tensor) -> torch.Tensor:
    """The output tangent in its primal's dtype, when every input tangent has its
    primal's dtype. Native forward AD evaluates formulas with zeros of the
    primals' dtypes for absent tangents, so its tangents promote like the primals
    do; dualgen drops those terms (a float64 0-d tangent times float32 values
    would stay float32). Tangents made with another dtype on purpose keep it."""
    if tangent.dtype == primal.dtype or (
        tangent.is_complex() and not primal.is_complex()
    ):
        return tangent
    with autograd_enabled():
        return tangent.to(primal.dtype)


def _promoted_for_self(new: torch.Tensor, self_value: torch.Tensor, tangents):
    """The tangent an in-place op gives a tensor that had none, in the dtype
    native's formula gives it: the promotion of a zero tangent of self's dtype
    with the operands' tangents (so a float32 tensor updated from a float64 dual
    gets a float64 tangent, and from a 0-d float64 dual a float32 one)."""
    dtype = self_value.dtype
    for t in _tensors(tangents):
        if t.dtype != dtype:
            dtype = torch.result_type(
                torch.empty(self_value.shape, dtype=dtype, device="meta"),
                torch.empty(t.shape, dtype=t.dtype, device="meta"),
            )
    if not self_value.is_complex():
        # as writing complex values into real memory does
        new = new.real if new.is_complex() else new
        dtype = dtype.to_real() if dtype.is_complex else dtype
    if new.dtype == dtype or (new.is_complex() and not dtype.is_complex):
        return new
    with autograd_enabled():
        return new.to(dtype)


def in_gradient_dtype(g: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A gradient in its value's dtype, as autograd gives it: the real part for a
    real value, then that dtype."""
    if g.dtype == dtype:
        return g
    if g.is_complex() and not dtype.is_complex:
        g = g.real
    return g.to(dtype)
