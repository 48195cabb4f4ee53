"""The helpers of dualgen.formulas.shapes (shape, view and indexing ops), each against
torch's own autograd of the op it serves, the adjoint identity of the op's forward
where torch's backward is wrong, or a small hand-computed case; float64, and
complex128 where the op supports it."""

from __future__ import annotations

import pytest
import torch
from formula_checks import DTYPES, C, R, close, jvp, vjp

from dualgen import formulas as F


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def test_inverse_permutation():
    dims = [2, 0, 3, 1]
    x = torch.randn(2, 3, 4, 5)
    assert torch.equal(x.permute(dims).permute(F.inverse_permutation(dims)), x)


def test_slice_grad_places_grad_in_the_slice():
    like = torch.randn(6, 3)
    g = torch.randn(2, 3)
    out = F.slice_grad(g, like, 0, 1, 5, 2)
    assert torch.equal(out[1:5:2], g) and out.abs().sum() == g.abs().sum()


def test_split_like_undoes_cat_and_skips_legacy_empty_tensors():
    parts = [torch.randn(2, 3), torch.randn(0), torch.randn(4, 3)]
    grad = torch.randn(6, 3)
    out = F.split_like(grad, parts, 0)
    assert torch.equal(out[0], grad[:2]) and torch.equal(out[2], grad[2:])
    assert out[1].shape == (0,)


# ---------------------------------------------------------------- views, shape ops


@pytest.mark.parametrize("dtype", DTYPES)
def test_cat_grads_is_split_backward_with_zeros_for_missing_grads(dtype):
    x = torch.randn(3, 6, dtype=dtype)
    outs = x.split([2, 1, 3], dim=1)
    g0, g2 = torch.randn_like(outs[0]), torch.randn_like(outs[2])
    xr = x.clone().requires_grad_()
    parts = xr.split([2, 1, 3], dim=1)
    (expected,) = torch.autograd.grad([parts[0], parts[2]], [xr], [g0, g2])
    close(F.cat_grads([g0, None, g2], outs, 1), expected)


@pytest.mark.parametrize("op", ["scatter", "scatter_add"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_gather_grad_is_scatter_src_backward_for_a_smaller_index(op, dtype):
    self = torch.randn(4, 5, dtype=dtype)
    src = torch.randn(3, 6, dtype=dtype)
    index = torch.tensor([[0, 2, 4], [1, 3, 0]])  # rows distinct: scatter is exact

    def fn(s):  # torch's scatter backward fails for a src larger than index:
        return getattr(torch, op)(self, 1, index, s[:2, :3])  # slice it explicitly

    g = torch.randn_like(self)
    (expected,) = vjp(fn, [src], g)
    got = F.gather_grad(g, 1, index, src)
    close(got, expected)
    assert got.shape == src.shape and torch.equal(got[2], torch.zeros(6, dtype=dtype))


def test_gather_grad_of_0d_tensors():
    self, src, index = torch.tensor(1.0), torch.tensor(2.0), torch.tensor(0)
    g = torch.tensor(3.0)
    (expected,) = vjp(lambda s: torch.scatter(self, 0, index, s), [src], g)
    close(F.gather_grad(g, 0, index, src), expected)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "dim, start, length", [(0, 1, 2), (1, 0, 5), (1, -3, 2), (-1, 4, 1)]
)
def test_narrow_grad_matches_autograd(dim, start, length, dtype):
    x = torch.randn(4, 5, dtype=dtype)
    y = x.narrow(dim, start, length)
    g = torch.randn_like(y)
    (expected,) = vjp(lambda a: a.narrow(dim, start, length), [x], g)
    close(F.narrow_grad(g, x, dim, start, length), expected)


@pytest.mark.parametrize("pad", [[1, 2], [0, 1, 2, 0], [-1, 2, 1, -1]])
def test_negated_pad_is_constant_pad_nd_backward(pad):
    x = torch.randn(3, 4, dtype=R)
    y = torch.constant_pad_nd(x, pad, 0.5)
    g = torch.randn_like(y)
    (expected,) = vjp(lambda a: torch.constant_pad_nd(a, pad, 0.5), [x], g)
    close(torch.constant_pad_nd(g, F.negated(pad)), expected)


@pytest.mark.parametrize("shifts, dims", [([2], [1]), ([1, -3], [0, 1]), ([5], [])])
def test_negated_shifts_is_roll_backward(shifts, dims):
    x = torch.randn(3, 4, dtype=C)
    g = torch.randn_like(x)
    (expected,) = vjp(lambda a: a.roll(shifts, dims), [x], g)
    close(g.roll(F.negated(shifts), dims), expected)
    assert F.negated([1, -2, 0]) == [-1, 2, 0]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "shape, repeats",
    [((2, 3), (2, 1)), ((2, 3), (2, 3, 2)), ((3,), (1, 2, 2)), ((), (3,)), ((), ())],
)
def test_repeat_grad_matches_autograd(shape, repeats, dtype):
    x = torch.randn(shape, dtype=dtype)
    y = x.repeat(repeats)
    g = torch.randn_like(y)
    (expected,) = vjp(lambda a: a.repeat(repeats), [x], g)
    close(F.repeat_grad(g, x, repeats), expected)


