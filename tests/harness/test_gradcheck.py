"""The gradcheck harness: dualgen.gradcheck / gradgradcheck / adjoint_check.

Correct functions must pass (and agree with torch.autograd.gradcheck); wrong JVP
rules (register_jvp) and wrong spec formulas (kernels generated from a small spec
under test, put in place with `using_kernels`) must fail, in the mode they are
wrong in, with messages that say where. Everything is float64 / complex128, small
and seeded.
"""

from __future__ import annotations

import math
import re
import sys
import warnings

import pytest
import torch

import dualgen
from dualgen.rules import using_kernels
from dualgen.tools.cli import generate_files
from dualgen.tools.validate import load_kernels

F64, C128 = torch.float64, torch.complex128
DTYPES = [pytest.param(F64, id="real"), pytest.param(C128, id="complex")]
FAST = [pytest.param(False, id="slow"), pytest.param(True, id="fast")]
TorchGradcheckError = sys.modules["torch.autograd.gradcheck"].GradcheckError


def rand(*shape, dtype=F64, seed=0, requires_grad=True, positive=False):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g, dtype=F64)
    if positive:
        x = x.abs() + 0.5
    if dtype.is_complex:
        x = torch.complex(x, torch.randn(shape, generator=g, dtype=F64))
    return x.to(dtype).requires_grad_(requires_grad)


# --------------------------------------------------------------------------------------
# 1. correct functions: dualgen agrees with torch.autograd.gradcheck


MASK = torch.tensor([[True, False, True, False], [False, False, True, True]])


def slice_assign(x):
    y = torch.zeros(5, 3, dtype=x.dtype)
    y[1:3] = x
    return y


def view_then_inplace(x):
    y = x.clone()
    y.t()[1:].mul_(2)
    return y.sin()


def two_outputs(x, w):
    return (x @ w).exp(), x.cos().sum()


CORRECT = {
    "elementwise_chain": (
        lambda x: (x.sin() * x.exp()).tanh() / (1 + x * x),
        lambda: (rand(3, 4),),
    ),
    "matmul": (
        lambda a, b: (a @ b).sigmoid(),
        lambda: (rand(2, 3), rand(3, 4, seed=1)),
    ),
    "addmm_mv_dot": (
        lambda c, a, b: torch.addmm(c, a, b).mv(b[0]).dot(c[:, 0]),
        lambda: (rand(2, 4), rand(2, 3, seed=1), rand(3, 4, seed=2)),
    ),
    "softmax": (lambda x: torch.softmax(x, 1), lambda: (rand(3, 4),)),
    "log_softmax": (lambda x: torch.log_softmax(x, 0), lambda: (rand(3, 4),)),
    "reductions": (
        lambda x: x.sum(1) * x.mean() + x.amax(0)[:3],
        lambda: (rand(3, 4),),
    ),
    "max_dim_values": (lambda x: x.max(1).values.exp(), lambda: (rand(3, 4),)),
    "max_dim_with_indices": (lambda x: x.max(0), lambda: (rand(3, 4),)),
    "transpose_mul_": (lambda x: x.clone().t().mul_(2), lambda: (rand(3, 4),)),
    "view_then_inplace": (view_then_inplace, lambda: (rand(3, 4),)),
    "slice_assign": (slice_assign, lambda: (rand(2, 3),)),
    "cat_stack": (
        lambda a, b: torch.stack([torch.cat([a, b.sin()], 0), torch.cat([b, a], 0)], 1),
        lambda: (rand(2, 3), rand(2, 3, seed=1)),
    ),
    "where": (
        lambda a, b: torch.where(MASK, a, b.exp()),
        lambda: (rand(2, 4), rand(2, 4, seed=1)),
    ),
    "pow": (
        lambda a, b: a.pow(2.5) + a.pow(b) + b.pow(2),
        lambda: (rand(3, positive=True), rand(3, seed=1)),
    ),
    "views": (
        lambda x: x.view(2, 6).permute(1, 0).unsqueeze(0).expand(2, 6, 2).select(2, 1),
        lambda: (rand(3, 4),),
    ),
    "complex_to_real": (
        lambda z: (z * z.conj()).abs() + (z.exp()).abs(),
        lambda: (rand(2, 3, dtype=C128),),
    ),
    "complex_to_complex": (lambda z: z.exp() * z, lambda: (rand(2, 3, dtype=C128),)),
    "real_times_complex": (
        lambda x, z: (x * z).sin() + x,
        lambda: (rand(2, 3), rand(2, 3, dtype=C128, seed=1)),
    ),
    "complex_matmul": (
        lambda a, b: (a @ b).tanh(),
        lambda: (rand(2, 3, dtype=C128), rand(3, 2, dtype=C128, seed=1)),
    ),
    "multiple_outputs": (two_outputs, lambda: (rand(2, 3), rand(3, 2, seed=1))),
    "non_tensor_and_constant_inputs": (
        lambda x, n, c: x * n + c.exp() * x,
        lambda: (rand(3), 3, rand(3, seed=1, requires_grad=False)),
    ),
}


