"""Computations against native forward AD: element-wise chains, broadcasting
mixes of dual and plain values, reductions, matmuls, MLPs; outputs that cannot
carry tangents; ops without rules and out= variants.

See forward_ad_checks.py for how the runs are compared.
"""

from __future__ import annotations

import pytest
import torch
import torch.autograd.forward_ad as native_fwAD
from forward_ad_checks import (
    DTYPE,
    aten,
    error_of,
    jvp_of,
    mlp,
    no_level_left_behind,  # noqa: F401 - autouse
    randn,
    run_both,
    shares_memory,
    unpack_all,
)
from torch import nn
from torch.testing import assert_close

import dualgen
import dualgen.forward_ad as dual_fwAD
from dualgen.generated.registry import KERNELS

# --------------------------------------------------------------------------------------
# 4. computations against native


UNARY = {
    "sin_cos_exp": lambda x: x.sin().cos().exp(),
    "tanh_sigmoid": lambda x: torch.sigmoid(torch.tanh(x) * 3),
    "log_sqrt_abs": lambda x: (x.abs() + 1).log() + (x * x + 1).sqrt(),
    "log2_log1p_rsqrt": lambda x: (x * x + 1).log2()
    + x.abs().log1p()
    + (x * x + 2).rsqrt(),
    "exp2_expm1": lambda x: torch.exp2(x) - x.expm1(),
    "relu_pow": lambda x: torch.relu(x) ** 2 + x.pow(3),
    "reciprocal_div": lambda x: 1 / (x * x + 1) + x / 3,
    "rpow": lambda x: 2.0**x,
    "pow_tensor_tensor": lambda x: (x * x + 1) ** torch.cos(x),
    "clamp": lambda x: x.clamp(-0.5, 0.5) + x.clamp(min=0.1),
    "neg_erf": lambda x: -torch.erf(x),
    "trig": lambda x: x.tan() * 0.1
    + (x.tanh() * 0.9).asin()
    + (x.tanh() * 0.9).acos()
    + x.atan(),
    "hyperbolic": lambda x: x.sinh() * x.cosh(),
    "where": lambda x: torch.where(x > 0, x.exp(), x * 2),
    "square_clone": lambda x: x.square().clone(),
    "to_float32": lambda x: x.float() * 2,
    "softmax": lambda x: torch.softmax(x, -1),
    "log_softmax": lambda x: torch.log_softmax(x, 0),
    "functional_softmax": lambda x: nn.functional.softmax(x * 2, dim=1),
}


@pytest.mark.parametrize("name", UNARY)
def test_elementwise_chains(name):
    x, t = randn(3, 4), randn(3, 4)
    run_both(jvp_of(UNARY[name], (x, t)))


BINARY = {
    "dual_mul_tensor": lambda d, p: d * p,
    "tensor_mul_dual": lambda d, p: p * d,
    "dual_add_scalar": lambda d, p: d + 2.0,
    "scalar_mul_dual": lambda d, p: 3.0 * d,
    "tensor_sub_dual": lambda d, p: p - d,
    "dual_sub_tensor": lambda d, p: d - p,
    "dual_div_tensor": lambda d, p: d / (p * p + 1),
    "tensor_div_dual": lambda d, p: p / (d * d + 1),
    "add_alpha": lambda d, p: torch.add(p, d, alpha=2.5),
    "sub_alpha": lambda d, p: torch.sub(d, p, alpha=-0.5),
    "dual_dual": lambda d, p: d * d.sin() + d / (d.exp() + 1),
    "maximum": lambda d, p: torch.maximum(d, p),
    "minimum": lambda d, p: torch.minimum(p, d),
    "atan2": lambda d, p: torch.atan2(d, p),
    "where_mixed": lambda d, p: torch.where(p > 0, d, p),
    "pow_plain_exponent": lambda d, p: (d * d + 1) ** p,
    "pow_dual_exponent": lambda d, p: (p * p + 1) ** d,
}

SHAPES = {
    "same": ((3, 4), (3, 4)),
    "dual_broadcast": ((4,), (3, 4)),
    "plain_broadcast": ((3, 1, 4), (2, 1)),
}


@pytest.mark.parametrize("shapes", SHAPES)
@pytest.mark.parametrize("name", BINARY)
def test_binary_ops_mixing_dual_and_plain(name, shapes):
    dual_shape, plain_shape = SHAPES[shapes]
    x, t, p = randn(*dual_shape), randn(*dual_shape), randn(*plain_shape)
    run_both(jvp_of(BINARY[name], (x, t), (p, None)))


def test_both_operands_dual_with_broadcasting():
    a, ta, b, tb = randn(3, 1), randn(3, 1), randn(4), randn(4)
    run_both(jvp_of(lambda a, b: a * b + a / (b * b + 1) - b, (a, ta), (b, tb)))


