"""dualgen.fx.jvp: a program of aten ops whose values are torch.func.jvp's, at the
example values and at new ones, with absent tangents costing nothing."""

from __future__ import annotations

import operator

import pytest
import torch
import workloads
from torch import nn
from workloads import chain, fresh

import dualgen.fx as dfx

torch.manual_seed(0)


def _check(f, primals, tangents, atol=1e-10, rtol=1e-7):
    """The program against torch.func.jvp at the example values and at new ones
    of the same shapes and dtypes; returns the program."""
    gm = dfx.jvp(f, primals, tangents)
    for values in (primals, tuple(fresh(p) for p in primals)):
        given = tuple(fresh(t) if t is not None else None for t in tangents)
        filled = tuple(
            t if t is not None else torch.zeros_like(p) for p, t in zip(values, given)
        )
        expected = torch.func.jvp(f, values, filled)
        got = gm(*values, *given)
        torch.testing.assert_close(got, expected, atol=atol, rtol=rtol)
    return gm


def _targets(gm):
    return [n.target for n in gm.graph.nodes if n.op == "call_function"]


def test_elementwisechain():
    x = torch.randn(5, dtype=torch.float64)
    _check(chain, (x,), (torch.randn_like(x),))


def test_complex():
    z = torch.randn(4, dtype=torch.complex128)
    _check(lambda z: (z.sin() * z.conj()).exp(), (z,), (torch.randn_like(z),))


def test_views_and_in_place_code():
    def f(x, y):
        z = x.clone()
        z[1:].mul_(y[:-1])
        w = z.t() if z.dim() == 2 else z
        w.add_(1.5)
        return z.view(-1).cumsum(0), w

    x, y = torch.randn(3, 3, dtype=torch.float64), torch.randn(
        3, 3, dtype=torch.float64
    )
    _check(f, (x, y), (torch.randn_like(x), torch.randn_like(y)))
    _check(f, (x, y), (None, torch.randn_like(y)))


def test_an_input_mutated_in_place():
    def f(x, y):
        x.mul_(y)
        return x.sum(0), y * 2

    def run(x, y):
        return f(x.clone(), y)

    x, y = torch.randn(3, 2, dtype=torch.float64), torch.randn(
        3, 2, dtype=torch.float64
    )
    _check(run, (x, y), (torch.randn_like(x), None))


def test_tuple_outputs_with_an_absent_tangent():
    def f(x, y):
        values, indices = x.max(dim=1)
        return values * 2, indices, y.exp()

    x, y = torch.randn(3, 4, dtype=torch.float64), torch.randn(2, dtype=torch.float64)
    gm = _check(f, (x, y), (torch.randn_like(x), None))
    _, tangents = gm(x, y, torch.randn_like(x), None)
    # y has no tangent: its output's tangent is zeros, as torch.func.jvp gives
    assert torch.equal(tangents[2], torch.zeros_like(y))


def test_mlp_parameters_through_functional_call():
    f, params = workloads.mlp_parameters()
    _check(f, params, tuple(torch.randn_like(p) for p in params))


def test_convnet_with_batch_norm_in_eval():
    model, x = workloads.convnet_in_eval()
    _check(model, (x,), (torch.randn_like(x),))


def test_transformer_encoder_layer():
    f, x = workloads.transformer_layer()
    _check(f, (x,), (torch.randn_like(x),))


def test_only_aten_ops():
    x = torch.randn(3, 4)
    gm = dfx.jvp(chain, (x,), (torch.randn_like(x),))
    for target in _targets(gm):
        assert target is operator.getitem or (
            isinstance(target, torch._ops.OpOverload)
            and target.namespace in ("aten", "prims")
        ), target


def test_an_absent_tangent_costs_nothing():
    x, y = torch.randn(3), torch.randn(3)
    gm = dfx.jvp(lambda x, y: x.sin() * y, (x, y), (torch.randn(3), None))
    y_t = next(n for n in gm.graph.nodes if n.name == "y_t")
    assert not y_t.users  # nothing reads y's (absent) tangent
    ops = [str(t) for t in _targets(gm)]
    assert "aten.zeros_like.default" not in ops and "aten.zeros.default" not in ops
    # sin, its tangent (cos, mul), the product, its tangent (one mul: no y_t term)
    assert len(ops) == 5, ops


def test_names_follow_the_primals():
    x = torch.randn(3)
    gm = dfx.jvp(lambda x: x.sin().exp(), (x,), (torch.randn(3),))
    names = [n.name for n in gm.graph.nodes]
    assert names[:2] == ["x", "x_t"]
    assert "sin" in names and "sin_t" in names and "exp" in names and "exp_t" in names
    code = gm.print_readable(print_output=False)
    assert "grad * self.cos().conj()" in code  # sin's formula, as a comment
    assert "jvp.py" in code


def test_an_op_without_a_kernel_is_named():
    lib = torch.library.Library("dualgen_fx_test", "FRAGMENT")
    lib.define("twice(Tensor x) -> Tensor")
    lib.impl("twice", lambda x: x * 2, "CompositeExplicitAutograd")
    x = torch.randn(3)
    with pytest.raises(dfx.NoRule, match="dualgen_fx_test.twice"):
        dfx.jvp(torch.ops.dualgen_fx_test.twice, (x,), (torch.randn(3),))
    # without a tangent reaching it, it needs none
    gm = dfx.jvp(lambda x, y: torch.ops.dualgen_fx_test.twice(y) + x, (x, x), (x, None))
    assert torch.equal(gm(x, x, x, None)[1], x)