@pytest.mark.parametrize("forward", [False, True], ids=["bwd", "bwd+fwd"])
@pytest.mark.parametrize("fast", FAST)
@pytest.mark.parametrize("name", list(CORRECT))
def test_correct_functions_pass_like_torch(name, fast, forward):
    func, make = CORRECT[name]
    inputs = make()
    options = {"fast_mode": fast, "check_forward_ad": forward}
    assert torch.autograd.gradcheck(func, inputs, **options) is True
    assert dualgen.gradcheck(func, inputs, **options) is True


KINKS = torch.tensor([0.0, 1.0, -2.0], dtype=F64)


@pytest.mark.parametrize("forward", [False, True], ids=["bwd", "bwd+fwd"])
@pytest.mark.parametrize("fast", FAST)
@pytest.mark.parametrize(
    "func,expected",
    [
        pytest.param(lambda x, y: x.relu() + y, False, id="relu_at_0"),
        pytest.param(lambda x, y: x.clamp(min=1.0) + y, False, id="clamp_at_bound"),
        # A tie splits the gradient, which is what central differences see.
        pytest.param(torch.maximum, True, id="maximum_tie"),
    ],
)
def test_verdicts_at_kinks_agree_with_torch(func, expected, fast, forward):
    options = {"fast_mode": fast, "check_forward_ad": forward, "raise_exception": False}
    x = KINKS.clone().requires_grad_()
    y = torch.tensor([0.0, 3.0, 1.0], dtype=F64, requires_grad=True)
    assert torch.autograd.gradcheck(func, (x, y), **options) is expected
    assert dualgen.gradcheck(func, (x, y), **options) is expected


def test_single_tensor_input_and_empty_input():
    assert dualgen.gradcheck(torch.sin, rand(3), check_forward_ad=True)
    empty = rand(0, 3)
    for fast in (False, True):
        assert dualgen.gradcheck(
            lambda x: x.sin().sum(0), (empty,), check_forward_ad=True, fast_mode=fast
        )


def test_inputs_are_not_modified():
    x = rand(2, 3)
    before = x.detach().clone()
    dualgen.gradcheck(lambda x: x.clone().t().mul_(2), (x,), check_forward_ad=True)
    assert torch.equal(x.detach(), before)
    assert x.grad is None


# --------------------------------------------------------------------------------------
# 2. wrong user JVP rules (register_jvp on a custom op) are caught

torch.library.define("dgtest_gc::mysin", "(Tensor x) -> Tensor")
torch.library.define("dgtest_gc::norule", "(Tensor x) -> Tensor")


@torch.library.impl("dgtest_gc::mysin", "CompositeExplicitAutograd")
def _mysin_impl(x):
    return torch.sin(x)


@torch.library.impl("dgtest_gc::norule", "CompositeExplicitAutograd")
def _norule_impl(x):
    return x * 2


mysin = torch.ops.dgtest_gc.mysin.default
norule = torch.ops.dgtest_gc.norule.default


def correct_rule(x_p, x_t):
    return x_t * x_p.cos()


