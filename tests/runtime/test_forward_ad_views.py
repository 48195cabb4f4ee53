"""Views and in-place ops against native forward AD, as the RFC's lens appendix
and native PyTorch have them.

See forward_ad_checks.py for how the runs are compared.
"""

from __future__ import annotations

import pytest
import torch
import torch.autograd.forward_ad as native_fwAD
from forward_ad_checks import (
    DTYPE,
    no_level_left_behind,  # noqa: F401 - autouse
    randn,
    run_both,
    shares_memory,
    unpack_all,
)
from torch.testing import assert_close

import dualgen.forward_ad as dual_fwAD

# --------------------------------------------------------------------------------------
# 7. views and in-place, as the RFC appendix and native PyTorch


def test_make_dual_is_a_backward_differentiable_view_of_the_primal():
    def fn(fwAD):
        p = randn(3, requires_grad=True)
        with fwAD.dual_level():
            t = randn(3)
            d = fwAD.make_dual(p, t)
            assert d._base is p
            assert shares_memory(d, p)
            assert d.requires_grad
            (g,) = torch.autograd.grad((d * d.exp()).sum(), p)
            return g, fwAD.unpack_dual(d).tangent is t

    run_both(fn)


def test_unpack_dual_primal_is_a_view_without_tangent():
    def fn(fwAD):
        with fwAD.dual_level():
            x = randn(3)
            d = fwAD.make_dual(x, randn(3))
            primal = fwAD.unpack_dual(d).primal
            y = primal.sin()
            return shares_memory(primal, x), fwAD.unpack_dual(y).tangent, y

    run_both(fn)


VIEWS = {
    "view": lambda d: d.view(4, 3),
    "reshape": lambda d: d.reshape(12),
    "flatten": lambda d: d.flatten(),
    "t": lambda d: d.t(),
    "T": lambda d: d.T,
    "transpose": lambda d: d.transpose(0, 1),
    "permute": lambda d: d.permute(1, 0),
    "select": lambda d: d[1],
    "select_last": lambda d: d[:, -1],
    "slice": lambda d: d[1:3],
    "slice_step": lambda d: d[:, ::2],
    "narrow": lambda d: d.narrow(1, 1, 2),
    "expand": lambda d: d[:1].expand(5, 4),
    "unsqueeze": lambda d: d.unsqueeze(1),
    "squeeze": lambda d: d.unsqueeze(0).squeeze(0),
    "chain": lambda d: d.t()[1:].unsqueeze(0)[0, :, 1],
    "alias": lambda d: torch.ops.aten.alias(d),
}


@pytest.mark.parametrize("name", VIEWS)
def test_view_tangent_is_the_same_view_of_the_base_tangent(name):
    view = VIEWS[name]

    def fn(fwAD):
        x, t = randn(3, 4), randn(3, 4)
        with fwAD.dual_level():
            d = fwAD.make_dual(x, t)
            v = view(d)
            primal, tangent = fwAD.unpack_dual(v)
            expected = view(t)
            assert shares_memory(tangent, t)
            assert tangent.stride() == expected.stride()
            assert tangent.storage_offset() == expected.storage_offset()
            assert_close(tangent, expected)
            # writing through the view's tangent is seen by the base's tangent
            if 0 not in tangent.stride():
                tangent.add_(100.0)
            return primal, tangent, t, tangent.stride(), v._base is x

    run_both(fn)


