"""The grouped-matmul and weight-norm helpers of dualgen.formulas.fused_nn
(grouped_mm_any_layout, weight_norm_broadcast, weight_norm_of, weight_norm_saved):
grouped_mm_any_layout against per-group matmuls in every layout _grouped_mm takes, on
operands in layouts the op refuses, with the rows the groups do not reach;
weight_norm_broadcast against torch.norm_except_dim's shapes and
_weight_norm_interface's values; weight_norm_of and weight_norm_saved with their
gradients."""

from __future__ import annotations

import itertools

import pytest
import torch
from formula_checks import R, close

from dualgen import formulas as F

F32 = torch.float32


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def offsets(*ends):
    return torch.tensor(ends, dtype=torch.int32)


def reference(a, b, offs):
    """_grouped_mm by per-group matmuls (zero where the groups do not reach)."""
    if offs is None:
        return a @ b
    bounds = [0] + offs.tolist()
    groups = list(itertools.pairwise(bounds))
    if a.dim() == 2 and b.dim() == 3:  # rows grouped
        out = torch.zeros(a.shape[0], b.shape[-1], dtype=a.dtype)
        for g, (s, e) in enumerate(groups):
            out[s:e] = a[s:e] @ b[g]
        return out
    if a.dim() == 3 and b.dim() == 2:  # columns grouped
        out = torch.zeros(a.shape[1], b.shape[-1], dtype=a.dtype)
        for g, (s, e) in enumerate(groups):
            out[:, s:e] = a[g] @ b[:, s:e]
        return out
    # 2-d x 2-d: the contraction dim grouped
    return torch.stack([a[:, s:e] @ b[s:e] for s, e in groups])


LAYOUTS = {
    "2d-3d": ((8, 8), (4, 8, 4), offsets(0, 2, 5, 8)),
    "2d-3d-short": ((8, 8), (3, 8, 4), offsets(2, 5, 6)),  # rows 6, 7 in no group
    "3d-3d": ((3, 5, 8), (3, 8, 4), None),
    "2d-2d": ((4, 8), (8, 4), offsets(0, 2, 5, 8)),
    "2d-2d-short": ((4, 8), (8, 4), offsets(3, 3, 6)),
    "3d-2d": ((4, 4, 8), (8, 8), offsets(0, 2, 5, 8)),
    "3d-2d-short": ((3, 4, 8), (8, 8), offsets(1, 4, 5)),  # columns 5..7 in none
}


@pytest.mark.parametrize("layout", LAYOUTS)
def test_grouped_mm_any_layout_is_per_group_matmul(layout):
    a_shape, b_shape, offs = LAYOUTS[layout]
    a, b = torch.randn(a_shape, dtype=F32), torch.randn(b_shape, dtype=F32)
    out = F.grouped_mm_any_layout(a, b, offs)
    close(out, reference(a, b, offs), rtol=1e-5, atol=1e-5)
    if offs is not None:  # the op itself wherever the groups reach
        native = torch.ops.aten._grouped_mm(a, b, offs)
        reached = reference(torch.ones_like(a), torch.ones_like(b), offs) != 0
        close(out[reached], native[reached])


@pytest.mark.parametrize("layout", LAYOUTS)
def test_grouped_mm_any_layout_takes_layouts_the_op_refuses(layout):
    # Rows of 5 floats (20 bytes), an expanded (stride 0) operand, transposes.
    a_shape, b_shape, offs = LAYOUTS[layout]
    a = torch.randn(a_shape, dtype=F32)
    odd_b = torch.randn(*b_shape[:-1], 5, dtype=F32)
    with pytest.raises(RuntimeError, match="strides"):
        torch.ops.aten._grouped_mm(a, odd_b, offs)
    close(
        F.grouped_mm_any_layout(a, odd_b, offs),
        reference(a, odd_b, offs),
        rtol=1e-5,
        atol=1e-5,
    )
    expanded = torch.randn(1, b_shape[-1], dtype=F32).expand(b_shape)
    transposed = a.transpose(-2, -1).contiguous().transpose(-2, -1)
    close(
        F.grouped_mm_any_layout(transposed, expanded, offs),
        reference(a, expanded, offs),
        rtol=1e-5,
        atol=1e-5,
    )


