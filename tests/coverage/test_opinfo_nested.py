"""Second and third derivatives of every OpInfo that supports forward AD, judged by
finite differences of derivatives one order lower (tests/coverage/opinfo_nested.py
does the work; docs/opinfo_nested.md has the figures): nested dualgen levels
(orders 2 and 3), forward over reverse and reverse over forward.

Rows that do not pass are listed in tests/coverage/opinfo_known_nested.py with the
reason, as strict xfails. The tests below the sweep show that it can fail: a
rule right at first order but constant at outer levels is caught (orders 2 and 3,
reverse over forward), so is a backward rule missing a term (forward over
reverse); oracles that disagree give no verdict.
"""

from __future__ import annotations

import pytest
import torch
from nested_oracles import Verdict, judge
from opinfo_known_nested import IN_PROGRESS, KNOWN_NESTED
from opinfo_nested import MODES, cases, check, nested_ops
from torch.testing._internal.common_methods_invocations import op_db

import dualgen


def _params():
    for op, dtype, mode in cases():
        key = (op.name, op.variant_test_name, str(dtype).removeprefix("torch."), mode)
        marks = ()
        if key in KNOWN_NESTED:
            marks = pytest.mark.xfail(strict=True, reason=KNOWN_NESTED[key])
        yield pytest.param(
            op, dtype, mode, id="-".join(k for k in key if k), marks=marks
        )


@pytest.mark.parametrize("op, dtype, mode", list(_params()))
def test_nested_derivatives(op, dtype, mode):
    result = check(op, dtype, mode)
    assert result.status in ("pass", "n/a"), "\n".join(
        [f"{result.status}: {op.name} {dtype} {mode} ({result.unjudged} unjudged)"]
        + [f"{kind}: {detail}" for kind, detail in result.failures[:3]]
        + result.notes[:3]
    )


def test_known_rows_are_swept_and_not_in_progress():
    swept = {(op.name, op.variant_test_name) for op in nested_ops()}
    for name, variant, dtype, mode in KNOWN_NESTED:
        assert (name, variant) in swept and mode in MODES
        assert name not in IN_PROGRESS  # those must fail the suite until fixed


def _op(name):
    return next(op for op in op_db if op.name == name and not op.variant_test_name)


@pytest.fixture
def sin_constant_at_outer_levels():
    """sin's rule with cos(x) detached: first order stays right (the first-order
    sweep cannot see it), every higher derivative through it loses a term."""

    @dualgen.register_jvp(torch.ops.aten.sin.default)
    def sin_jvp(self_p, self_t):
        return self_t * self_p.detach().cos()

    yield
    dualgen.unregister_jvp(torch.ops.aten.sin.default)


@pytest.mark.parametrize("mode", ["order2", "rev_over_fwd"])
def test_a_rule_constant_at_the_outer_level_is_caught(
    sin_constant_at_outer_levels, mode
):
    result = check(_op("sin"), torch.float64, mode)
    assert result.status == "wrong", result
    assert result.error > 0.1


def test_order3_is_not_passed_on_a_broken_order2(sin_constant_at_outer_levels):
    # order 3 differentiates order 2: the broken rule makes both zero, so they agree;
    # the second differences of the (correct) first order must refuse that.
    assert check(_op("sin"), torch.float64, "order3").status != "pass"


def test_the_same_ops_pass_with_the_real_rule():
    for mode in ("order2", "order3", "rev_over_fwd"):
        assert check(_op("sin"), torch.float64, mode).status == "pass", mode
    assert check(_op("tanh"), torch.float64, "fwd_over_rev").status == "pass"


def test_a_backward_rule_missing_a_term_is_caught():
    """tanh's gradient is tanh_backward(grad, output); a rule for it that drops
    the output's tangent leaves the gradient's tangent (H v) without its second
    derivative term: forward over reverse must call that wrong."""

    @dualgen.register_jvp(torch.ops.aten.tanh_backward.default)
    def tanh_backward_jvp(grad_output_p, grad_output_t, output_p, output_t):
        return None if grad_output_t is None else grad_output_t * (1 - output_p**2)

    try:
        result = check(_op("tanh"), torch.float64, "fwd_over_rev")
    finally:
        dualgen.unregister_jvp(torch.ops.aten.tanh_backward.default)
    assert result.status == "wrong", result


def _const(*values):
    return lambda h: [torch.tensor(values, dtype=torch.float64)]


def test_judge_passes_wrongs_and_abstains():
    got = [torch.tensor([1.0, 2.0], dtype=torch.float64)]
    assert judge(got, _const(1.0, 2.0), _const(5.0, 5.0)).status == "pass"
    # Both oracles agree and dualgen does not: wrong, with its error.
    wrong = judge(got, _const(1.0, 3.0), _const(1.0, 3.0 + 1e-7))
    assert (wrong.status, round(wrong.error, 6)) == ("wrong", round(1 / 3, 6))

    # A kink: differences grow as 1/h and the two schemes disagree: no verdict.
    def first(h):
        return [torch.tensor([0.0, 1 / h], dtype=torch.float64)]

    kink = judge(got, first, lambda h: [got[0] / h])
    assert kink.status == "unjudged"
    # With `confirm`, the first oracle alone does not pass dualgen.
    assert judge(got, _const(1.0, 2.0), _const(0.0, 0.0), confirm=True) == Verdict(
        "unjudged", 0.0, "agrees with the first oracle only"
    )
