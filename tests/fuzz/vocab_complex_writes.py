"""Real and complex values written into views of complex tensors, then read
through the view and through its base.

The complex tensor is one the program computes (a product, a stack, a cumsum, a
conj view of a product, a real one times a complex number), a variable of its
own so the base is read after the write, or an existing writable one; the view
is a conj view, a stepped slice (of a conj view too), a diagonal, `.real` /
`.imag`, `view_as_real`, or `as_strided` at an offset into a tensor the recipe
computed (its storage is the program's own: finite differences, laying leaves out
anew, see the same memory). The write is `copy_`, `add_` with alpha, `fill_` with
a 0-d dual, `mul_` or setitem, of a real or complex variable or of a 0-d dual
computed for it (`torch.log(w.square() + 1).sum()`). Each is a recipe: a line at
a time, the next drawn from the tensors the last ones made.
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from .state import DrawFn, GenState, Var, broadcastable, pick, pick_dim
from .vocab_inplace import indices_for

KIND = "complex view write"

# Computed complex tensors: their views are taken next, so each is the base the
# program reads after the write (the conj ones a conj view of a temporary).
TARGETS = (
    "{c} * {c}",
    "torch.stack([{c}, {c}], 0) + {c}",
    "{c}.cumsum({d})",
    "{c} * 0.5",
    "({c} * {c}).conj()",
    "({c} * 0.5).conj()",
)
FROM_REAL = ("{r} * (0.5+1j)", "torch.complex({r}, {r}.sin())")
# Smooth 0-d functions (no kink at zero, where shrinking puts values).
REAL_SCALARS = (
    "torch.log({r}.square() + 1).sum()",
    "torch.linalg.vector_norm({r}.square() + 0.5)",
    "{r}.sin().sum()",
    "({r} * {r}).mean()",
)
COMPLEX_SCALARS = ("({c} * {c}).sum()", "{c}.sum()")
WRITES = ("copy_({v})", "add_({v}, alpha=2)", "mul_({v})", "fill_({s})", "setitem")


def _real(v: Var) -> bool:
    return v.dtype.is_floating_point


def _target(draw: DrawFn, state: GenState):
    """The complex tensor written into, and whether the recipe computed it
    (a sub-recipe: its value is (Var, fresh) or None)."""
    existing = pick(draw, state, lambda v: v.is_complex and state.writable(v))
    if existing is not None and draw(st.integers(0, 2)) == 0:
        return existing, False
    c = pick(draw, state, lambda v: v.is_complex)
    if c is not None:
        code = draw(st.sampled_from(TARGETS)).format(c=c.name, d=pick_dim(draw, c))
    else:
        r = pick(draw, state, _real)
        if r is None:
            return None
        code = draw(st.sampled_from(FROM_REAL)).format(r=r.name)
    if not (yield f"{state.fresh()} = {code}"):
        return None
    return state.vars[-1], True


def _stepped_slice(draw: DrawFn, n: int) -> str:
    start = draw(st.integers(0, max(n - 1, 0)))
    stop = draw(st.integers(start, n + 1))
    return f"{start}:{stop}:{draw(st.sampled_from((2, 3, 1)))}"


def _as_strided(draw: DrawFn, t: torch.Tensor) -> str | None:
    """`{t}.as_strided((n,), (stride,), {t}.storage_offset() + k)` inside t's
    storage, maybe indexed to 0-d."""
    room = t.untyped_storage().nbytes() // t.element_size() - t.storage_offset()
    if room < 1:
        return None
    stride = draw(st.sampled_from((1, 2)))
    n = draw(st.integers(1, max(1, min(3, 1 + (room - 1) // stride))))
    k = draw(st.integers(0, room - 1 - (n - 1) * stride))
    index = draw(st.sampled_from(("", "[0]")))
    return f"{{t}}.as_strided(({n},), ({stride},), {{t}}.storage_offset() + {k}){index}"


def _view(draw: DrawFn, t: torch.Tensor, fresh: bool) -> str | None:
    """A view expression of `{t}`, valid for t (or nearly: the builder drops
    the rest)."""
    options = ["{t}.conj()", "{t}.real", "{t}.imag", "{t}.conj().real"]
    options += ["{t}.conj().imag"]
    if t.dim() >= 1:
        step = _stepped_slice(draw, t.shape[0])
        options += [f"{{t}}.conj()[{step}]", f"{{t}}[{step}]", "{t}.conj()[..., ::2]"]
    if t.dim() >= 2:
        options += ["{t}.diagonal()", "{t}.conj().diagonal()", "{t}.mT.conj()"]
    if not t.is_conj():
        options += ["torch.view_as_real({t})", "torch.view_as_real({t})[..., 1]"]
    if fresh:
        options += ["as_strided"] * 3
    choice = draw(st.sampled_from(options))
    return _as_strided(draw, t) if choice == "as_strided" else choice


def _subview(draw: DrawFn, name: str, t: torch.Tensor) -> tuple[str, torch.Tensor]:
    """`name` or a view of it, and its tensor (t where the view does not apply)."""
    options = ["", ".real", ".conj()"]
    if t.dim() >= 1:
        options += [f"[{_stepped_slice(draw, t.shape[0])}]", "[0]"]
    chain = draw(st.sampled_from(options))
    try:
        return name + chain, eval(f"_t{chain}", {"_t": t})
    except Exception:  # noqa: BLE001 - that view does not apply (.real of real)
        return name, t


def _scalar(draw: DrawFn, state: GenState) -> str | None:
    """A 0-d dual's source: an existing 0-d variable with a tangent, or a smooth
    reduction of a (real, mostly) one."""
    zero_d = pick(draw, state, lambda v: v.ndim == 0 and v.has_tangent)
    if zero_d is not None and draw(st.booleans()):
        return zero_d.name
    r = pick(draw, state, lambda v: _real(v) and v.has_tangent)
    if r is not None and draw(st.integers(0, 3)) > 0:
        return draw(st.sampled_from(REAL_SCALARS)).format(r=r.name)
    c = pick(draw, state, lambda v: v.is_complex)
    if c is None:
        return None
    return draw(st.sampled_from(COMPLEX_SCALARS)).format(c=c.name)


def _source(draw: DrawFn, state: GenState, view: torch.Tensor, shape) -> str | None:
    """A value for `shape`: a variable broadcastable to it (real where the view
    is, mostly), or a 0-d dual."""
    if draw(st.integers(0, 2)) == 0:
        return _scalar(draw, state)
    real_only = not view.is_complex() and draw(st.integers(0, 3)) > 0
    v = pick(
        draw,
        state,
        lambda v: broadcastable(v.shape, shape) and (_real(v) or not real_only),
    )
    return None if v is None else v.name


def _write(draw: DrawFn, state: GenState, T: str, view: torch.Tensor) -> str | None:
    op = draw(st.sampled_from(WRITES))
    if op == "fill_({s})":
        s = _scalar(draw, state)
        return None if s is None else f"{T}.fill_({s})"
    if op != "setitem":
        v = _source(draw, state, view, tuple(view.shape))
        return None if v is None else f"{T}.{op.format(v=v)}"
    index = indices_for(draw, view)
    try:
        shape = tuple(eval(f"_t[{index}]", {"_t": view, "torch": torch}).shape)
    except Exception:  # noqa: BLE001 - an index that does not apply
        return None
    v = _source(draw, state, view, shape)
    return None if v is None else f"{T}[{index}] = {v}"


def complex_view_write(draw: DrawFn, state: GenState):
    """A recipe: a complex tensor, a view of it, a write through the view, and
    reads of both."""
    made = yield from _target(draw, state)
    if made is None:
        return
    target, fresh = made
    view = _view(draw, target.tensor, fresh)
    if view is None:
        return
    code = view.format(t=target.name)
    # A view that names its base inside (as_strided's offset) or starts with a
    # function is a variable first: lines start with the variable they write.
    if view.startswith("torch.") or "storage_offset" in view or draw(st.booleans()):
        if not (yield f"{state.fresh()} = {code}"):
            return
        # Written as it is, or through a view of it (`v[0:1:2].copy_(...)`).
        T, tensor = _subview(draw, state.vars[-1].name, state.vars[-1].tensor)
    else:
        try:
            tensor = eval(code, {target.name: target.tensor, "torch": torch})
        except Exception:  # noqa: BLE001 - a view that does not apply
            return
        T = code
    line = _write(draw, state, T, tensor)
    if line is None or not (yield line):
        return
    state.mark(KIND)
    reads = draw(st.sampled_from(("view", "base", "both", "none")))
    if reads in ("view", "both"):  # the view taken anew after the write
        yield f"{state.fresh()} = {code}"
    if reads in ("base", "both"):
        yield f"{state.fresh()} = {target.name} * 0.5"


COMPLEX_WRITES = (complex_view_write,)
