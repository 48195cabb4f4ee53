"""The helpers of dualgen.formulas.linalg_decompositions (SVD, eig, eigh, QR, pinv, lstsq) against
native forward AD (torch.func.jvp), torch.autograd.grad on gauge-invariant
functions of the outputs, and each backward helper as the adjoint of its forward
one; float64 and complex128."""

from __future__ import annotations

import pytest
import torch
from formula_checks import DTYPES, R

from dualgen import formulas as F

SHAPES = [(3, 3), (4, 3), (3, 4), (2, 3, 5), (2, 5, 3)]


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def close(actual, expected):
    torch.testing.assert_close(actual, expected, atol=1e-8, rtol=1e-7)


def jvp(fn, primals, tangents):
    return torch.func.jvp(fn, tuple(primals), tuple(tangents))[1]


def vjp(fn, inputs, grads):
    inputs = [x.detach().clone().requires_grad_() for x in inputs]
    out = fn(*inputs)
    out = out if isinstance(out, tuple) else (out,)
    return torch.autograd.grad(out, inputs, grads, materialize_grads=True)


def inner(gs, ts):
    """Re <g, t> summed over pairs: the pairing an adjoint must preserve."""
    return sum(torch.vdot(g.flatten(), t.flatten()).real for g, t in zip(gs, ts))


def column_outer(X, Y):
    return X.unsqueeze(-2) * Y.conj().unsqueeze(-3)


def assert_grad_through_invariant(decompose, A, L, V, grad):
    """grad(gL, gV), for the gradients of (L, V) = decompose(A) that a function
    of the eigenvalues and of the projectors V V^H (invariant to the vectors'
    phases) gives, equals autograd's gradient of that function."""

    def invariant(a):
        L, V = decompose(a)
        return L, column_outer(V, V)

    g_out = [torch.randn_like(o) for o in invariant(A)]
    leaves = [x.detach().clone().requires_grad_() for x in (L, V)]
    gL, gV = torch.autograd.grad(
        (leaves[0], column_outer(leaves[1], leaves[1])), leaves, g_out
    )
    (expected,) = vjp(invariant, [A], g_out)
    close(grad(gL, gV), expected)


# ---------------------------------------------------------------- SVD


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("full_matrices", [False, True])
def test_svd_tangents_match_native_and_svd_grad_is_their_adjoint(
    shape, full_matrices, dtype
):
    A, dA = torch.randn(shape, dtype=dtype), torch.randn(shape, dtype=dtype)

    def fn(a):
        return torch.ops.aten._linalg_svd(a, full_matrices, True)

    U, S, Vh = fn(A)
    got = F.svd_tangents(dA, A, U, S, Vh, full_matrices, True)
    # Native gives the extra full_matrices columns tangents it calls undefined.
    k = S.shape[-1]
    thin = [lambda x: x[..., :k], lambda x: x, lambda x: x[..., :k, :]]
    for cut, g, e in zip(thin, got, jvp(fn, [A], [dA])):
        close(cut(g), cut(e))
    gs = [torch.randn_like(U), torch.randn_like(S), torch.randn_like(Vh)]
    gA = F.svd_grad(*gs, A, U, S, Vh, full_matrices, True)
    close(inner([gA], [dA]), inner(gs, got))  # zero tangents on extra columns

    def invariant(a):  # native refuses phase-dependent cotangents
        U, S, Vh = fn(a)
        return S, column_outer(U[..., :k], Vh[..., :k, :].mH)

    out = invariant(A)
    g_out = [torch.randn_like(o) for o in out]
    leaves = [x.detach().clone().requires_grad_() for x in (U, S, Vh)]
    gU, gS, gVh = torch.autograd.grad(
        (leaves[1], column_outer(leaves[0][..., :k], leaves[2][..., :k, :].mH)),
        leaves,
        g_out,
        materialize_grads=True,
    )
    (expected,) = vjp(invariant, [A], g_out)
    close(F.svd_grad(gU, gS, gVh, A, U, S, Vh, full_matrices, True), expected)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(4, 3), (3, 5)])
