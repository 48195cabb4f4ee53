"""Leaves whose tangent has another precision than their primal: float64 primals
with float32, bfloat16 or float16 tangents, complex128 with complex64, float32
with float64. Native keeps the tangent's dtype at make_dual, and what dtype each
op's output tangent then has is native's behaviour (`relu` promotes to the
value's, `sum` and views keep the tangent's), compared exactly by the judge.

Each leaf is followed at once by a step on it alone, from any single-line
vocabulary (element-wise, masks, reductions, views, in-place, matmul), so every
kind of op meets such a tangent; later steps mix it with the rest.
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from .literals import SHAPES, tensor_code
from .state import DrawFn, GenState
from .vocab_compute import COMPUTE
from .vocab_duals import tangent_code
from .vocab_inplace import INPLACE
from .vocab_masks import MASKS
from .vocab_views import VIEWS

KIND = "mixed tangent dtype"

TANGENT_DTYPES = {
    torch.float64: (torch.float32, torch.bfloat16, torch.float16),
    torch.complex128: (torch.complex64,),
    torch.float32: (torch.float64,),
}
FOLLOW_UPS = COMPUTE + VIEWS + INPLACE + MASKS


def mixed_leaf(draw: DrawFn, state: GenState):
    """A recipe: `x = fwAD.make_dual(<primal>, <tangent of another precision>)`,
    then one step on x alone."""
    shape = draw(st.sampled_from(SHAPES))
    dtype = draw(st.sampled_from(tuple(TANGENT_DTYPES)))
    tangent_dtype = draw(st.sampled_from(TANGENT_DTYPES[dtype]))
    primal = draw(tensor_code(shape, dtype))
    tangent = tangent_code(draw, shape, tangent_dtype, primal, other_dtypes=False)
    if not (yield f"{state.fresh()} = fwAD.make_dual({primal}, {tangent})"):
        return
    state.mark(KIND)
    alone = GenState([state.vars[-1]], state.nested, state.count, state.kinds)
    made = draw(st.sampled_from(FOLLOW_UPS))(draw, alone)
    if hasattr(made, "send"):  # a recipe
        yield from made
    else:
        yield made