def doubled_rule(x_p, x_t):
    return 2 * x_t * x_p.cos()


def conj_rule(x_p, x_t):  # right for real input; not holomorphic: wrong for complex
    return x_t * x_p.cos().conj()


@pytest.fixture
def jvp_rule():
    """register(rule): the JVP rule of mysin for this test only."""

    def register(rule):
        dualgen.register_jvp(mysin)(rule)

    yield register
    dualgen.unregister_jvp(mysin)


def mysin_twice(x):
    return mysin(x) * 2


FORWARD_ONLY = {"check_forward_ad": True, "check_backward_ad": False}


@pytest.mark.parametrize("fast", FAST)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "rule,wrong_for",
    [
        pytest.param(correct_rule, (), id="correct"),
        pytest.param(doubled_rule, (F64, C128), id="doubled"),
        pytest.param(conj_rule, (C128,), id="conj"),
    ],
)
def test_user_rule_verdict(jvp_rule, rule, wrong_for, dtype, fast):
    jvp_rule(rule)
    x = rand(2, 3, dtype=dtype)
    if dtype in wrong_for:
        with pytest.raises(dualgen.GradcheckError, match="forward mode"):
            dualgen.gradcheck(mysin_twice, (x,), fast_mode=fast, **FORWARD_ONLY)
        verdict = dualgen.gradcheck(
            mysin_twice, (x,), fast_mode=fast, raise_exception=False, **FORWARD_ONLY
        )
        assert verdict is False
    else:
        assert dualgen.gradcheck(mysin_twice, (x,), fast_mode=fast, **FORWARD_ONLY)


def exp_and_mysin(a, b):
    return a.exp(), mysin(b)


def _values(message: str, label: str) -> list[complex]:
    return [
        complex(v) for v in re.findall(rf"^  {label}:\s+(\S+)$", message, re.MULTILINE)
    ]


def _failure_message(fast: bool, dtype) -> tuple[str, torch.Tensor]:
    a, b = rand(2, 3), rand(2, 3, dtype=dtype, seed=1)
    with pytest.raises(dualgen.GradcheckError) as info:
        dualgen.gradcheck(exp_and_mysin, (a, b), fast_mode=fast, **FORWARD_ONLY)
    return str(info.value), b.detach()


def test_slow_failure_message_names_the_worst_element(jvp_rule):
    jvp_rule(doubled_rule)
    message, b = _failure_message(False, F64)
    assert message.startswith(
        "Jacobian mismatch for output 1 with respect to input 1, forward mode, "
        "in exp_and_mysin"
    )
    assert "input 0" not in message and "output 0" not in message
    assert "backward mode" not in message
    where = re.search(
        r"worst element: input 1\[(\d), (\d)\] -> output 1\[(\d), (\d)\]", message
    )
    assert where, message
    i, j, k, m = map(int, where.groups())
    assert (i, j) == (k, m)  # the Jacobian of an element-wise op is diagonal
    # The error is |cos b| on the diagonal: largest where |cos b| is.
    assert (i, j) == divmod(int(b.cos().abs().argmax()), 3)
    (numerical,) = _values(message, "numerical")
    (analytical,) = _values(message, "analytical")
    assert numerical.real == pytest.approx(math.cos(b[i, j]), rel=1e-6)
    assert analytical.real == pytest.approx(2 * math.cos(b[i, j]), rel=1e-6)


def test_fast_failure_message_has_both_scalars_and_locates(jvp_rule):
    jvp_rule(doubled_rule)
    message, _ = _failure_message(True, F64)
    assert message.startswith(
        "Fast gradcheck mismatch for output 1 with respect to input 1, forward mode, "
        "in exp_and_mysin"
    )
    numerical = _values(message, "numerical")
    analytical = _values(message, "analytical")
    # The fast scalar v^T J u, then the slow run's worst element: both doubled.
    assert len(numerical) == len(analytical) == 2
    assert analytical[0] == pytest.approx(2 * numerical[0], rel=1e-6)
    assert analytical[1] == pytest.approx(2 * numerical[1], rel=1e-6)
    assert abs(numerical[0]) > 1e-3
    assert "Slow mode, run to locate the mismatch" in message
    assert "worst element: input 1[" in message


