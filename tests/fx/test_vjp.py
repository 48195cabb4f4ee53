"""dualgen.fx.vjp: a program of aten ops whose outputs and gradients are
torch.func.vjp's, at the example values and at new ones."""

from __future__ import annotations

import pytest
import torch
import torch.utils._pytree as pytree
import workloads
from workloads import chain, fresh

import dualgen.fx as dfx

torch.manual_seed(0)


def _check(f, primals, atol=1e-10, rtol=1e-7):
    gm = dfx.vjp(f, primals)
    for values in (primals, tuple(fresh(p) for p in primals)):
        out, vjp_fn = torch.func.vjp(f, *values)
        cotangents = pytree.tree_map(_cotangent, out)
        expected = (out, vjp_fn(cotangents))
        got = gm(*values, cotangents)
        torch.testing.assert_close(got, expected, atol=atol, rtol=rtol)
    return gm


def _cotangent(t):
    if t.is_floating_point() or t.is_complex():
        return torch.randn_like(t)
    return torch.zeros_like(t)


def test_elementwisechain():
    _check(chain, (torch.randn(5, dtype=torch.float64),))


def test_broadcasting_and_reuse():
    def f(x, b):
        h = x * b + b  # b broadcast, used twice
        return h.sum(1), h.mean()

    x, b = torch.randn(3, 4, dtype=torch.float64), torch.randn(4, dtype=torch.float64)
    _check(f, (x, b))


def test_complex():
    z = torch.randn(4, dtype=torch.complex128)
    _check(lambda z: (z.sin() * z.conj()).exp(), (z,))


def test_views_and_in_place_code():
    def f(x, y):
        z = x.clone()
        z[1:].mul_(y[:-1])
        z.t().add_(1.5)
        return z.view(-1).cumsum(0)

    x, y = torch.randn(3, 3, dtype=torch.float64), torch.randn(
        3, 3, dtype=torch.float64
    )
    _check(f, (x, y))


def test_tuple_outputs_and_an_unused_input():
    def f(x, y, unused):
        values, indices = x.max(dim=1)  # (no cotangent ever reaches indices)
        return values * 2, y.exp(), x.gather(1, indices[:, None])

    x, y = torch.randn(3, 4, dtype=torch.float64), torch.randn(2, dtype=torch.float64)
    gm = _check(f, (x, y, torch.randn(2, dtype=torch.float64)))
    cotangents = (torch.ones(3), y, torch.ones(3, 1))
    _, grads = gm(x, y, y, tuple(c.double() for c in cotangents))
    assert torch.equal(grads[2], torch.zeros(2, dtype=torch.float64))


def test_mlp_parameters_through_functional_call():
    _check(*workloads.mlp_parameters())


def test_convnet_with_batch_norm_in_eval():
    model, x = workloads.convnet_in_eval()
    _check(model, (x,))


def test_transformer_encoder_layer():
    f, x = workloads.transformer_layer()
    _check(f, (x,))


def test_names_and_formulas():
    gm = dfx.vjp(lambda x, y: x.sin() * y, (torch.randn(3), torch.randn(3)))
    names = [n.name for n in gm.graph.nodes]
    assert names[:3] == ["x", "y", "cotangent"]
    assert "x_grad" in names and "y_grad" in names and "sin_grad" in names
    assert "self: grad * self.cos().conj()" in gm.print_readable(print_output=False)


def test_an_op_without_a_vjp_kernel_is_named():
    lib = torch.library.Library("dualgen_fx_vjp_test", "FRAGMENT")
    lib.define("twice(Tensor x) -> Tensor")
    lib.impl("twice", lambda x: x * 2, "CompositeExplicitAutograd")
    with pytest.raises(dfx.NoRule, match="dualgen_fx_vjp_test.twice"):
        dfx.vjp(torch.ops.dualgen_fx_vjp_test.twice, (torch.randn(3),))


def test_compiles():
    x = torch.randn(6)
    gm = dfx.vjp(chain, (x,))
    compiled = torch.compile(gm, backend="eager")
    c = torch.randn(6)
    torch.testing.assert_close(compiled(x, c), gm(x, c))


def test_batch_norm_in_training_and_an_in_place_fill():
    """(torch.func refuses a function that updates a module's buffers: the
    reference here is torch.autograd.grad.)"""
    f, x = workloads.batch_norm_in_training_and_a_fill()
    c = torch.randn_like(x)
    gm = dfx.vjp(f, (x,))
    leaf = x.clone().requires_grad_()
    out = f(leaf)
    (expected,) = torch.autograd.grad(out, leaf, c)
    got_out, (got,) = gm(x, c)
    torch.testing.assert_close(got_out, out.detach())
    torch.testing.assert_close(got, expected)


def test_an_input_updated_through_a_detached_alias_is_refused():
    f, weight = workloads.embedding_with_max_norm()
    with pytest.raises(dfx.NoRule, match="detached alias"):
        dfx.vjp(f, (weight,))


def test_the_programs_export():
    """torch.export takes both programs (the issue's bonus): the exported
    modules give torch.func's values at new inputs."""

    def f(x, w):
        return (x @ w).tanh().sum(-1)

    x, w, x_t = torch.randn(3, 4), torch.randn(4, 5), torch.randn(3, 4)
    jvp_program = torch.export.export(
        dfx.jvp(f, (x, w), (x_t, None)), (x, w, x_t, None)
    )
    vjp_program = torch.export.export(dfx.vjp(f, (x, w)), (x, w, torch.randn(3)))
    x, x_t, cotangent = torch.randn(3, 4), torch.randn(3, 4), torch.randn(3)
    expected = torch.func.jvp(f, (x, w), (x_t, torch.zeros_like(w)))
    torch.testing.assert_close(jvp_program.module()(x, w, x_t, None), expected)
    out, vjp_fn = torch.func.vjp(f, x, w)
    torch.testing.assert_close(
        vjp_program.module()(x, w, cotangent), (out, vjp_fn(cotangent))
    )