def test_stack_grads_is_unbind_backward_with_zeros_for_missing_grads():
    x = torch.randn(3, 4, dtype=C)
    outs = x.unbind(1)
    xr = x.clone().requires_grad_()
    parts = xr.unbind(1)
    g1, g3 = torch.randn(3, dtype=C), torch.randn(3, dtype=C)
    (expected,) = torch.autograd.grad([parts[1], parts[3]], [xr], [g1, g3])
    close(F.stack_grads([None, g1, None, g3], x, outs, 1), expected)
    empty = torch.randn(0, 3)
    assert torch.equal(
        F.stack_grads([], empty, empty.unbind(0), 0), empty.new_zeros(0, 3)
    )


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "size, stride, offset",
    [((2, 3), (5, 2), 1), ((4,), (6,), None), ((3, 2), (1, 7), 3)],
)
def test_as_strided_grad_matches_autograd_on_a_view_with_an_offset(
    size, stride, offset, dtype
):
    base = torch.randn(40, dtype=dtype)
    x = base[2:22].view(4, 5)  # a view with a storage offset, in a larger storage

    def fn(a):
        return a.as_strided(size, stride, offset)

    g = torch.randn(size, dtype=dtype)
    b = base.clone().requires_grad_()
    xv = b[2:22].view(4, 5)
    (expected,) = torch.autograd.grad(fn(xv), xv, g)
    got = F.as_strided_grad(g, x, size, stride, offset)
    close(got, expected)
    assert got.shape == x.shape


SCATTER_REDUCE = [
    (reduce, include_self)
    for reduce in ["sum", "mean", "amax", "amin"]
    for include_self in [True, False]
]


def assert_scatter_reduce_tangent(fn, self, index, src, reduce, include_self, y):
    """scatter_reduce_tangent along dim 1, at random tangents of self and src,
    is the JVP of fn (that scatter_reduce)."""
    st, rt = torch.randn_like(self), torch.randn_like(src)
    tangent = F.scatter_reduce_tangent(
        st, self, 1, index, rt, src, reduce, include_self, y
    )
    close(tangent, jvp(fn, [self, src], [st, rt]))


@pytest.mark.parametrize("reduce, include_self", SCATTER_REDUCE)
def test_scatter_reduce_grads_and_tangent_match_autograd(reduce, include_self):
    # float64 only: torch has no autograd for complex scatter_reduce.
    self = torch.randn(3, 4, dtype=R)
    src = torch.randn(3, 6, dtype=R)  # wider than index: only a corner is read
    index = torch.tensor([[0, 0, 2], [1, 3, 1], [3, 3, 3]])

    def fn(s, r):  # torch's backward fails for a src larger than index: slice it
        r = r[:, :3]
        return torch.scatter_reduce(s, 1, index, r, reduce, include_self=include_self)

    y = fn(self, src)
    g = torch.randn_like(y)
    expected = vjp(fn, [self, src], g)
    got = F.scatter_reduce_grads(g, self, 1, index, src, reduce, include_self, y)
    close(got[0], expected[0])
    close(got[1], expected[1])
    assert_scatter_reduce_tangent(fn, self, index, src, reduce, include_self, y)