def test_complex_failure_message_names_both_parts(jvp_rule):
    jvp_rule(conj_rule)
    message, _ = _failure_message(False, C128)
    real = "Jacobian mismatch for output 1 (real part) with respect to input 1"
    imag = "Jacobian mismatch for output 1 (imaginary part) with respect to input 1"
    assert real in message and imag in message
    numerical = _values(message, "numerical")
    analytical = _values(message, "analytical")
    assert len(numerical) == len(analytical) == 2
    # With the 2 * CW convention, for f' = cos(b): the real part's entry is
    # conj(f') against the rule's f', the imaginary part's i conj(f') against i f'.
    assert analytical[0] == pytest.approx(numerical[0].conjugate(), rel=1e-6)
    assert analytical[1] == pytest.approx(-numerical[1].conjugate(), rel=1e-6)


def test_check_undefined_grad_catches_tangent_from_zero_tangent(jvp_rule):
    def affine_at_zero(x_p, x_t):  # right for every nonzero tangent
        return torch.where(x_t.abs().sum() == 0, 1.0, x_t * x_p.cos())

    jvp_rule(affine_at_zero)
    x = rand(3)
    with pytest.raises(dualgen.GradcheckError, match="nonzero tangent"):
        dualgen.gradcheck(mysin, (x,), **FORWARD_ONLY)
    assert dualgen.gradcheck(mysin, (x,), check_undefined_grad=False, **FORWARD_ONLY)


# --------------------------------------------------------------------------------------
# 3, 4. wrong spec formulas: kernels generated from a spec under test

# The harness itself runs alias and clone; _conj, resolve_conj, neg and mul are
# what the formulas below call (for second derivatives).
BASE_SPEC = """
- name: alias(Tensor(a) self) -> Tensor(a)
  self: grad

- name: clone(Tensor self, *, MemoryFormat? memory_format=None) -> Tensor
  self: grad
  result: auto_linear

- name: _conj(Tensor(a) self) -> Tensor(a)
  self: grad.conj()

- name: resolve_conj(Tensor(a) self) -> Tensor(a)
  self: grad

- name: neg(Tensor self) -> Tensor
  self: -grad
  result: auto_linear

- name: mul.Tensor(Tensor self, Tensor other) -> Tensor
  self: unbroadcast(grad * other.conj(), self)
  other: unbroadcast(grad * self.conj(), other)
  result: self_t * other_p + other_t * self_p
"""

# op: (backward formula, forward formula), and in which dtypes each is wrong.
WRONG_ENTRIES = {
    "sin": ("grad * self.sin().conj()", "self_t * self_p.cos()"),  # backward wrong
    "cos": ("grad * -self.sin().conj()", "self_t * self_p.sin()"),  # forward wrong
    "exp": ("grad * result", "self_t * result"),  # backward wrong for complex
    "tanh": (  # forward wrong for complex
        "torch.ops.aten.tanh_backward(grad, result)",
        "self_t.conj() * (1 - result * result)",
    ),
}
WRONG_IN = {
    "sin": {"backward": (F64, C128), "forward": ()},
    "cos": {"backward": (), "forward": (F64, C128)},
    "exp": {"backward": (C128,), "forward": ()},
    "tanh": {"backward": (), "forward": (C128,)},
}


def spec_text(entries: dict[str, tuple[str, str]]) -> str:
    text = BASE_SPEC
    for op, (backward, forward) in entries.items():
        text += (
            f"\n- name: {op}(Tensor self) -> Tensor\n"
            f"  self: {backward}\n  result: {forward}\n"
        )
    return text


def kernels_from(tmp_path_factory, name: str, text: str) -> dict:
    path = tmp_path_factory.mktemp("spec") / f"{name}.yaml"
    path.write_text(text)
    return load_kernels(generate_files(path).files)