def test_svd_helpers_without_compute_uv_serve_svdvals(shape, dtype):
    A, dA = torch.randn(shape, dtype=dtype), torch.randn(shape, dtype=dtype)
    U, S, Vh = torch.ops.aten._linalg_svd(A, False, False)
    dU, dS, dVh = F.svd_tangents(dA, A, U, S, Vh, False, False)
    assert dU.shape == U.shape and dVh.shape == Vh.shape
    close(dS, jvp(torch.linalg.svdvals, [A], [dA]))
    g = torch.randn_like(S)
    zero = torch.zeros(0, dtype=dtype)
    (expected,) = vjp(torch.linalg.svdvals, [A], [g])
    close(F.svd_grad(zero, g, zero, A, U, S, Vh, False, False), expected)


# ---------------------------------------------------------------- eig, eigh


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4)])
def test_eig_tangents_match_native_and_eig_grad_is_their_adjoint(shape, dtype):
    A, dA = torch.randn(shape, dtype=dtype), torch.randn(shape, dtype=dtype)
    L, V = torch.linalg.eig(A)
    got = F.eig_tangents(dA, L, V)
    for g, e in zip(got, jvp(torch.linalg.eig, [A], [dA])):
        close(g, e)
    gs = [torch.randn_like(L), torch.randn_like(V)]
    gA = F.eig_grad(*gs, A, L, V)
    assert gA.dtype == dtype
    close(inner([gA], [dA]), inner(gs, got))
    assert_grad_through_invariant(
        torch.linalg.eig, A, L, V, lambda gL, gV: F.eig_grad(gL, gV, A, L, V)
    )


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4)])
def test_eigh_tangents_match_native_and_eigh_grad_is_their_adjoint(shape, dtype):
    A, dA = torch.randn(shape, dtype=dtype), torch.randn(shape, dtype=dtype)
    H = A + A.mH
    L, V = torch.linalg.eigh(H)
    # Native forward AD takes the tangent as given, not symmetrised.
    got = F.eigh_tangents(dA, H, L, V, True)
    for g, e in zip(got, jvp(torch.linalg.eigh, [H], [dA])):
        close(g, e)
    # eigh_grad is Hermitian: the adjoint on Hermitian tangents.
    gs = [torch.randn_like(L), torch.randn_like(V)]
    gA = F.eigh_grad(*gs, H, L, V, True)
    close(gA, gA.mH)
    dH = dA + dA.mH
    close(inner([gA], [dH]), inner(gs, F.eigh_tangents(dH, H, L, V, True)))
    assert_grad_through_invariant(
        torch.linalg.eigh, H, L, V, lambda gL, gV: F.eigh_grad(gL, gV, H, L, V, True)
    )


@pytest.mark.parametrize("dtype", DTYPES)
def test_eigh_helpers_without_compute_v_serve_eigvalsh(dtype):
    A, dA = torch.randn(3, 3, dtype=dtype), torch.randn(3, 3, dtype=dtype)
    H, dH = A + A.mH, dA + dA.mH
    L, V = torch.ops.aten._linalg_eigh(H, "L", False)
    dL, dV = F.eigh_tangents(dH, H, L, V, False)
    assert dV.shape == V.shape
    close(dL, jvp(torch.linalg.eigvalsh, [H], [dH]))
    g = torch.randn_like(L)
    (expected,) = vjp(torch.linalg.eigvalsh, [H], [g])
    got = F.eigh_grad(g, torch.zeros(0, dtype=dtype), H, L, V, False)
    close(got, expected)


# ---------------------------------------------------------------- QR


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("mode", ["reduced", "complete"])
def test_qr_helpers_match_native(shape, mode, dtype):
    if mode == "complete" and shape[-2] > shape[-1]:
        pytest.skip("not differentiable: native refuses too")
    A, dA = torch.randn(shape, dtype=dtype), torch.randn(shape, dtype=dtype)

    def fn(a):
        return torch.linalg.qr(a, mode)

    Q, R_ = fn(A)
    got = F.qr_tangents(dA, Q, R_, mode)
    for g, e in zip(got, jvp(fn, [A], [dA])):
        close(g, e)
    gs = [torch.randn_like(Q), torch.randn_like(R_)]
    close(F.qr_grad(*gs, A, Q, R_, mode), vjp(fn, [A], gs)[0])


def test_qr_helpers_refuse_what_native_refuses():
    A = torch.randn(4, 3, dtype=R)
    Q, R_ = torch.linalg.qr(A, "complete")
    with pytest.raises(RuntimeError, match="mode='complete'"):
        F.qr_tangents(A, Q, R_, "complete")
    Q, R_ = torch.linalg.qr(A, "r")
    with pytest.raises(RuntimeError, match="mode='r'"):
        F.qr_grad(torch.zeros(0), R_, A, Q, R_, "r")