INPLACE = {
    "mul_scalar": lambda d, e, p: d.mul_(2.5),
    "mul_dual": lambda d, e, p: d.mul_(e),
    "mul_plain": lambda d, e, p: d.mul_(p),
    "add_dual_alpha": lambda d, e, p: d.add_(e, alpha=2.0),
    "add_plain": lambda d, e, p: d.add_(p),
    "add_scalar": lambda d, e, p: d.add_(3.0),
    "sub_dual": lambda d, e, p: d.sub_(e),
    "div_dual": lambda d, e, p: d.div_(e * e + 1),
    "div_scalar": lambda d, e, p: d.div_(4.0),
    "sin_": lambda d, e, p: d.sin_(),
    "exp_": lambda d, e, p: d.exp_(),
    "tanh_": lambda d, e, p: d.tanh_(),
    "sigmoid_": lambda d, e, p: d.sigmoid_(),
    "relu_": lambda d, e, p: d.relu_(),
    "clamp_": lambda d, e, p: d.clamp_(-0.3, 0.3),
    "neg_": lambda d, e, p: d.neg_(),
    "zero_": lambda d, e, p: d.zero_(),
    "fill_scalar": lambda d, e, p: d.fill_(3.0),
    "fill_dual": lambda d, e, p: d.fill_(e[0, 0]),
    "copy_dual": lambda d, e, p: d.copy_(e),
    "copy_plain": lambda d, e, p: d.copy_(p),
    "copy_broadcast": lambda d, e, p: d.copy_(e[0]),
    "atan2_": lambda d, e, p: d.atan2_(e),
    "addmm_": lambda d, e, p: d.addmm_(e[:, :3], e, beta=0.5, alpha=2.0),
    "view_mul_": lambda d, e, p: d[1].mul_(e[1]),
    "view_copy_": lambda d, e, p: d[:, 0].copy_(e[:, 1]),
    "chain": lambda d, e, p: d.mul_(e).add_(p).sin_(),
}


@pytest.mark.parametrize("name", INPLACE)
def test_inplace_ops_update_the_tangent_in_place(name):
    op = INPLACE[name]

    def fn(fwAD):
        x, t = randn(3, 4), randn(3, 4)
        y, u, p = randn(3, 4), randn(3, 4), randn(3, 4)
        with fwAD.dual_level():
            d = fwAD.make_dual(x, t)
            e = fwAD.make_dual(y, u)
            before = d.data_ptr()
            returned = op(d, e, p)
            primal, tangent = fwAD.unpack_dual(d)
            assert d.data_ptr() == before
            assert tangent is t  # the caller's tangent, updated in place
            return primal, tangent, x, t, fwAD.unpack_dual(returned)

    run_both(fn)


@pytest.mark.parametrize(
    "name", ["add_dual_alpha", "mul_dual", "copy_dual", "fill_dual", "div_dual"]
)
def test_inplace_on_plain_tensor_with_dual_argument(name):
    op = INPLACE[name]

    def fn(fwAD):
        x, y, u, p = randn(3, 4), randn(3, 4), randn(3, 4), randn(3, 4)
        with fwAD.dual_level():
            e = fwAD.make_dual(y, u)
            op(x, e, p)
            return tuple(fwAD.unpack_dual(x))

    run_both(fn)


def test_setitem_of_a_dual_into_zeros():
    def fn(fwAD):
        with fwAD.dual_level():
            dual = fwAD.make_dual(
                torch.tensor(5.0, dtype=DTYPE), torch.tensor(3.0, dtype=DTYPE)
            )
            out = torch.zeros(10, dtype=DTYPE)
            out[2] = dual
            return tuple(fwAD.unpack_dual(out))

    (_, tangent), _ = run_both(fn)
    assert_close(
        tangent, torch.zeros(10, dtype=DTYPE).index_fill(0, torch.tensor(2), 3)
    )


def test_writing_a_dual_into_a_view_of_a_plain_base():
    def fn(fwAD):
        with fwAD.dual_level():
            base = torch.zeros(3, 4, dtype=DTYPE)
            column_before = base[:, 1]  # views taken before the write
            row_before = base[2]
            whole_before = base.view(12)
            base[1].copy_(fwAD.make_dual(randn(4), randn(4)))
            base[0, 1:3] = fwAD.make_dual(randn(2), randn(2))
            views = [
                base,
                column_before,
                row_before,
                whole_before,
                base[:, 2],
                base.t(),
            ]
            return unpack_all(fwAD, views)

    run_both(fn)


def test_writing_a_plain_value_into_a_dual_zeroes_that_part_of_the_tangent():
    def fn(fwAD):
        with fwAD.dual_level():
            d = fwAD.make_dual(randn(3, 4), randn(3, 4))
            d[1] = randn(4)
            d[:, 0].fill_(2.0)
            d[2, 3] = 7.0
            return tuple(fwAD.unpack_dual(d))

    run_both(fn)