@pytest.fixture(scope="module")
def wrong_kernels(tmp_path_factory):
    return kernels_from(tmp_path_factory, "wrong", spec_text(WRONG_ENTRIES))


@pytest.fixture(scope="module")
def right_kernels(tmp_path_factory):
    entries = {
        "sin": ("grad * self.cos().conj()", "self_t * self_p.cos()"),
        "cos": ("grad * -self.sin().conj()", "self_t * -self_p.sin()"),
        "exp": ("grad * result.conj()", "auto_element_wise"),
        "tanh": ("torch.ops.aten.tanh_backward(grad, result)", "auto_element_wise"),
    }
    return kernels_from(tmp_path_factory, "right", spec_text(entries))


def test_spec_kernels_are_the_ones_tested(wrong_kernels):
    names = {info.name for info in wrong_kernels.values()}
    assert {"sin", "cos", "exp", "tanh", "sin_", "mul.Tensor", "alias"} <= names


@pytest.mark.parametrize("fast", FAST)
@pytest.mark.parametrize("mode", ["backward", "forward"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", list(WRONG_ENTRIES))
def test_wrong_spec_formula_fails_in_its_mode(wrong_kernels, op, dtype, mode, fast):
    func = getattr(torch, op)
    x = rand(2, 3, dtype=dtype)
    options = {
        "fast_mode": fast,
        "check_backward_ad": mode == "backward",
        "check_forward_ad": mode == "forward",
    }
    wrong = dtype in WRONG_IN[op][mode]
    with using_kernels(wrong_kernels):
        if wrong:
            with pytest.raises(dualgen.GradcheckError) as info:
                dualgen.gradcheck(func, (x,), **options)
            assert f"{mode} mode, in {op}" in str(info.value)
            other = "forward" if mode == "backward" else "backward"
            assert f"{other} mode" not in str(info.value)
        assert dualgen.gradcheck(func, (x,), raise_exception=False, **options) is (
            not wrong
        )


@pytest.mark.parametrize("fast", FAST)
@pytest.mark.parametrize("dtype", DTYPES)
def test_right_spec_passes_and_installed_kernels_come_back(
    right_kernels, wrong_kernels, dtype, fast
):
    x = rand(2, 3, dtype=dtype)

    def func(x):
        return x.sin() * x.cos() * x.exp().tanh()

    options = {"fast_mode": fast, "check_forward_ad": True}
    with using_kernels(right_kernels):
        assert dualgen.gradcheck(func, (x,), **options)
        assert dualgen.adjoint_check(func, (x,))
    with using_kernels(wrong_kernels):
        assert not dualgen.gradcheck(func, (x,), raise_exception=False, **options)
    # Outside: the installed kernels again.
    assert dualgen.gradcheck(func, (x,), **options)


def test_wrong_formula_inside_a_composition_is_caught(wrong_kernels):
    x = rand(3)
    with using_kernels(wrong_kernels):
        with pytest.raises(dualgen.GradcheckError, match="forward mode, in <lambda>"):
            dualgen.gradcheck(lambda x: x.cos() * x, (x,), **FORWARD_ONLY)
        assert dualgen.gradcheck(lambda x: x.cos() * x, (x,))  # backward is right


# 4. the adjoint check: forward against backward, no finite differences


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", list(WRONG_ENTRIES))
def test_adjoint_check_catches_disagreeing_formulas(wrong_kernels, op, dtype):
    wrong = dtype in WRONG_IN[op]["forward"] + WRONG_IN[op]["backward"]
    x = rand(2, 3, dtype=dtype)
    func = getattr(torch, op)
    with using_kernels(wrong_kernels):
        if wrong:
            with pytest.raises(dualgen.GradcheckError) as info:
                dualgen.adjoint_check(func, (x,))
            message = str(info.value)
            assert "with respect to input 0 in " + op in message
            assert "the forward and backward formulas disagree" in message
            found = re.findall(
                r"(?:<v, J u>|<J\^T v, u>) by \w+ mode:\s+(\S+)", message
            )
            assert len(found) >= 2 and float(found[0]) != pytest.approx(float(found[1]))
        assert dualgen.adjoint_check(func, (x,), raise_exception=False) is (not wrong)


@pytest.mark.parametrize(
    "name",
    [
        "elementwise_chain",
        "matmul",
        "softmax",
        "transpose_mul_",
        "slice_assign",
        "cat_stack",
        "complex_to_real",
        "complex_to_complex",
        "real_times_complex",
        "multiple_outputs",
    ],
)
def test_adjoint_check_passes_on_installed_kernels(name):
    func, make = CORRECT[name]
    assert dualgen.adjoint_check(func, make()) is True


def test_adjoint_check_tolerances_are_used(wrong_kernels):
    x = rand(3)
    with using_kernels(wrong_kernels):
        assert not dualgen.adjoint_check(torch.cos, (x,), raise_exception=False)
        # A huge tolerance accepts anything.
        assert dualgen.adjoint_check(torch.cos, (x,), atol=1e6)
        assert dualgen.adjoint_check(torch.cos, (x,), rtol=1e6)


# --------------------------------------------------------------------------------------
# 5. gradgradcheck

GRADGRAD = {
    "matmul_tanh": (
        lambda x, w: (x @ w).tanh().sum(0),
        lambda: (rand(2, 3), rand(3, 2)),
    ),
    "sin_times_x": (lambda x: x.sin() * x, lambda: (rand(3),)),
    "complex_exp": (lambda z: (z.exp() * z).sum(), lambda: (rand(3, dtype=C128),)),
    "softmax": (lambda x: torch.softmax(x, 1), lambda: (rand(2, 3),)),
}
SECOND_ORDER = ["rev_over_rev", "fwd_over_rev", "fwd_over_fwd", "rev_over_fwd"]


def only(check: str) -> dict:
    flags = {f"check_{c}": False for c in SECOND_ORDER}
    flags[f"check_{check}"] = True
    return flags


@pytest.mark.parametrize("fast", FAST)
@pytest.mark.parametrize("check", SECOND_ORDER)
@pytest.mark.parametrize("name", list(GRADGRAD))
def test_gradgradcheck_passes_on_correct_functions(name, check, fast):
    func, make = GRADGRAD[name]
    assert dualgen.gradgradcheck(func, make(), fast_mode=fast, **only(check)) is True


@pytest.mark.parametrize("fast", FAST)
@pytest.mark.parametrize("name", list(GRADGRAD))
def test_gradgradcheck_agrees_with_torch(name, fast):
    func, make = GRADGRAD[name]
    inputs = make()
    assert torch.autograd.gradgradcheck(
        func, inputs, fast_mode=fast, check_fwd_over_rev=True
    )
    flags = {f"check_{c}": True for c in SECOND_ORDER}
    assert dualgen.gradgradcheck(func, inputs, fast_mode=fast, **flags)


@pytest.fixture(scope="module")
def second_order_kernels(tmp_path_factory):
    """sin right in both modes; its formulas call cos, whose backward (or forward)
    is wrong: only second derivatives that go through that mode can see it."""
    right_b, right_f = "grad * -self.sin().conj()", "self_t * -self_p.sin()"
    wrong_b, wrong_f = "grad * self.sin().conj()", "self_t * self_p.sin()"
    sin = ("grad * self.cos().conj()", "self_t * self_p.cos()")
    return {
        "cos_backward_wrong": kernels_from(
            tmp_path_factory, "b", spec_text({"sin": sin, "cos": (wrong_b, right_f)})
        ),
        "cos_forward_wrong": kernels_from(
            tmp_path_factory, "f", spec_text({"sin": sin, "cos": (right_b, wrong_f)})
        ),
    }


@pytest.mark.parametrize("fast", FAST)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("which", ["cos_backward_wrong", "cos_forward_wrong"])
def test_gradgradcheck_catches_wrong_second_derivatives(
    second_order_kernels, which, dtype, fast
):
    x = rand(3, dtype=dtype)
    # The outer mode decides which of cos's formulas the second derivative uses:
    # reverse over anything differentiates cos backwards, forward over forwards.
    wrong_outer = "rev" if which == "cos_backward_wrong" else "fwd"
    with using_kernels(second_order_kernels[which]):
        assert dualgen.gradcheck(torch.sin, (x,), check_forward_ad=True)
        for check in SECOND_ORDER:
            expected = not check.startswith(wrong_outer)
            verdict = dualgen.gradgradcheck(
                torch.sin, (x,), fast_mode=fast, raise_exception=False, **only(check)
            )
            assert verdict is expected, check
        with pytest.raises(dualgen.GradcheckError, match="in backward of sin"):
            dualgen.gradgradcheck(
                torch.sin, (x,), fast_mode=fast, **only(f"{wrong_outer}_over_rev")
            )
        with pytest.raises(dualgen.GradcheckError, match="in forward mode of sin"):
            dualgen.gradgradcheck(
                torch.sin, (x,), fast_mode=fast, **only(f"{wrong_outer}_over_fwd")
            )


def test_gradgradcheck_with_given_grad_outputs():
    x = rand(2, 3)
    v = rand(2, 3, seed=5, requires_grad=False)
    assert dualgen.gradgradcheck(
        lambda x: x.sin() * x, (x,), (v,), check_fwd_over_rev=True
    )
    assert dualgen.gradgradcheck(
        lambda x: x.exp().t(), x, gen_non_contig_grad_outputs=True
    )


# --------------------------------------------------------------------------------------
# 6. API behaviour


def test_no_input_requires_grad_raises_value_error():
    with pytest.raises(ValueError, match="requires_grad=True"):
        dualgen.gradcheck(torch.sin, (rand(3, requires_grad=False),))
    with pytest.raises(ValueError, match="requires_grad=True"):
        dualgen.adjoint_check(torch.sin, (torch.arange(3),))


def test_batched_checks_pass_a_right_function():
    """The batched checks themselves are compared with native's in
    test_native_conformance_gradcheck.py and test_batched_tangents.py."""
    x = rand(3)
    assert dualgen.gradcheck(
        torch.sin,
        (x,),
        check_forward_ad=True,
        check_batched_grad=True,
        check_batched_forward_grad=True,
    )
    assert dualgen.gradgradcheck(torch.sin, (x,), check_batched_grad=True)


def test_batched_checks_need_their_modes():
    with pytest.raises(AssertionError, match="requires check_forward_ad"):  # native's
        dualgen.gradcheck(torch.sin, (rand(3),), check_batched_forward_grad=True)


def test_sparse_input_is_not_implemented():
    x = torch.randn(3, dtype=F64).to_sparse().requires_grad_()
    with pytest.raises(NotImplementedError, match="strided"):
        dualgen.gradcheck(torch.sin, (x,))


def test_single_precision_input_warns_at_the_caller():
    x = torch.randn(3, requires_grad=True)
    with pytest.warns(
        UserWarning, match="Input #0 .* not a double precision"
    ) as record:
        dualgen.gradcheck(torch.sin, (x,), raise_exception=False)
    assert record[0].filename == __file__
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        dualgen.gradcheck(torch.sin, (rand(3),))  # no warning for float64


def test_gradcheck_error_is_torchs(wrong_kernels):
    assert issubclass(dualgen.GradcheckError, TorchGradcheckError)
    assert issubclass(dualgen.GradcheckError, RuntimeError)
    with using_kernels(wrong_kernels), pytest.raises(TorchGradcheckError):
        dualgen.gradcheck(torch.sin, (rand(3),))
    with using_kernels(wrong_kernels):
        assert dualgen.gradcheck(torch.sin, (rand(3),), raise_exception=False) is False
        assert (
            dualgen.gradgradcheck(torch.sin, (rand(3),), raise_exception=False) is False
        )


@pytest.mark.parametrize(
    "func,inputs,mode,match",
    [
        pytest.param(
            norule,
            lambda: (rand(3),),
            "backward",
            r"backward \(VJP\) rule for dgtest_gc::norule",
            id="custom_op_backward",
        ),
        pytest.param(
            norule,
            lambda: (rand(3),),
            "forward",
            r"forward-mode \(JVP\) rule for dgtest_gc::norule",
            id="custom_op_forward",
        ),
        pytest.param(
            torch.special.zeta,
            lambda: (
                rand(3, requires_grad=False, positive=True) + 2,
                rand(3, positive=True),
            ),
            "backward",
            r"backward \(VJP\) rule for aten::special_zeta",
            id="zeta_backward",
        ),
        pytest.param(
            torch.special.zeta,
            lambda: (
                rand(3, requires_grad=False, positive=True) + 2,
                rand(3, positive=True),
            ),
            "forward",
            r"forward-mode \(JVP\) rule for aten::special_zeta",
            id="zeta_forward",
        ),
    ],
)
def test_op_without_rule_raises_not_implemented(func, inputs, mode, match):
    options = {
        "check_backward_ad": mode == "backward",
        "check_forward_ad": mode == "forward",
    }
    with pytest.raises(NotImplementedError, match=match):
        dualgen.gradcheck(func, inputs(), **options)


@pytest.fixture(scope="module")
def subtle_kernels(tmp_path_factory):
    """Formulas wrong in ways finite differences with default tolerances miss."""
    entries = {
        # backward in the wrong dtype
        "cos": (
            "(grad * -self.sin().conj()).to(torch.float32)",
            "self_t * -self_p.sin()",
        ),
        # forward off by 1e-6 relative: within rtol, not within the adjoint check's
        "sinh": ("grad * self.cosh().conj()", "self_t * self_p.cosh() * 1.000001"),
    }
    return kernels_from(tmp_path_factory, "subtle", spec_text(entries))


class NoisySin(torch.autograd.Function):
    """A backward nondeterministic by 1e-9 relative. (A spec formula cannot draw
    random numbers: the sandbox refuses it, so the noise lives in a Function.)"""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.sin()

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * x.cos() * (1 + 1e-9 * torch.rand_like(grad))


@pytest.mark.parametrize("fast", FAST)
def test_nondet_tol(fast):
    x = rand(3)
    with pytest.raises(dualgen.GradcheckError, match="not reentrant in apply"):
        dualgen.gradcheck(NoisySin.apply, (x,), fast_mode=fast)
    assert dualgen.gradcheck(NoisySin.apply, (x,), fast_mode=fast, nondet_tol=1e-6)
    assert dualgen.gradcheck(torch.sin, (x,), fast_mode=fast)  # the spec's: exact


@pytest.mark.parametrize("fast", FAST)
def test_check_grad_dtypes(subtle_kernels, fast):
    x = rand(3)
    with using_kernels(subtle_kernels):
        assert dualgen.gradcheck(torch.cos, (x,), fast_mode=fast)
        with pytest.raises(dualgen.GradcheckError, match="dtype mismatch.*float32"):
            dualgen.gradcheck(torch.cos, (x,), fast_mode=fast, check_grad_dtypes=True)
    assert dualgen.gradcheck(torch.cos, (x,), fast_mode=fast, check_grad_dtypes=True)


@pytest.mark.parametrize("fast", FAST)
@pytest.mark.parametrize("dtype", DTYPES)
def test_check_adjoint_catches_what_finite_differences_miss(
    subtle_kernels, dtype, fast
):
    x = rand(3, dtype=dtype)
    both = {"check_forward_ad": True, "check_backward_ad": True, "fast_mode": fast}
    with using_kernels(subtle_kernels):
        assert dualgen.gradcheck(torch.sinh, (x,), check_adjoint=False, **both)
        assert dualgen.gradcheck(torch.sinh, (x,), fast_mode=fast, **FORWARD_ONLY)
        with pytest.raises(dualgen.GradcheckError, match="Adjoint mismatch"):
            dualgen.gradcheck(torch.sinh, (x,), **both)
        assert not dualgen.adjoint_check(torch.sinh, (x,), raise_exception=False)
        assert dualgen.adjoint_check(torch.sinh, (x,), rtol=1e-4)