def test_a_user_rule_is_traced():
    lib = torch.library.Library("dualgen_fx_rule", "FRAGMENT")
    lib.define("thrice(Tensor x) -> Tensor")
    lib.impl("thrice", lambda x: x * 3, "CompositeExplicitAutograd")
    import dualgen

    @dualgen.register_jvp(torch.ops.dualgen_fx_rule.thrice.default)
    def thrice_jvp(x_p, x_t, result):
        return x_t * 3

    x, t = torch.randn(3), torch.randn(3)
    try:
        gm = dfx.jvp(torch.ops.dualgen_fx_rule.thrice, (x,), (t,))
    finally:
        dualgen.unregister_jvp(torch.ops.dualgen_fx_rule.thrice.default)
    assert torch.equal(gm(x, t)[1], t * 3)


def test_compiles():
    x = torch.randn(6)
    gm = dfx.jvp(chain, (x,), (torch.randn(6),))
    compiled = torch.compile(gm, backend="eager")
    t = torch.randn(6)
    torch.testing.assert_close(compiled(x, t), gm(x, t))


def test_the_tangents_given_are_not_written():
    def f(x, y):
        x.mul_(y)  # an input mutated: the program writes it back, as f would
        return x * 2

    x, y = torch.randn(3, dtype=torch.float64), torch.randn(3, dtype=torch.float64)
    x_t, y_t = torch.randn(3, dtype=torch.float64), torch.randn(3, dtype=torch.float64)
    gm = dfx.jvp(f, (x.clone(), y), (x_t, y_t))
    given = (x_t.clone(), y_t.clone())
    x_run = x.clone()
    _, tangent = gm(x_run, y, *given)
    assert torch.equal(given[0], x_t) and torch.equal(given[1], y_t)
    assert torch.allclose(x_run, x * y)  # written back
    torch.testing.assert_close(tangent, 2 * (x_t * y + x * y_t))


def test_batch_norm_in_training_and_an_in_place_fill():
    """(torch.func refuses a function that updates a module's buffers: the
    reference here is torch.autograd.forward_ad.)"""
    import torch.autograd.forward_ad as fwAD

    f, x = workloads.batch_norm_in_training_and_a_fill()
    t = torch.randn_like(x)
    gm = dfx.jvp(f, (x,), (t,))
    with fwAD.dual_level():
        expected = fwAD.unpack_dual(f(fwAD.make_dual(x, t)))
    torch.testing.assert_close(gm(x, t), tuple(expected))


def test_a_value_read_while_traced_stops_the_trace():
    """A program that fixed `x.max().item()` would be wrong at other values."""
    x = torch.randn(3)
    with pytest.raises(RuntimeError, match="data-dependent"):
        dfx.jvp(lambda x: x * x.max().item(), (x,), (torch.randn(3),))


def test_the_transformer_layer_program_compiles_with_inductor():
    """torch.compile(torch.func.jvp(layer)) fails in torch 2.13 (layer_norm under
    the jvp transform); the program compiles and gives its values."""
    f, x = workloads.transformer_layer(torch.float32)
    gm = dfx.jvp(f, (x,), (torch.randn_like(x),))
    torch._dynamo.reset()
    compiled = torch.compile(gm)
    x2, t2 = torch.randn_like(x), torch.randn_like(x)
    torch.testing.assert_close(compiled(x2, t2), gm(x2, t2), atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(
        gm(x2, t2), torch.func.jvp(f, (x2,), (t2,)), atol=1e-5, rtol=1e-4
    )


def test_an_input_updated_through_a_detached_alias_is_refused():
    """Native keeps the tangent of an input updated through a detached alias
    (F.embedding's max_norm): a program of values cannot tell that update from
    a copy of a detached value, so it says so rather than guess."""
    f, weight = workloads.embedding_with_max_norm()
    with pytest.raises(dfx.NoRule, match="detached alias"):
        dfx.jvp(f, (weight,), (torch.ones_like(weight),))


def test_an_intermediate_updated_through_a_detached_alias_is_refused():
    def f(x):
        y = x * 2
        y.detach().mul_(3)  # native: y's values change, its tangent does not
        return y

    x = torch.randn(3)
    with pytest.raises(dfx.NoRule, match="detached alias"):
        dfx.jvp(f, (x,), (torch.randn(3),))
    with pytest.raises(dfx.NoRule, match="detached alias"):
        dfx.vjp(f, (x,))


def test_a_detached_value_used_as_a_value_is_fine():
    def f(x):
        return x * x.detach().exp()  # no update: the detached factor is a constant

    x = torch.randn(3, dtype=torch.float64)
    _check(f, (x,), (torch.randn_like(x),))


def test_a_modules_parameters_are_held_detached():
    """(Held requiring grad, torch.compile would trace a backward pass for them.)"""
    model = nn.Linear(4, 3)
    x = torch.randn(2, 4)
    gm = dfx.jvp(model, (x,), (torch.randn(2, 4),))
    held = [b for b in gm.buffers()] + [p for p in gm.parameters()]
    assert held and not any(t.requires_grad for t in held)
    with torch.no_grad():
        model.weight.mul_(2)  # the same memory: the program sees the update
    torch.testing.assert_close(gm(x, x)[0], model(x).detach())


def test_tracing_leaves_the_callers_tensors_alone():
    def f(x):
        x.mul_(2)  # f updates its input: the program will, tracing must not
        return x.sin()

    x = torch.randn(3)
    kept = x.clone()
    gm = dfx.jvp(f, (x,), (torch.randn(3),))
    dfx.vjp(f, (x,))
    assert torch.equal(x, kept)
    out, _ = gm(x, torch.randn(3))
    assert torch.equal(x, kept * 2) and torch.allclose(out, (kept * 2).sin())