def test_rfc_views_can_have_different_perturbations():
    def fn(fwAD):
        with fwAD.dual_level():
            x = torch.zeros(100, dtype=DTYPE)
            x2 = x[2]
            t_y = torch.tensor(1.0, dtype=DTYPE)
            t_z = torch.tensor(10.0, dtype=DTYPE)
            y = fwAD.make_dual(x2, t_y)
            z = fwAD.make_dual(x2, t_z)
            dual = fwAD.make_dual(
                torch.tensor(5.0, dtype=DTYPE), torch.tensor(3.0, dtype=DTYPE)
            )
            y.add_(dual)
            return unpack_all(fwAD, [y, z, x, x2])

    ((y, y_t), (z, z_t), (x, x_t), (x2, x2_t)), _ = run_both(fn)
    assert y_t.item() == 4.0  # t_y + dual's tangent
    assert z_t.item() == 10.0  # z's tangent is not aliased with y's
    assert x_t is None and x2_t is None
    assert y.item() == z.item() == x2.item() == x[2].item() == 5.0


def test_make_dual_copies_the_tangent_of_an_offset_view_as_native():
    """When the primal is a view with a storage offset (or another storage size)
    make_dual copies the tangent into storage laid out like the primal's (native's
    `has_same_meta` check), so in-place ops on the dual leave the caller's tangent
    alone, and as_strided of the dual reaches zeros outside the view."""

    def fn(fwAD):
        with fwAD.dual_level():
            base = torch.zeros(5, dtype=DTYPE)
            t = torch.arange(2, dtype=DTYPE)
            d = fwAD.make_dual(base[1:3], t)
            d.mul_(3.0)
            return fwAD.unpack_dual(d).tangent, t.clone()

    torch.manual_seed(0)
    native_tangent, native_t = fn(native_fwAD)
    ours_tangent, ours_t = fn(dual_fwAD)
    assert_close(ours_tangent, native_tangent)
    assert_close(native_t, torch.tensor([0.0, 1.0], dtype=DTYPE))  # copied
    assert_close(ours_t, torch.tensor([0.0, 1.0], dtype=DTYPE))


@pytest.mark.parametrize(
    "layout",
    ["transposed_tangent", "transposed_primal", "expanded_tangent", "sliced_tangent"],
)
def test_make_dual_tangent_gets_the_primal_layout(layout):
    def fn(fwAD):
        if layout == "transposed_tangent":
            primal, tangent = randn(3, 4), randn(4, 3).t()
        elif layout == "transposed_primal":
            primal, tangent = randn(4, 3).t(), randn(3, 4)
        elif layout == "expanded_tangent":
            primal, tangent = randn(3, 4), randn(4).expand(3, 4)
        else:
            primal, tangent = randn(3, 4), randn(3, 8)[:, ::2]
        with fwAD.dual_level():
            d = fwAD.make_dual(primal, tangent)
            out = fwAD.unpack_dual(d).tangent
            assert out.stride() == primal.stride()
            assert_close(out, tangent)
            views = unpack_all(fwAD, [d.t(), d[1], d.sin()])
            return out, out.stride(), views

    run_both(fn)


@pytest.mark.parametrize(
    "dtypes", [(torch.float64, torch.float32), (torch.float32, torch.float64)]
)
def test_tangent_dtype_handling(dtypes):
    primal_dtype, tangent_dtype = dtypes

    def fn(fwAD):
        x = torch.randn(3, 4, dtype=primal_dtype)
        t = torch.randn(3, 4, dtype=tangent_dtype)
        with fwAD.dual_level():
            d = fwAD.make_dual(x, t)
            tangent = fwAD.unpack_dual(d).tangent
            outs = unpack_all(
                fwAD, [d.sin(), d.exp(), d * d, -d, d[1], d.t(), d.sum(0), d.clone()]
            )
            d.mul_(3.0)
            return tangent, tangent.dtype, outs, tuple(fwAD.unpack_dual(d))

    run_both(fn)
    # a matmul with mixed dtypes fails alike
    for fwAD in (native_fwAD, dual_fwAD):
        with fwAD.dual_level():
            d = fwAD.make_dual(
                torch.randn(3, 4, dtype=primal_dtype),
                torch.randn(3, 4, dtype=tangent_dtype),
            )
            with pytest.raises(RuntimeError, match="same dtype"):
                d @ torch.ones(4, 2, dtype=primal_dtype)


