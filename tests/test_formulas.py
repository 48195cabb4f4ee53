"""Each helper of dualgen.formulas against a direct computation or torch autograd."""

from __future__ import annotations

import pytest
import torch

from dualgen import formulas as F

torch.manual_seed(0)


def test_every_public_helper_has_a_docstring():
    for name in F.__all__:
        assert getattr(F, name).__doc__, name


def test_scale_skips_one_and_scales_otherwise():
    t = torch.randn(3)
    assert F.scale(t, 1) is t
    torch.testing.assert_close(F.scale(t, 2.5), t * 2.5)


def test_scale_conj_conjugates_complex_factors():
    t = torch.randn(3, dtype=torch.complex128)
    assert F.scale_conj(t, 1) is t
    torch.testing.assert_close(F.scale_conj(t, 2 + 3j), t * (2 - 3j))
    torch.testing.assert_close(F.scale_conj(t, torch.tensor(1j)), t * -1j)


def test_unbroadcast_sums_to_shape_and_drops_imaginary_part_for_real_inputs():
    g = torch.randn(2, 3, 4, dtype=torch.complex128)
    like = torch.randn(3, 1)
    out = F.unbroadcast(g, like)
    torch.testing.assert_close(out, g.sum(0).sum(1, keepdim=True).real)
    assert F.unbroadcast(g, like.to(torch.complex128)).is_complex()


def test_copy_broadcast_copies_and_expands_only_when_needed():
    t = torch.randn(3, dtype=torch.float64)
    same = F.copy_broadcast(t, torch.empty(3))
    assert same._base is None and same.data_ptr() != t.data_ptr()
    torch.testing.assert_close(same, t)
    wide = F.copy_broadcast(t, torch.empty(2, 3))
    assert wide.shape == (2, 3) and wide.stride() == (0, 1)
    assert wide.data_ptr() != t.data_ptr()
    torch.testing.assert_close(wide, t.expand(2, 3))


def test_as_real_like():
    z = torch.randn(3, dtype=torch.complex128)
    torch.testing.assert_close(F.as_real_like(z, torch.randn(3)), z.real)
    assert F.as_real_like(z, z) is z


def test_conform_expands_to_the_result_and_keeps_the_tangent_dtype():
    result = torch.randn(3, 4)
    out = F.conform(torch.randn(4, dtype=torch.float64), result)
    assert out.shape == result.shape and out.dtype == torch.float64
    assert out.stride() == result.stride()
    same = torch.randn(3, 4)
    assert F.conform(same, result) is same
    z = torch.randn(3, 4, dtype=torch.complex128)
    torch.testing.assert_close(F.conform(z, result), z.real)
    # An output not computed (output_mask False) has no tangent.
    assert F.conform(torch.randn(3, 4), None) is None
    assert F.conform(None, result) is None


def test_fill_absent_builds_zeros_only_for_missing_tangents():
    a, b = torch.randn(2), torch.randn(3)
    out = F.fill_absent([a, None], [torch.randn(2), b])
    assert out[0] is a and torch.equal(out[1], torch.zeros(3))
    # No tangent list at all (a dense kernel branch): zeros for every tensor.
    zeros = F.fill_absent(None, [a, None, b])
    assert torch.equal(zeros[0], torch.zeros(2)) and zeros[1] is None
    assert torch.equal(zeros[2], torch.zeros(3))


@pytest.mark.parametrize(
    "dim, keepdim",
    [([1], False), ([0, 2], True), (None, False), ([], False), (-1, False)],
)
def test_expand_reduced_and_reduced_numel_invert_mean(dim, keepdim):
    x = torch.randn(2, 3, 4, requires_grad=True)
    y = x.mean(dim=dim, keepdim=keepdim) if dim not in (None, []) else x.mean()
    g = torch.randn_like(y)
    (expected,) = torch.autograd.grad(y, x, g)
    got = F.expand_reduced(g, x, dim, keepdim) / F.reduced_numel(x, dim)
    torch.testing.assert_close(got, expected)


def test_amax_grad_and_tangent_share_among_ties():
    x = torch.tensor(
        [[1.0, 3.0, 3.0], [2.0, 0.0, -1.0]], dtype=torch.float64, requires_grad=True
    )
    y = x.amax(dim=1)
    g = torch.tensor([1.0, 2.0], dtype=torch.float64)
    (expected,) = torch.autograd.grad(y, x, g)
    torch.testing.assert_close(
        F.amax_grad(g, x.detach(), y.detach(), [1], False), expected
    )
    t = torch.randn_like(x)
    _, jvp = torch.func.jvp(lambda a: a.amax(dim=1), (x.detach(),), (t,))
    torch.testing.assert_close(
        F.amax_tangent(t, x.detach(), y.detach(), [1], False), jvp
    )


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


def test_winner_weight_splits_ties():
    a = torch.tensor([1.0, 2.0, 3.0])
    b = torch.tensor([2.0, 2.0, 1.0])
    assert torch.equal(F.winner_weight(a, b), torch.tensor([0.0, 0.5, 1.0]))


def test_pow_derivatives_match_autograd_including_zero_cases():
    x = torch.tensor([0.0, 0.5, 2.0], dtype=torch.float64, requires_grad=True)
    e = torch.tensor([0.0, 2.0, 1.5], dtype=torch.float64, requires_grad=True)
    y = x.pow(e)
    gx, ge = torch.autograd.grad(y.sum(), (x, e))
    torch.testing.assert_close(F.pow_self_derivative(x.detach(), e.detach()), gx)
    torch.testing.assert_close(
        F.pow_exponent_derivative(x.detach(), e.detach(), y.detach()), ge
    )
    torch.testing.assert_close(
        F.pow_self_derivative(x.detach(), 0), torch.zeros(3, dtype=torch.float64)
    )


def test_clamp_mask_includes_bounds_and_handles_none():
    x = torch.tensor([-1.0, 0.0, 0.5, 1.0, 2.0])
    assert F.clamp_mask(x, 0.0, 1.0).tolist() == [False, True, True, True, False]
    assert F.clamp_mask(x, None, 0.5).tolist() == [True, True, True, False, False]


@pytest.mark.parametrize("keepdim", [False, True])
def test_gather_reduced_picks_the_selected_elements(keepdim):
    x = torch.randn(3, 4)
    values, indices = x.max(dim=1, keepdim=keepdim)
    assert torch.equal(F.gather_reduced(x, 1, indices, keepdim), values)