# ---------------------------------------------------------------- pinv, lstsq


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_pinv_helpers_match_native(shape, dtype):
    A, dA = torch.randn(shape, dtype=dtype), torch.randn(shape, dtype=dtype)
    P = torch.linalg.pinv(A)
    close(F.pinv_tangent(dA, A, P), jvp(torch.linalg.pinv, [A], [dA]))
    g = torch.randn_like(P)
    close(F.pinv_grad(g, A, P), vjp(torch.linalg.pinv, [A], [g])[0])


LSTSQ_CASES = [
    ((5, 3), (5, 2), None),
    ((5, 3), (5,), "gels"),
    ((2, 5, 3), (2, 5), "gels"),
    ((2, 5, 3), (1, 5, 2), "gelsd"),
    ((3, 3), (3, 4), None),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("a_shape, b_shape, driver", LSTSQ_CASES)
def test_lstsq_helpers_match_native(a_shape, b_shape, driver, dtype):
    A, B = torch.randn(a_shape, dtype=dtype), torch.randn(b_shape, dtype=dtype)
    dA, dB = torch.randn_like(A), torch.randn_like(B)

    def fn(a, b):
        out = torch.linalg.lstsq(a, b, driver=driver)
        return out.solution, out.residuals

    X, res = fn(A, B)
    eX, eres = jvp(fn, [A, B], [dA, dB])
    close(F.lstsq_self_tangent(dA, A, B) + F.lstsq_b_tangent(dB, A), eX)
    close(F.lstsq_residuals_tangent(dA, dB, A, B, X, res), eres)
    assert res.numel() > 0 or driver is None  # gels, gelsd: residuals for m > n
    gX, gres = torch.randn_like(X), torch.randn_like(res)
    gA, gB = F.lstsq_grads(gX, gres, A, B, X, res)
    eA, eB = vjp(fn, [A, B], [gX, gres])
    close(gA, eA)
    close(gB, eB)


def _sqrth(A):
    """The principal square root of a Hermitian positive-definite A, written out."""
    L, V = torch.linalg.eigh(A)
    return V @ torch.diag_embed(L.sqrt().to(A.dtype)) @ V.mH


@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_hermitian_sqrt_differential_is_the_derivative_and_its_own_adjoint(
    shape, dtype
):
    """linalg_matrix_sqrth's helper (torch 2.14): native forward AD through the
    square root written out with eigh, and self-adjoint on Hermitian directions
    (its backward formula is the same call)."""
    B = torch.randn(shape, dtype=dtype)
    A = B @ B.mH + torch.eye(shape[-1], dtype=dtype)
    hermitian = lambda M: (M + M.mH) / 2
    T, G = hermitian(torch.randn(shape, dtype=dtype)), hermitian(
        torch.randn(shape, dtype=dtype)
    )
    X = _sqrth(A)
    close(F.hermitian_sqrt_differential(X, T), jvp(_sqrth, [A], [T]))
    close(
        inner([F.hermitian_sqrt_differential(X, G)], [T]),
        inner([G], [F.hermitian_sqrt_differential(X, T)]),
    )


def _polar(A):
    """The polar factors of A (m >= n) written out with the SVD A = W S V^H:
    U = W V^H, H = V S V^H (gauge-free)."""
    W, S, Vh = torch.linalg.svd(A, full_matrices=False)
    return W @ Vh, Vh.mH @ torch.diag_embed(S.to(A.dtype)) @ Vh


@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 3)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_polar_tangents_are_the_derivative_and_polar_backward_their_adjoint(
    shape, dtype
):
    """linalg_polar's helpers (torch 2.14): native forward AD through the factors
    written out with the SVD, and polar_backward the adjoint of polar_tangents
    (with one gradient absent too)."""
    A, T = torch.randn(shape, dtype=dtype), torch.randn(shape, dtype=dtype)
    U, H = _polar(A)
    dU, dH = F.polar_tangents(T, U, H)
    expected_dU, expected_dH = jvp(_polar, [A], [T])
    close(dU, expected_dU)
    close(dH, expected_dH)
    gU, gH = torch.randn_like(U), torch.randn_like(H)
    close(inner([F.polar_backward(gU, gH, U, H)], [T]), inner([gU, gH], [dU, dH]))
    close(inner([F.polar_backward(None, gH, U, H)], [T]), inner([gH], [dH]))