MIXED_DTYPE_BINARY = {
    "mul_scalar": lambda d, p: d * 2,
    "mul_plain": lambda d, p: d * p,
    "add_scalar": lambda d, p: d + 1,
    "add_plain": lambda d, p: p + d,
    "div_scalar": lambda d, p: d / 2,
}


@pytest.mark.parametrize(
    "dtypes,name",
    [((torch.float32, torch.float64), name) for name in MIXED_DTYPE_BINARY]
    + [((torch.float64, torch.float32), "add_scalar")],
    ids=[f"f32_primal-{name}" for name in MIXED_DTYPE_BINARY] + ["f64_primal-add"],
)
def test_tangent_dtype_of_binary_ops_with_one_tangent(name, dtypes):
    primal_dtype, tangent_dtype = dtypes
    op = MIXED_DTYPE_BINARY[name]

    def fn(fwAD):
        x = torch.randn(3, 4, dtype=primal_dtype)
        t = torch.randn(3, 4, dtype=tangent_dtype)
        p = torch.randn(3, 4, dtype=primal_dtype)
        with fwAD.dual_level():
            return tuple(fwAD.unpack_dual(op(fwAD.make_dual(x, t), p)))

    run_both(fn)


def test_inplace_on_dual_view_updates_base_and_sibling_tangents():
    def fn(fwAD):
        with fwAD.dual_level():
            t = randn(3, 4)
            d = fwAD.make_dual(randn(3, 4), t)
            row = d[1]
            col = d[:, 2]
            row.mul_(fwAD.make_dual(randn(4), randn(4)))
            return unpack_all(fwAD, [d, row, col]), t

    run_both(fn)


def _primal_inplace(fwAD):
    d = fwAD.make_dual(randn(3), randn(3))
    p = fwAD.unpack_dual(d).primal
    p.mul_(2)  # the primal is a view of the dual's memory without its tangent
    p.add_(fwAD.make_dual(randn(3), randn(3)))
    return [d, p]


def _detached_inplace(fwAD):
    d = fwAD.make_dual(randn(3), randn(3))
    detached = d.detach()
    detached.mul_(fwAD.make_dual(randn(3), randn(3)))
    return [d, detached]


def _clone_is_independent(fwAD):
    t = randn(3)
    d = fwAD.make_dual(randn(3), t)
    c = d.clone()
    c.mul_(3.0)
    return [d, c, t]


def _view_taken_before_make_dual(fwAD):
    base = torch.zeros(4, dtype=DTYPE)
    before = base[1:3]
    d = fwAD.make_dual(base, torch.arange(4, dtype=DTYPE))
    return [before, d[1:3], base]


def _two_views_written(fwAD):
    base = torch.zeros(2, 3, dtype=DTYPE)
    a, b = base[0], base[1]
    five, seven = torch.full((3,), 5.0, dtype=DTYPE), torch.full((3,), 7.0, dtype=DTYPE)
    a.copy_(fwAD.make_dual(torch.ones(3, dtype=DTYPE), five))
    b.mul_(fwAD.make_dual(torch.ones(3, dtype=DTYPE), seven))
    return [base, a, b]


def _mixed_writes(fwAD):
    d = fwAD.make_dual(randn(3, 3), randn(3, 3))
    y = torch.zeros(3, 3, dtype=DTYPE)
    y[:, 1:] = d[:, :2] * 2
    y.t()[0].add_(d[0])
    return [y, y[0], y.t()]


def _fill_and_zero_views(fwAD):
    d = fwAD.make_dual(randn(3, 3), randn(3, 3))
    value = fwAD.make_dual(
        torch.tensor(2.0, dtype=DTYPE), torch.tensor(9.0, dtype=DTYPE)
    )
    d.t()[1].fill_(value)
    d[2].zero_()
    return [d]


