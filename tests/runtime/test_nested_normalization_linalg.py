"""Second and third derivatives through normalizations, det, slogdet and solve.

Forward over forward at two and three dualgen levels, float64, against the same
functions written out in elementary ops, differentiated by nested torch.func.jvp:
an oracle that shares none of the ops' formulas (torch.func's nested jvp of the ops
themselves reads saved statistics and LU factorizations as constants, as dualgen
did). Forward over reverse (dualgen.func.hessian) against torch's reverse over
reverse of the same ops. These ops' formulas read outputs (mean, rstd, invstd, LU)
that must move with the input at outer levels.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from devices import DEVICE

import dualgen.forward_ad as fwAD
import dualgen.func as dfunc

F64 = torch.float64
EPS = 1e-5


def _normalized(x, dims, eps=EPS):
    mean = x.mean(dims, keepdim=True)
    var = (x - mean).pow(2).mean(dims, keepdim=True)
    return (x - mean) / (var + eps).sqrt()


def _det3(a):
    # Leibniz's formula for 3x3 (batched): products and sums only.
    return (
        a[..., 0, 0] * (a[..., 1, 1] * a[..., 2, 2] - a[..., 1, 2] * a[..., 2, 1])
        - a[..., 0, 1] * (a[..., 1, 0] * a[..., 2, 2] - a[..., 1, 2] * a[..., 2, 0])
        + a[..., 0, 2] * (a[..., 1, 0] * a[..., 2, 1] - a[..., 1, 1] * a[..., 2, 0])
    )


def _inverse3(a):
    # The adjugate over the determinant, cofactor by cofactor.
    rows = []
    for i in range(3):
        row = []
        for j in range(3):
            r = [k for k in range(3) if k != j]
            c = [k for k in range(3) if k != i]
            minor = (
                a[..., r[0], c[0]] * a[..., r[1], c[1]]
                - a[..., r[0], c[1]] * a[..., r[1], c[0]]
            )
            row.append(minor if (i + j) % 2 == 0 else -minor)
        rows.append(torch.stack(row, -1))
    return torch.stack(rows, -2) / _det3(a)[..., None, None]


def _shift(a):
    return a + 3 * torch.eye(3, dtype=a.dtype)  # well conditioned


def _weight(n):
    return torch.linspace(0.5, 1.5, n, dtype=F64)


CASES = {
    # name: (op as users call it, written out, input shape)
    "layer_norm": (
        lambda x: F.layer_norm(x, (5,)).sin(),
        lambda x: _normalized(x, [-1]).sin(),
        (3, 5),
    ),
    "layer_norm_2d_affine": (
        lambda x: F.layer_norm(x, (3, 4), x[0] * 0.5, x[1]).tanh(),
        lambda x: (_normalized(x, [-2, -1]) * (x[0] * 0.5) + x[1]).tanh(),
        (2, 3, 4),
    ),
    "batch_norm": (
        lambda x: F.batch_norm(x, None, None, training=True).sin(),
        lambda x: _normalized(x, [0]).sin(),
        (6, 3),
    ),
    "batch_norm_affine_running": (
        lambda x: F.batch_norm(
            x,
            torch.zeros(3, dtype=F64),
            torch.ones(3, dtype=F64),
            _weight(3),
            _weight(3).flip(0),
            training=True,
        ).sin(),
        lambda x: (
            _normalized(x, [0, 2]) * _weight(3)[:, None] + _weight(3).flip(0)[:, None]
        ).sin(),
        (4, 3, 2),
    ),
    "instance_norm": (
        lambda x: F.instance_norm(x).sin(),
        lambda x: _normalized(x, [2]).sin(),
        (2, 3, 5),
    ),
    "group_norm": (
        lambda x: F.group_norm(x, 2).sin(),
        lambda x: _normalized(x.reshape(2, 2, -1), [2]).reshape(x.shape).sin(),
        (2, 4, 3),
    ),
    "rms_norm": (
        lambda x: F.rms_norm(x, (5,), eps=EPS).sin(),
        lambda x: (x / (x.pow(2).mean(-1, keepdim=True) + EPS).sqrt()).sin(),
        (3, 5),
    ),
    "det": (lambda a: torch.linalg.det(a), _det3, (2, 3, 3)),
    "det_transposed": (lambda a: torch.linalg.det(a.mT), lambda a: _det3(a), (3, 3)),
    "logdet": (
        lambda a: torch.logdet(_shift(a @ a.mT)),
        lambda a: _det3(_shift(a @ a.mT)).log(),
        (3, 3),
    ),
    "slogdet": (
        lambda a: torch.linalg.slogdet(a)[1],
        lambda a: _det3(a).abs().log(),
        (2, 3, 3),
    ),
    "solve": (
        lambda a: torch.linalg.solve(_shift(a), a[..., :2].sin()),
        lambda a: _inverse3(_shift(a)) @ a[..., :2].sin(),
        (2, 3, 3),
    ),
    "solve_left_false": (
        lambda a: torch.linalg.solve(_shift(a), a[:2].cos(), left=False),
        lambda a: a[:2].cos() @ _inverse3(_shift(a)),
        (3, 3),
    ),
    "solve_ex": (
        lambda a: torch.linalg.solve_ex(_shift(a), a[0])[0],
        lambda a: _inverse3(_shift(a)) @ a[0],
        (3, 3),
    ),
    "inv": (
        lambda a: torch.linalg.inv(_shift(a)),
        lambda a: _inverse3(_shift(a)),
        (3, 3),
    ),
    "tensorsolve": (
        lambda a: torch.linalg.tensorsolve(_shift(a), a[0].exp()),
        lambda a: _inverse3(_shift(a)) @ a[0].exp(),
        (3, 3),
    ),
}


def _dualgen_nested(f, x, tangents):
    """The innermost tangent of f at len(tangents) dualgen levels (tangents[0]
    at the outermost): u^T H v at two levels, the third derivative at three."""
    if len(tangents) == 1:
        with fwAD.dual_level():
            return fwAD.unpack_dual(f(fwAD.make_dual(x, tangents[0]))).tangent
    with fwAD.dual_level():
        dual = fwAD.make_dual(x, tangents[0])
        inner = _dualgen_nested(f, dual, tangents[1:])
        return fwAD.unpack_dual(inner).tangent


def _func_nested(f, x, tangents):
    """The same derivative of the written-out f by nested torch.func.jvp."""
    if len(tangents) == 1:
        return torch.func.jvp(f, (x,), (tangents[0],))[1]
    return torch.func.jvp(
        lambda y: _func_nested(f, y, tangents[1:]), (x,), (tangents[0],)
    )[1]


def _inputs(shape, order, seed):
    g = torch.Generator(DEVICE).manual_seed(seed)
    x = torch.randn(shape, dtype=F64, generator=g)
    return x, [torch.randn(shape, dtype=F64, generator=g) for _ in range(order)]


@pytest.mark.parametrize("order", [2, 3])
@pytest.mark.parametrize("name", sorted(CASES))
def test_nested_levels_match_the_written_out_function(name, order):
    op, written_out, shape = CASES[name]
    x, tangents = _inputs(shape, order, seed=order)
    torch.testing.assert_close(op(x), written_out(x), rtol=1e-10, atol=1e-10)
    got = _dualgen_nested(op, x, tangents)
    expected = _func_nested(written_out, x, tangents)
    assert got is not None, "no tangent at the outer level"
    torch.testing.assert_close(got, expected, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("name", sorted(CASES))
def test_forward_over_reverse_matches_reverse_over_reverse(name):
    op, _, shape = CASES[name]
    x, _ = _inputs(shape, 0, seed=7)
    weights = torch.randn(op(x).shape, dtype=F64, generator=torch.Generator(DEVICE))

    def scalar(a):
        return (op(a) * weights).sum()

    expected = torch.autograd.functional.hessian(scalar, x)
    torch.testing.assert_close(dfunc.hessian(scalar)(x), expected, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("name", sorted(CASES))
def test_reverse_over_forward_matches_the_written_out_function(name):
    """torch.autograd.grad of <w, J u> (the tangent under a dualgen level, inputs
    requiring grad): H_w u, against nested torch.func of the written-out f."""
    op, written_out, shape = CASES[name]
    x, (u,) = _inputs(shape, 1, seed=11)
    weights = torch.randn(op(x).shape, dtype=F64, generator=torch.Generator(DEVICE))
    leaf = x.clone().requires_grad_()
    with fwAD.dual_level():
        tangent = fwAD.unpack_dual(op(fwAD.make_dual(leaf, u))).tangent
        (got,) = torch.autograd.grad((tangent * weights).sum(), leaf)

    def scalar(a):
        return (written_out(a) * weights).sum()

    expected = torch.func.jvp(torch.func.grad(scalar), (x,), (u,))[1]
    torch.testing.assert_close(got, expected, rtol=1e-9, atol=1e-9)
