"""Steps whose derivative is a mask: relu, where on a computed condition, clamp,
maximum/minimum, abs, leaky_relu, hardtanh, masked_fill on a comparison, and
their in-place forms.

Their tangents take the value's dtype from a path the smooth ops do not (native
promotes `relu`'s, keeps `clamp`'s and `where`'s), which is what programs with
tangents of another precision check. Each is used only where every element is at
least MARGIN away from a kink: finite differences there are exact, and a nested
program's second difference (steps of 1e-4 along both tangents) stays on one side.
"""

from __future__ import annotations

import torch
import torch.autograd.forward_ad as native_fwAD
from hypothesis import strategies as st

from .state import DrawFn, GenState, Var, broadcastable, compatible, pick

KIND = "mask"
MARGIN = 1e-2

# (template, where its kinks are: a function of a's and b's primals whose zeros
# they are). `{a}` is real unless said otherwise; `{b}` broadcasts with it.
ALONE = (
    ("torch.relu({a})", lambda a, b: a),
    ("{a}.relu()", lambda a, b: a),
    ("torch.nn.functional.relu({a})", lambda a, b: a),
    ("{a}.clamp(min=0.25)", lambda a, b: a - 0.25),
    ("{a}.clamp(-0.5, 0.5)", lambda a, b: (a - 0.5) * (a + 0.5)),
    ("{a}.clamp(max=-0.125)", lambda a, b: a + 0.125),
    ("torch.nn.functional.leaky_relu({a}, 0.125)", lambda a, b: a),
    ("torch.nn.functional.hardtanh({a})", lambda a, b: (a - 1) * (a + 1)),
    ("{a}.masked_fill({a} < 0, 0.0)", lambda a, b: a),
    ("{a}.abs()", lambda a, b: a),
)
WITH_OTHER = (
    ("torch.where({a} > 0, {a}, {b})", lambda a, b: a),
    ("torch.maximum({a}, {b})", lambda a, b: a - b),
    ("torch.minimum({a}, {b})", lambda a, b: a - b),
    ("torch.where({a} > {b}, {b}, {a} * 0.5)", lambda a, b: a - b),
)
IN_PLACE = (
    ("{a}.relu_()", lambda a, b: a),
    ("{a}.clamp_(min=0.25)", lambda a, b: a - 0.25),
    ("{a}.abs_()", lambda a, b: a),
    ("{a}.clamp_(-1.0, 1.0)", lambda a, b: (a - 1) * (a + 1)),
)
# abs of a complex tensor: a kink at zero only.
COMPLEX = (("{a}.abs()", lambda a, b: a),)


def _primal(var: Var) -> torch.Tensor:
    return native_fwAD.unpack_dual(var.tensor).primal.detach()


def _speed(var: Var | None) -> float:
    """The largest magnitude of var's tangent (0 without one)."""
    t = None if var is None else native_fwAD.unpack_dual(var.tensor).tangent
    return 0.0 if t is None or t.numel() == 0 else float(t.detach().abs().max())


def away_from_kinks(kinks, a: Var, b: Var | None) -> bool:
    """Whether every element of `kinks(a, b)` is at least MARGIN from zero, times
    how fast the operands move along their tangents (a nested program's second
    difference steps along both levels' tangents, the outer one unknown here but
    of a like size)."""
    pa = _primal(a).to(torch.complex128 if a.is_complex else torch.float64)
    pb = None if b is None else _primal(b).to(torch.float64)
    at = kinks(pa, pb)
    margin = MARGIN * (1 + _speed(a) + _speed(b))
    return at.numel() == 0 or bool(at.abs().min() >= margin)


def _real(v: Var) -> bool:
    return v.dtype.is_floating_point


def mask(draw: DrawFn, state: GenState):
    """A recipe of one line: a mask op on a variable away from its kinks."""
    kind = draw(st.sampled_from(("alone", "other", "in place", "complex")))
    if kind == "complex":
        a = pick(draw, state, lambda v: v.is_complex)
        table = COMPLEX
    elif kind == "in place":
        a = pick(draw, state, lambda v: _real(v) and state.writable(v))
        table = IN_PLACE
    else:
        a = pick(draw, state, _real)
        table = ALONE if kind == "alone" else WITH_OTHER
    if a is None:
        return
    template, kinks = draw(st.sampled_from(table))
    b = None
    if "{b}" in template:
        b = pick(draw, state, lambda v: _real(v) and compatible(v.shape, a.shape))
        if b is None:
            return
    if not away_from_kinks(kinks, a, b):
        return
    code = template.format(a=a.name, b=b.name if b else "")
    line = code if kind == "in place" else f"{state.fresh()} = {code}"
    if (yield line):
        state.mark(KIND)


def masked_update(draw: DrawFn, state: GenState):
    """`t.copy_(torch.relu(a))`-like: a mask op's result written into a
    variable (its tangent's dtype meets the target's)."""
    t = pick(draw, state, lambda v: _real(v) and state.writable(v))
    if t is None:
        return
    a = pick(draw, state, lambda v: _real(v) and broadcastable(v.shape, t.shape))
    if a is None:
        return
    template, kinks = draw(st.sampled_from(ALONE))
    if not away_from_kinks(kinks, a, None):
        return
    op = draw(st.sampled_from(("copy_", "add_", "mul_")))
    if (yield f"{t.name}.{op}({template.format(a=a.name)})"):
        state.mark(KIND)


MASKS = (mask, mask, masked_update)