def _non_contiguous_primal_inplace(fwAD):
    t = randn(3, 4)
    d = fwAD.make_dual(randn(4, 3).t(), t)
    d.mul_(2.0)
    d[0].add_(fwAD.make_dual(torch.ones(4, dtype=DTYPE), torch.ones(4, dtype=DTYPE)))
    return [d, d.t(), d[1], t]


def _zero_dim_and_empty(fwAD):
    s = fwAD.make_dual(torch.tensor(2.0, dtype=DTYPE), torch.tensor(3.0, dtype=DTYPE))
    e = fwAD.make_dual(torch.empty(0, 3, dtype=DTYPE), torch.empty(0, 3, dtype=DTYPE))
    return [s * randn(3), s.expand(4), torch.stack([s, s]), e.sin(), e.sum(0)]


def _integer_tensor_inplace(fwAD):
    d = fwAD.make_dual(randn(3), randn(3))
    i = torch.zeros(3, dtype=torch.long)
    i.add_(2)
    return [i, d + i]


def _complex(fwAD):
    d = fwAD.make_dual(
        torch.randn(3, dtype=torch.complex128), torch.randn(3, dtype=torch.complex128)
    )
    e = torch.randn(3, dtype=torch.complex128)
    return [d * e, d.exp(), d.sin() * 2, (d * 1j).sum(), d / e, d.abs(), d.mean()]


MORE_VIEWS_AND_INPLACE = {
    "primal_inplace": _primal_inplace,
    "detached_inplace": _detached_inplace,
    "clone_is_independent": _clone_is_independent,
    "view_taken_before_make_dual": _view_taken_before_make_dual,
    "two_views_written": _two_views_written,
    "mixed_writes": _mixed_writes,
    "fill_and_zero_views": _fill_and_zero_views,
    "non_contiguous_primal_inplace": _non_contiguous_primal_inplace,
    "zero_dim_and_empty": _zero_dim_and_empty,
    "integer_tensor_inplace": _integer_tensor_inplace,
    "complex": _complex,
}


@pytest.mark.parametrize("name", MORE_VIEWS_AND_INPLACE)
def test_more_views_and_inplace(name):
    body = MORE_VIEWS_AND_INPLACE[name]

    def fn(fwAD):
        with fwAD.dual_level():
            return unpack_all(fwAD, body(fwAD))

    run_both(fn)


def test_copy_into_other_dtype_keeps_tangent_dtype_as_native():
    def fn(fwAD):
        with fwAD.dual_level():
            d = fwAD.make_dual(randn(3), randn(3))
            e = torch.zeros(3, dtype=torch.float32)
            e.copy_(d)
            return tuple(fwAD.unpack_dual(e))

    run_both(fn)


def test_data_of_a_saved_output_has_no_tangent():
    def fn(fwAD):
        x = randn(3, requires_grad=True)
        with fwAD.dual_level():
            y = fwAD.make_dual(x, randn(3)).exp()  # exp saves its output
            return unpack_all(fwAD, [y.data, y.data.sin()])

    run_both(fn)


@pytest.mark.parametrize(
    "view",
    [
        lambda d: d.conj(),
        lambda d: d.real,
        lambda d: d.imag,
        torch.view_as_real,
        lambda d: d.conj().imag,
    ],
    ids=["conj", "real", "imag", "view_as_real", "conj_imag"],
)
def test_part_view_of_a_real_tangent_on_a_complex_primal_says_what_to_do(view):
    """A view that reads a complex value's parts cannot take a real tangent (it
    would be t + 0i, a new tensor). Native fails with an internal assert or a
    dtype error; dualgen says what to do instead of its own internal assert."""
    x = torch.randn(2, 3, dtype=torch.complex128)
    t = torch.randn(2, 3, dtype=torch.float64)
    with pytest.raises(RuntimeError), native_fwAD.dual_level():
        view(native_fwAD.make_dual(x, t))
    advice = r"tangent is real.*t\.to\(x\.dtype\)"
    with pytest.raises(RuntimeError, match=advice), dual_fwAD.dual_level():
        view(dual_fwAD.make_dual(x, t))
    with dual_fwAD.dual_level():  # with the primal's dtype it runs
        out = view(dual_fwAD.make_dual(x, t.to(x.dtype)))
        assert dual_fwAD.unpack_dual(out).tangent is not None
