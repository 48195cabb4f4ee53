"""User rules (dualgen.register_jvp) and custom ops.

See forward_ad_checks.py for how the runs are compared.
"""

from __future__ import annotations

import pytest
import torch
import torch.autograd.forward_ad as native_fwAD
from forward_ad_checks import (
    DTYPE,
    assert_same,
    aten,
    jvp_of,
    nested_tangents,
    no_level_left_behind,  # noqa: F401 - autouse
    randn,
    run_both,
)
from torch.testing import assert_close

import dualgen
import dualgen.forward_ad as dual_fwAD

# --------------------------------------------------------------------------------------
# 10. user rules


@torch.library.custom_op("dualgen_test::mysin", mutates_args=())
def mysin(x: torch.Tensor) -> torch.Tensor:
    return torch.sin(x)


@torch.library.custom_op("dualgen_test::scaled_add", mutates_args=())
def scaled_add(x: torch.Tensor, y: torch.Tensor, alpha: float) -> torch.Tensor:
    return x + alpha * y


@torch.library.custom_op("dualgen_test::norule", mutates_args=())
def norule(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@pytest.fixture
def user_rules(registered):
    """`registered` (conftest.py), and this module's ops unregistered afterwards
    whether or not the test says it registered them."""
    yield registered
    for op in (mysin, scaled_add, norule, aten.sin.default):
        dualgen.unregister_jvp(op)


def jvp_dualgen(f, x, t):
    with dual_fwAD.dual_level():
        return tuple(dual_fwAD.unpack_dual(f(dual_fwAD.make_dual(x, t))))


@pytest.mark.parametrize(
    "target", ["custom_op_object", "overload"], ids=["custom_op", "overload"]
)
def test_register_jvp_for_a_custom_op(user_rules, target):
    op = mysin if target == "custom_op_object" else torch.ops.dualgen_test.mysin.default

    @dualgen.register_jvp(op)
    def mysin_jvp(x_p, x_t):
        return x_t * x_p.cos()

    assert mysin_jvp.__name__ == "mysin_jvp"  # the decorator returns the function
    x, t = randn(3, 4), randn(3, 4)
    primal, tangent = jvp_dualgen(lambda d: mysin(d) * 2, x, t)
    expected = jvp_of(lambda d: torch.sin(d) * 2, (x, t))(native_fwAD)
    assert_same((primal, tangent), tuple(expected))
    assert_close(tangent, 2 * t * x.cos())


def test_register_jvp_rule_may_use_the_result(user_rules):
    @dualgen.register_jvp(mysin)
    def mysin_jvp(x_p, x_t, result):
        assert_close(result, x_p.sin())
        return x_t * (1 - result * result).sqrt() * x_p.cos().sign()

    x, t = randn(5), randn(5)
    assert_close(jvp_dualgen(mysin, x, t)[1], t * x.cos())


def test_register_jvp_absent_tangent_is_none(user_rules):
    seen = []

    @dualgen.register_jvp(scaled_add)
    def scaled_add_jvp(x_t, y_t, alpha):
        seen.append((x_t is None, y_t is None))
        if x_t is None:
            return alpha * y_t
        if y_t is None:
            return x_t
        return x_t + alpha * y_t

    x, y, tx, ty = randn(4), randn(4), randn(4), randn(4)
    with dual_fwAD.dual_level():
        only_y = dual_fwAD.unpack_dual(scaled_add(x, dual_fwAD.make_dual(y, ty), 3.0))
        only_x = dual_fwAD.unpack_dual(scaled_add(dual_fwAD.make_dual(x, tx), y, 3.0))
        both = dual_fwAD.unpack_dual(
            scaled_add(dual_fwAD.make_dual(x, tx), dual_fwAD.make_dual(y, ty), 3.0)
        )
        neither = dual_fwAD.unpack_dual(scaled_add(x, y, 3.0))
    assert seen == [(True, False), (False, True), (False, False)]
    assert_close(only_y.tangent, 3.0 * ty)
    assert_close(only_x.tangent, tx)
    assert_close(both.tangent, tx + 3.0 * ty)
    assert neither.tangent is None
    assert_close(both.primal, x + 3.0 * y)


@pytest.mark.parametrize(
    "params,match",
    [
        ("x_tangent", "parameter 'x_tangent' is not in the schema"),
        ("x_tan", "did you mean 'x_t'"),
        ("self_t", "parameter 'self_t' is not in the schema"),
        ("x_p", "takes no tangent"),
        ("*args", r"\*args"),
    ],
)
def test_register_jvp_wrong_parameters_raise_type_error(user_rules, params, match):
    namespace = {}
    exec(f"def rule({params}):\n    return None", namespace)  # noqa: S102
    with pytest.raises(TypeError, match=match):
        dualgen.register_jvp(mysin)(namespace["rule"])
    # nothing was registered
    with dual_fwAD.dual_level(), pytest.raises(NotImplementedError):
        mysin(dual_fwAD.make_dual(randn(3), randn(3)))


def test_register_jvp_again_replaces(user_rules):
    @dualgen.register_jvp(mysin)
    def first(x_p, x_t):
        return x_t * x_p.cos()

    x, t = randn(4), randn(4)
    assert_close(jvp_dualgen(mysin, x, t)[1], t * x.cos())

    @dualgen.register_jvp(mysin)
    def second(x_t):
        return 3 * x_t

    assert_close(jvp_dualgen(mysin, x, t)[1], 3 * t)


def test_user_rule_overrides_generated_rule(user_rules):
    user_rules.append(aten.sin.default)
    x, t = randn(4), randn(4)
    try:

        @dualgen.register_jvp(aten.sin.default)
        def doubled_sin(self_p, self_t):
            return 2 * self_t * self_p.cos()

        assert_close(jvp_dualgen(torch.sin, x, t)[1], 2 * t * x.cos())
    finally:
        dualgen.unregister_jvp(aten.sin.default)
    assert_close(jvp_dualgen(torch.sin, x, t)[1], t * x.cos())


def test_user_rule_returning_wrong_shape_raises(user_rules):
    @dualgen.register_jvp(mysin)
    def bad(x_t):
        return x_t.sum()

    with pytest.raises(RuntimeError, match="shape"):
        jvp_dualgen(mysin, randn(3), randn(3))


def test_user_rule_under_nesting(user_rules):
    @dualgen.register_jvp(mysin)
    def mysin_jvp(x_p, x_t):
        return x_t * x_p.cos()

    x, u, v = randn(4), randn(4), randn(4)
    t, _, second = nested_tangents(mysin, x, u, v)
    assert_close(t, u * x.cos())
    assert_close(second, -u * v * x.sin())


def test_custom_op_without_rule_raises_native_drops_tangent(user_rules):
    x, t = randn(3), randn(3)
    with dual_fwAD.dual_level():
        d = dual_fwAD.make_dual(x, t)
        with pytest.raises(NotImplementedError) as info:
            norule(d)
        message = str(info.value)
        assert "dualgen_test::norule" in message
        assert "derivatives.yaml" in message and "register_jvp" in message
        assert_close(norule(x), 2 * x)  # no tangent input: fine
    # native silently gives no tangent (a wrong, zero derivative): documented
    with native_fwAD.dual_level():
        out = norule(native_fwAD.make_dual(x, t))
        assert native_fwAD.unpack_dual(out).tangent is None
        assert_close(out, 2 * x)


def test_output_tangent_never_aliases_an_input_tangent():
    """A formula that reduces to `self_t` (the other term's tangent is absent) must
    not hand the input's tangent to the output: in-place ops on either would write
    into the other (this broke quantile's `ranks - ranks_below` then `ceil_`)."""

    def fn(fwAD):
        with fwAD.dual_level():
            x = fwAD.make_dual(torch.ones(3, dtype=DTYPE), torch.ones(3, dtype=DTYPE))
            y = x + torch.arange(3, dtype=DTYPE)
            y.mul_(2.0)
            z = x - 1.0
            x.ceil_()
            return [fwAD.unpack_dual(v).tangent.clone() for v in (x, y, z)]

    ours, native = fn(dual_fwAD), fn(native_fwAD)
    for a, b in zip(ours, native):
        assert_close(a, b)


def test_inplace_view_op_on_a_tracked_dual_keeps_its_tangent_in_step():
    # transpose_ and unsqueeze_ change only geometry; under autograd the tangent
    # must take the same geometry (it once was copied into the old shape).
    torch.manual_seed(3)
    x0, t = randn(2, 3), randn(2, 3)

    def fn(fwAD):
        x = x0.clone().requires_grad_()
        with fwAD.dual_level():
            y = fwAD.make_dual(x, t) * 1
            y.transpose_(0, 1)
            y.unsqueeze_(0)
            z = y.sin()
            (g,) = torch.autograd.grad(z.sum(), x)
            return tuple(fwAD.unpack_dual(z)), tuple(fwAD.unpack_dual(g))

    ours, native = run_both(fn)
    assert_close(ours[0][1], (t.T * x0.T.cos()).unsqueeze(0))
    assert_close(ours[1][1], -x0.sin() * t)
    for a, b in zip(ours, native):
        assert_same(a, b)


def test_a_tangent_takes_its_primals_dtype_under_mixed_precision():
    def fn(fwAD):
        with fwAD.dual_level():
            x = fwAD.make_dual(torch.ones(3), torch.full((3,), 2.0))
            y = x + torch.ones(3, dtype=torch.float64)  # float64 result
            z = torch.zeros(3, dtype=torch.float64)
            z.add_(x)  # in place, z had no tangent
            return [tuple(fwAD.unpack_dual(v)) for v in (y, z)]

    ours, native = run_both(fn)
    for (p, t), (np_, nt) in zip(ours, native):
        assert t.dtype == p.dtype == torch.float64
        assert_same((p, t), (np_, nt))