REDUCTIONS = {
    "sum": lambda x: x.sum(),
    "sum_dim": lambda x: x.sum(1),
    "sum_dims_keepdim": lambda x: x.sum((0, 2), keepdim=True),
    "sum_dtype": lambda x: x.sum(dtype=torch.float32),
    "mean": lambda x: x.mean(),
    "mean_dim": lambda x: x.mean(-1, keepdim=True),
    "amax": lambda x: x.amax(1),
    "amin": lambda x: x.amin((0, 1)),
    "max_dim": lambda x: x.max(dim=1),
    "min_dim": lambda x: x.min(dim=0, keepdim=True),
    "softmax_sum": lambda x: torch.softmax(x, 1).sum(1),
}


@pytest.mark.parametrize("name", REDUCTIONS)
def test_reductions(name):
    x, t = randn(2, 3, 4), randn(2, 3, 4)
    run_both(jvp_of(REDUCTIONS[name], (x, t)))


def test_amax_with_ties():
    x = torch.tensor([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]], dtype=DTYPE)
    t = randn(2, 3)
    run_both(jvp_of(lambda x: (x.amax(1), x.amin(0), x.max(dim=1)[0]), (x, t)))


MATMULS = {
    "mm": (lambda a, b: torch.mm(a, b), (3, 4), (4, 2)),
    "matmul_2d": (lambda a, b: a @ b, (3, 4), (4, 2)),
    "matmul_3d_2d": (lambda a, b: a @ b, (2, 3, 4), (4, 2)),
    "matmul_2d_1d": (lambda a, b: a @ b, (3, 4), (4,)),
    "bmm": (lambda a, b: torch.bmm(a, b), (2, 3, 4), (2, 4, 5)),
    "mv": (lambda a, b: torch.mv(a, b), (3, 4), (4,)),
    "dot": (lambda a, b: torch.dot(a, b), (4,), (4,)),
    "addmm": (
        lambda a, b: torch.addmm(b[0], a, b, beta=0.5, alpha=2.0),
        (3, 4),
        (4, 2),
    ),
    "linear": (lambda a, b: nn.functional.linear(a, b.t(), b[0]), (3, 4), (4, 2)),
    "cat_stack": (
        lambda a, b: torch.cat([a, b.t(), a * 2], 0)
        + torch.stack([b.t(), b.t()]).sum(0)[0],
        (3, 4),
        (4, 2),
    ),
}


@pytest.mark.parametrize("tangents", ["left", "right", "both"])
@pytest.mark.parametrize("name", MATMULS)
def test_matmuls(name, tangents):
    f, sa, sb = MATMULS[name]
    a, ta, b, tb = randn(*sa), randn(*sa), randn(*sb), randn(*sb)
    if tangents == "left":
        tb = None
    elif tangents == "right":
        ta = None
    run_both(jvp_of(f, (a, ta), (b, tb)))


@pytest.mark.parametrize("batch", [(5,), (2, 5)], ids=["2d", "3d"])
def test_mlp_with_input_tangent(batch):
    torch.manual_seed(1)
    model = mlp()
    x, t = randn(*batch, 4), randn(*batch, 4)

    def fn(fwAD):
        with fwAD.dual_level():
            out = model(fwAD.make_dual(x, t))
            return tuple(fwAD.unpack_dual(out))

    run_both(fn)


def test_mlp_with_parameter_tangents():
    torch.manual_seed(1)
    model = mlp()
    x = randn(5, 4)
    tangents = {n: randn(*p.shape) for n, p in model.named_parameters()}

    def fn(fwAD):
        with fwAD.dual_level():
            params = {
                n: fwAD.make_dual(p.detach(), tangents[n])
                for n, p in model.named_parameters()
            }
            out = torch.func.functional_call(model, params, (x,))
            return tuple(fwAD.unpack_dual(out))

    (_, tangent), _ = run_both(fn)
    # and equal to torch.func.jvp over the parameters
    params = {n: p.detach() for n, p in model.named_parameters()}
    _, ref = torch.func.jvp(
        lambda ps: torch.func.functional_call(model, ps, (x,)), (params,), (tangents,)
    )
    assert_close(tangent, ref)


# --------------------------------------------------------------------------------------
# 5. outputs that cannot carry tangents


NO_TANGENT = {
    "comparison": lambda d: d > 0,
    "eq": lambda d: torch.eq(d, d * 2),
    "argmax": lambda d: d.argmax(),
    "argmax_dim": lambda d: d.argmax(1),
    "max_dim_indices": lambda d: d.max(dim=1).indices,
    "long": lambda d: d.long(),
    "int_sum": lambda d: d.long().sum(),
    "isnan": lambda d: torch.isnan(d),
    "detach": lambda d: d.detach(),
    "detach_then_ops": lambda d: d.detach().sin() * 2,
    "detach_then_view": lambda d: d.detach()[1],
    "data": lambda d: d.data.exp(),
}


@pytest.mark.parametrize("name", NO_TANGENT)
def test_outputs_without_tangents(name):
    x, t = randn(3, 4), randn(3, 4)
    actual, _ = run_both(jvp_of(NO_TANGENT[name], (x, t)))
    assert actual[1] is None