@pytest.mark.parametrize("reduce", ["amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_amax_amin_share_among_ties(reduce, include_self):
    self = torch.tensor([[2.0, 0.0, 5.0]], dtype=R)
    src = torch.tensor([[2.0, 2.0, 1.0, 7.0]], dtype=R)
    index = torch.tensor([[0, 0, 1, 1]])

    def fn(s, r):
        return torch.scatter_reduce(s, 1, index, r, reduce, include_self=include_self)

    y = fn(self, src)
    g = torch.tensor([[3.0, 5.0, 7.0]], dtype=R)
    got = F.scatter_reduce_grads(g, self, 1, index, src, reduce, include_self, y)
    # Hand-computed: position 0 is 2 from self (when included) and src[0], src[1].
    # Position 1 is min(0, 1) = self's 0 or src's 1 (amin), max(0, 1, 7) = 7 (amax).
    tied = 1.0 if include_self else 1.5  # g[0] = 3 shared by 3 or by 2
    if reduce == "amax":
        hand_self, hand_src = [tied, 0, 7], [tied, tied, 0, 5]
    elif include_self:
        hand_self, hand_src = [tied, 5, 7], [tied, tied, 0, 0]
    else:
        hand_self, hand_src = [0, 0, 7], [tied, tied, 5, 0]
    if not include_self:
        hand_self[0] = 0.0
    close(got[0], torch.tensor([hand_self], dtype=R))
    close(got[1], torch.tensor([hand_src], dtype=R))
    if include_self:
        # torch agrees here; without self it still counts self's equal value among
        # the ties (src gets 1 each), then zeros self's share: 1 of g[0] is lost.
        expected = vjp(fn, [self, src], g)
        close(got[0], expected[0])
        close(got[1], expected[1])
    assert_scatter_reduce_tangent(fn, self, index, src, reduce, include_self, y)


def test_scatter_reduce_rejects_unsupported_reductions():
    x = torch.randn(2, 3)
    index = torch.zeros(2, 1, dtype=torch.long)
    with pytest.raises(NotImplementedError):
        F.scatter_reduce_grads(x, x, 1, index, x, "prod", True, x)
    with pytest.raises(NotImplementedError):
        F.scatter_reduce_tangent(x, x, 1, index, x, x, "prod", True, x)


@pytest.mark.parametrize("dtype", DTYPES)
def test_block_diag_grads_match_autograd(dtype):
    tensors = [
        torch.randn(2, 3, dtype=dtype),
        torch.randn(3, dtype=dtype),
        torch.randn((), dtype=dtype),
        torch.randn(0, 2, dtype=dtype),
        torch.randn(1, 2, dtype=dtype),
    ]
    y = torch.block_diag(*tensors)
    g = torch.randn_like(y)
    expected = vjp(torch.block_diag, tensors, g)
    got = F.block_diag_grads(g, tensors)
    assert len(got) == len(tensors)
    for a, b in zip(got, expected):
        close(a, b)


def test_block_diag_grads_take_the_real_part_for_real_inputs():
    tensors = [torch.randn(2, 2, dtype=R), torch.randn(1, 3, dtype=C)]
    y = torch.block_diag(*tensors)
    g = torch.randn_like(y)
    expected = vjp(torch.block_diag, tensors, g)
    got = F.block_diag_grads(g, tensors)
    assert got[0].dtype == R and got[1].dtype == C
    close(got[0], expected[0])
    close(got[1], expected[1])


# ---------------------------------------------------------------- as_strided_scatter


AS_STRIDED_CASES = [
    ([2, 2], [1, 2], 1),
    ([3, 2], [4, 1], None),
    ([2], [5], 0),
    ([0, 3], [1, 1], 2),
]


@pytest.mark.parametrize("dtype", [R, C])
@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("size, stride, offset", AS_STRIDED_CASES)
def test_as_strided_scatter_grads_are_the_adjoint(
    size, stride, offset, transposed, dtype
):
    # torch's own backward of as_strided_scatter is wrong for self (in 2.13 it keeps
    # the gradient inside the scattered region, not outside), so the check is the
    # adjoint identity <g, f(u, v)> = <f*(g)_self, u> + <f*(g)_src, v> of the
    # linear forward op, also for a self laid out transposed.
    self = (
        torch.randn(4, 3, dtype=dtype).t()
        if transposed
        else torch.randn(3, 4, dtype=dtype)
    )
    src = torch.randn(size, dtype=dtype)
    result = torch.as_strided_scatter(self, src, size, stride, offset)
    g = torch.randn(result.shape, dtype=dtype)
    gs, gsrc = F.as_strided_scatter_grads(g, result, size, stride, offset)
    assert gs.shape == self.shape and gsrc.shape == src.shape
    u, v = torch.randn_like(self), torch.randn_like(src)
    lhs = torch.vdot(
        g.reshape(-1), torch.as_strided_scatter(u, v, size, stride, offset).reshape(-1)
    )
    rhs = torch.vdot(gs.reshape(-1), u.reshape(-1)) + torch.vdot(
        gsrc.reshape(-1), v.reshape(-1)
    )
    close(lhs, rhs)


def test_as_strided_scatter_grads_by_hand():
    g = torch.arange(1.0, 13.0, dtype=R).reshape(3, 4)
    result = torch.zeros(3, 4, dtype=R)
    gs, gsrc = F.as_strided_scatter_grads(g, result, [2, 2], [1, 2], 1)
    close(gsrc, torch.tensor([[2.0, 4.0], [3.0, 5.0]], dtype=R))
    expected = g.clone().reshape(-1)
    expected[1:5] = 0
    close(gs, expected.reshape(3, 4))


@pytest.mark.parametrize(
    "make_view, size",
    [
        (lambda base: base[1:], (3,)),  # squeeze_'s resize of a [1, 3] slice
        (lambda base: base.expand(2, 4)[1:], (4,)),  # of an expanded row
        (lambda base: base[:, 1:3].t(), (2, 2)),  # a transposed view, reshaped
    ],
)
def test_resize_tangent_lays_the_tangent_out_as_the_resized_tensor(make_view, size):
    """resize_ of a view keeps its memory: the tangent, laid out as the view
    was, is laid out in place as the view is now, over the tangent's memory
    (its values are the tangent's of the memory the view now covers)."""
    base = torch.randn(2, 4, dtype=R)
    base_t = torch.randn(2, 4, dtype=R)
    view, view_t = make_view(base), make_view(base_t)
    resized = (
        view.clone()
        .resize_(0)
        .set_(view.untyped_storage(), view.storage_offset(), view.size(), view.stride())
    )
    resized.resize_(size)
    got = F.resize_tangent(view_t, resized)
    assert got is view_t and got.shape == resized.shape
    assert got.stride() == resized.stride()
    # The tangent's memory at each element's place is the base tangent's there.
    offset = resized.storage_offset()
    places = torch.arange(base.numel()).as_strided(size, resized.stride(), offset)
    close(got, base_t.flatten()[places])


def test_resize_tangent_grows_the_memory_in_place():
    """A resize that grows self's memory grows the tangent's in place (a base
    sharing it sees the same memory), the memory it adds zero."""
    base_t = torch.randn(2, 3, dtype=R)
    view_t = base_t[1:]
    resized = torch.zeros(0, dtype=R).resize_(10)  # (only its geometry is read)
    expected = torch.cat([base_t.flatten()[3:], torch.zeros(7, dtype=R)])
    got = F.resize_tangent(view_t, resized)
    assert got is view_t and got.shape == (10,)
    assert got.untyped_storage().data_ptr() == base_t.untyped_storage().data_ptr()
    close(got, expected)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("self_shape", "other_shape"),
    [((2, 3, 4), (4, 5)), ((4,), (2, 4, 3)), ((3, 4), (4,)), ((4,), (4,)),
     ((1, 3, 4), (2, 4, 2))],
)  # fmt: skip
def test_matmul_grads_are_autograds(dtype, self_shape, other_shape):
    a = torch.randn(self_shape, dtype=dtype)
    b = torch.randn(other_shape, dtype=dtype)
    grad = torch.randn(torch.matmul(a, b).shape, dtype=dtype)
    expected = vjp(torch.matmul, [a, b], grad)
    close(F.matmul_self_grad(grad, a, b), expected[0])
    close(F.matmul_other_grad(grad, a, b), expected[1])


def test_matmul_grads_of_nested_tensors_are_per_component():
    a = [torch.randn(2, 3, 4, dtype=R), torch.randn(2, 1, 4, dtype=R)]
    b = [torch.randn(2, 4, 3, dtype=R), torch.randn(2, 4, 2, dtype=R)]
    g = [torch.randn(2, 3, 3, dtype=R), torch.randn(2, 1, 2, dtype=R)]
    nested = torch.nested.as_nested_tensor
    self_grad = F.matmul_self_grad(nested(g), nested(a), nested(b)).unbind()
    other_grad = F.matmul_other_grad(nested(g), nested(a), nested(b)).unbind()
    for i in range(2):
        expected = vjp(torch.matmul, [a[i], b[i]], g[i])
        close(self_grad[i], expected[0])
        close(other_grad[i], expected[1])


@pytest.mark.parametrize("nested_input", [False, True])
def test_linear_grads_and_bias_tangent(nested_input):
    rows = [torch.randn(2, 4, dtype=R), torch.randn(3, 4, dtype=R)]
    weight, bias = torch.randn(5, 4, dtype=R), torch.randn(5, dtype=R)
    grads = [torch.randn(2, 5, dtype=R), torch.randn(3, 5, dtype=R)]
    dense, dense_grad = torch.cat(rows), torch.cat(grads)
    expected = vjp(torch.nn.functional.linear, [dense, weight, bias], dense_grad)
    x, g = (
        (torch.nested.as_nested_tensor(rows), torch.nested.as_nested_tensor(grads))
        if nested_input
        else (dense, dense_grad)
    )
    close(F.linear_weight_grad(g, x, weight), expected[1])
    close(F.linear_bias_grad(g, bias), expected[2])
    bias_t = torch.randn(5, dtype=R)
    result = torch.nn.functional.linear(x, weight, bias)
    spread = F.bias_tangent(bias_t, result)
    if nested_input:
        for part in spread.unbind():
            close(part, bias_t.expand_as(part))
    else:
        assert spread is bias_t  # (the sum broadcasts it)