def test_grouped_mm_any_layout_bfloat16():
    a, b = torch.randn(8, 8), torch.randn(3, 8, 8)
    offs = offsets(2, 5, 8)
    out = F.grouped_mm_any_layout(a.bfloat16(), b.bfloat16(), offs)
    assert out.dtype == torch.bfloat16
    close(out.float(), reference(a, b, offs), rtol=0.05, atol=0.1)


@pytest.mark.parametrize(
    "shape, dim", [((4, 3, 5), 0), ((4, 3, 5), 2), ((4, 3, 5), -2), ((4, 4), 1)]
)
@pytest.mark.parametrize("flat", [False, True])
def test_weight_norm_broadcast_is_norm_except_dims_shape(shape, dim, flat):
    v = torch.randn(shape, dtype=R)
    keep = torch.norm_except_dim(v, 2, dim)
    t = torch.randn(keep.shape, dtype=R)
    out = F.weight_norm_broadcast(t.flatten() if flat else t, v, dim)
    assert out.shape == keep.shape
    close(out, t)


def test_weight_norm_broadcast_whole_tensor():
    v = torch.randn(4, 3, dtype=R)
    out = F.weight_norm_broadcast(torch.tensor(2.0, dtype=R), v, -1)
    assert out.shape == (1, 1)


@pytest.mark.parametrize("dim", [0, 2])
def test_weight_norm_broadcast_rebuilds_weight_norm(dim):
    # w = v * g / n with g and n as _weight_norm_interface takes and returns them
    # (flat g here: the op reads one value per slice).
    v = torch.randn(4, 3, 5, dtype=R)
    g = torch.randn(v.shape[dim], dtype=R)
    w, n = torch.ops.aten._weight_norm_interface(v, g, dim)
    assert n.shape == g.shape
    close(
        n, F.weight_norm_broadcast(torch.norm_except_dim(v, 2, dim), v, dim).flatten()
    )
    close(
        w, v * F.weight_norm_broadcast(g, v, dim) / F.weight_norm_broadcast(n, v, dim)
    )


@pytest.mark.parametrize("dim", [0, 2])  # (the fused CPU kernel takes no other)
def test_weight_norm_of_is_the_ops_norms_and_differentiable(dim):
    """The norms _weight_norm_interface returns, broadcast against v, with a
    gradient autograd gives the op's own second output none of."""
    v = torch.randn(4, 3, 5, dtype=R, requires_grad=True)
    g = torch.randn(torch.norm_except_dim(v, 2, dim).shape, dtype=R)
    _, n = torch.ops.aten._weight_norm_interface(v.detach(), g, dim)
    out = F.weight_norm_of(v, dim)
    close(out, F.weight_norm_broadcast(n, v, dim))
    (grad,) = torch.autograd.grad(out.sum(), v)
    close(grad, v.detach() / F.weight_norm_broadcast(n, v, dim))


@pytest.mark.parametrize("dim", [0, 2])
def test_weight_norm_saved_moves_with_v_where_autograd_records_it(dim):
    """The saved norms, broadcast; where autograd records v (and not the norms),
    their values with the gradient of v's norms; elsewhere the same tensor as
    weight_norm_broadcast gives, with no graph."""
    v = torch.randn(4, 3, 5, dtype=R, requires_grad=True)
    g = torch.randn(torch.norm_except_dim(v, 2, dim).shape, dtype=R)
    _, n = torch.ops.aten._weight_norm_interface(v.detach(), g, dim)
    out = F.weight_norm_saved(n, v, dim)
    assert torch.equal(out, F.weight_norm_broadcast(n, v, dim))
    (grad,) = torch.autograd.grad(out.sum(), v)
    close(grad, v.detach() / F.weight_norm_broadcast(n, v, dim))
    assert not F.weight_norm_saved(n, v.detach(), dim).requires_grad
    tracked = n.clone().requires_grad_()
    (grad,) = torch.autograd.grad(
        F.weight_norm_saved(tracked, v, dim).sum(), v, allow_unused=True
    )
    assert grad is None  # the norms' own graph, not v's norms, carries it