def test_detach_is_a_view_without_tangent_and_the_dual_keeps_its_own():
    def fn(fwAD):
        with fwAD.dual_level():
            d = fwAD.make_dual(randn(3), randn(3))
            detached = d.detach()
            return (
                fwAD.unpack_dual(detached).tangent,
                fwAD.unpack_dual(d).tangent,
                shares_memory(detached, d),
            )

    run_both(fn)


def test_no_grad_still_propagates_tangents():
    def fn(fwAD):
        x = randn(3, 4, requires_grad=True)
        with fwAD.dual_level():
            d = fwAD.make_dual(x, randn(3, 4))
            with torch.no_grad():
                y = (d.sin() * d).sum(0)
                z = d.exp()[0]
                z.mul_(2.0)
            out = unpack_all(fwAD, [y, z])
            requires = [y.requires_grad, z.requires_grad]
            return out, requires

    run_both(fn)


def test_integer_inputs_and_tangent_free_ops_inside_level():
    def fn(fwAD):
        with fwAD.dual_level():
            d = fwAD.make_dual(randn(4), randn(4))
            idx = torch.arange(4)
            plain = randn(4).lgamma()  # no rule needed: no tangent input
            mixed = d * idx  # integer operand: no tangent of its own
            return unpack_all(fwAD, [idx * 2, plain, mixed])

    run_both(fn)


# --------------------------------------------------------------------------------------
# 6. ops without rules and out= variants


# Ops neither dualgen nor native forward AD has a rule for.
MISSING_RULES = {
    "segment_reduce": (
        aten.segment_reduce.default,
        "aten::segment_reduce",
        lambda d: torch.segment_reduce(d, "sum", lengths=torch.tensor([2, 2])),
    ),
    "standard_gamma_grad": (
        aten._standard_gamma_grad.default,
        "aten::_standard_gamma_grad",
        lambda d: aten._standard_gamma_grad(d.abs() + 1, d.abs() + 1),
    ),
}


@pytest.mark.parametrize("name", MISSING_RULES)
def test_op_without_rule_raises(name):
    op, overload, call = MISSING_RULES[name]
    assert op not in KERNELS
    assert dualgen.rules.rule_for(op) is None
    x, t = randn(4) * 0.5, randn(4)
    with dual_fwAD.dual_level():
        d = dual_fwAD.make_dual(x, t)
        with pytest.raises(NotImplementedError) as info:
            call(d)
        message = str(info.value)
        assert overload in message
        assert "derivatives.yaml" in message
        # native's key phrase, where the user's code called it, the entry to add
        assert "Trying to use forward AD with" in message
        assert f"called at {__file__}:" in message
        schema = str(op._schema).split("::", 1)[1]
        assert f"- name: {schema}\n" in message
        assert ": <tangent, from " in message
        # the same op without tangent inputs needs no rule
        assert_close(call(x.clone()), call(x.clone()))
    # native has none either (so the call itself is sound)
    with native_fwAD.dual_level(), pytest.raises(NotImplementedError):
        call(native_fwAD.make_dual(x.clone(), t))


OUT_VARIANTS = {
    "add": lambda d, out: torch.add(d, d, out=out),
    "add_plain_other": lambda d, out: torch.add(d, torch.ones(4, dtype=DTYPE), out=out),
    "sin": lambda d, out: torch.sin(d, out=out),
    "mul": lambda d, out: torch.mul(d, 2.0, out=out),
}


@pytest.mark.parametrize("name", OUT_VARIANTS)
def test_out_variants_with_tangent_inputs_raise(name):
    call = OUT_VARIANTS[name]

    def attempt(fwAD):
        with fwAD.dual_level():
            d = fwAD.make_dual(randn(4), randn(4))
            return call(d, torch.empty(4, dtype=DTYPE))

    native = error_of(lambda: attempt(native_fwAD))
    ours = error_of(lambda: attempt(dual_fwAD))
    assert type(native) is NotImplementedError
    assert type(ours) is NotImplementedError
    assert "out=" in str(native) and "out=" in str(ours)
    assert str(native).split("(")[0] in str(ours)  # native's phrase, then ours


def test_out_variants_without_tangent_inputs_work():
    def fn(fwAD):
        with fwAD.dual_level():
            fwAD.make_dual(randn(4), randn(4))
            out = torch.empty(4, dtype=DTYPE)
            torch.add(randn(4), randn(4), out=out)
            return tuple(fwAD.unpack_dual(out))

    run_both(fn)


@pytest.mark.parametrize(
    "draw",
    [
        torch.rand_like,
        torch.randn_like,
        lambda t: torch.randint_like(t, 5),
        lambda t: torch.randint_like(t, -3, 5),
    ],
    ids=["rand_like", "randn_like", "randint_like", "randint_like_low"],
)
def test_random_draws_like_a_dual_have_no_tangent_as_native(draw):
    """Their values do not depend on the input's: no tangent (they raised)."""
    for ad in (dual_fwAD, native_fwAD):
        with ad.dual_level():
            out = draw(ad.make_dual(torch.rand(3), torch.ones(3)))
            assert ad.unpack_dual(out).tangent is None, ad.__name__
