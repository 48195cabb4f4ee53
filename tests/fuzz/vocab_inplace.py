"""Steps that update a tensor in place, directly or through a view of it
(`x[0].mul_(y)`, `x.real.add_(y)`, `x.conj().sin_()`), including updates whose
other operand reads the tensor being written (`x.mul_(x)`, `x.addcmul_(x, x)`,
`v.mul_(x)` with v a view of x), `setitem` with basic, integer-array and mask
indices, `x[idx] = x[other]`, and the indexed updates (`index_add_`, `scatter_`,
`masked_fill_`, `index_put_` accumulating).

After such a step the tangent of the updated tensor, of its base and of every
other view of that base must all reflect the update.
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from .literals import (
    bools_literal,
    distinct_indices_literal,
    index_literal,
    indices_literal,
    scatter_index_literal,
)
from .state import DrawFn, GenState, Var, broadcastable, pick, pick_dim

# Ways to reach the updated memory: the variable itself or a view of it.
CHAINS = (
    "",
    "[0]",
    ".real",
    ".t()",
    ".imag",
    ".conj()",
    "[..., :1]",
    ".diagonal()",
    "[1:]",
    ".transpose(0, 1)",
    ".view(-1)",
)

WITH_OTHER = (
    "mul_({b})",
    "add_({b})",
    "copy_({b})",
    "sub_({b})",
    "add_({b}, alpha=0.5)",
    "addcmul_({b}, {c})",
    "lerp_({b}, 0.5)",
)

ALONE = (
    "mul_(0.5)",
    "sin_()",
    "exp_()",
    "tanh_()",
    "neg_()",
    "zero_()",
    "fill_(0.25)",
    "div_(2.0)",
    "sigmoid_()",
)

# The other operand reads the memory being written.
SELF_ALIASED = (
    "mul_({T})",
    "addcmul_({T}, {T})",
    "add_({T})",
    "addcmul_({b}, {T})",
    "mul_({t})",
    "copy_({T}.clone())",
)


def _view(var: Var, chain: str) -> torch.Tensor | None:
    try:
        return eval(f"_t{chain}", {"_t": var.tensor})
    except Exception:  # noqa: BLE001 - that chain does not apply to this tensor
        return None


def _operand(draw: DrawFn, state: GenState, shape: tuple[int, ...]) -> str | None:
    v = pick(draw, state, lambda v: broadcastable(v.shape, shape))
    return None if v is None else v.name


def update(draw: DrawFn, state: GenState) -> str | None:
    t = pick(draw, state, state.writable)
    if t is None:
        return None
    chain = draw(st.sampled_from(CHAINS))
    target = _view(t, chain)
    if target is None:
        chain, target = "", t.tensor
    T = t.name + chain
    kind = draw(st.sampled_from(("other", "alone", "aliased")))
    if kind == "alone":
        return f"{T}." + draw(st.sampled_from(ALONE))
    b = _operand(draw, state, tuple(target.shape))
    c = _operand(draw, state, tuple(target.shape))
    if b is None or c is None:
        return None
    templates = WITH_OTHER if kind == "other" else SELF_ALIASED
    return f"{T}." + draw(st.sampled_from(templates)).format(b=b, c=c, T=T, t=t.name)


def indices_for(draw: DrawFn, target: torch.Tensor) -> str:
    shape = tuple(target.shape)
    options = ["..."]
    if len(shape) >= 1:
        options += ["1:", "::2"]
        if shape[0] > 0:
            options += ["0", "idx", "-1"]
        options.append("mask")
    if len(shape) >= 2:
        options += [":, 0", "..., 1:"]
    choice = draw(st.sampled_from(options))
    if choice == "idx":
        return distinct_indices_literal(draw, draw(st.integers(1, 3)), shape[0])
    if choice == "mask":
        return bools_literal(draw, shape)
    return choice


def setitem(draw: DrawFn, state: GenState) -> str | None:
    t = pick(draw, state, state.writable)
    if t is None:
        return None
    index = indices_for(draw, t.tensor)
    try:
        shape = tuple(eval(f"_t[{index}]", {"_t": t.tensor, "torch": torch}).shape)
    except Exception:  # noqa: BLE001 - drop an index that does not apply
        return None
    source = draw(st.sampled_from(("operand", "operand", "constant", "itself")))
    if source == "constant":
        value = "0.5"
    elif source == "itself":  # `x[idx] = x[other]`: a view of the target
        value = f"{t.name}[{indices_for(draw, t.tensor)}]"
    else:
        value = _operand(draw, state, shape)
    if value is None:
        return None
    return f"{t.name}[{index}] = {value}"


def indexed_update(draw: DrawFn, state: GenState) -> str | None:
    t = pick(draw, state, lambda v: state.writable(v) and v.ndim >= 1 and v.numel > 0)
    if t is None:
        return None
    d = pick_dim(draw, t)
    kinds = ("index_add_", "scatter_", "masked_fill_", "index_put_")
    kind = draw(st.sampled_from(kinds))
    if kind == "masked_fill_":
        return f"{t.name}.masked_fill_({bools_literal(draw, t.shape)}, 0.5)"
    if kind == "index_put_":  # accumulate: repeated positions add up
        n = draw(st.integers(1, 3))
        idx = indices_literal(draw, (n,), t.shape[0])
        b = pick(draw, state, lambda v: broadcastable(v.shape, (n, *t.shape[1:])))
        if b is None:
            return None
        return f"{t.name}.index_put_(({idx},), {b.name}, accumulate=True)"
    if kind == "scatter_":
        b = pick(draw, state, lambda v: v.shape == t.shape)
        idx = scatter_index_literal(draw, t.shape, d)
        return f"{t.name}.scatter_({d}, {idx}, {b.name})"
    n = draw(st.integers(1, t.shape[d]))
    b = pick(draw, state, lambda v: v.shape == t.shape)
    positions = st.lists(st.integers(0, t.shape[d] - 1), min_size=n, max_size=n)
    idx = index_literal(torch.tensor(draw(positions)))
    return f"{t.name}.index_add_({d}, {idx}, {b.name}.narrow({d}, 0, {n}))"


INPLACE = (update, setitem, indexed_update)
