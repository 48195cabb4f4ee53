"""Custom autograd.Functions under dualgen: a jvp that breaks native's rules (the
wrong number, type, shape or dtype of tangents, a non-view for a view output, a
non-in-place update for a `mark_dirty` output, ...) raises native's error and
message; errors raised in forward or jvp propagate and leave the level usable.
"""

from __future__ import annotations

import pytest
import torch
from custom_function_checks import (
    STE,
    clean_state,  # noqa: F401 - autouse
    function_with,
    raises_both,
    randn,
    run_both,
)
from torch.autograd.function import Function

# --------------------------------------------------------------------------------------
# native's errors for a jvp that breaks the rules


def double_inplace(x):
    return x.mul_(2)


def the_input(x, out):
    return x


class NonDiffOutput(Function):
    @staticmethod
    def forward(ctx, x):
        mask = (x > 0).to(x.dtype)
        ctx.mark_non_differentiable(mask)
        return x * 2, mask

    @staticmethod
    def jvp(ctx, t):
        return t * 2, t


NOT_DIFFERENTIABLE = (
    "jvp returned a gradient at position 1, but  the corresponding forward output is "
    "not a differentiable Tensor"
)
JVP_ERRORS = {
    "count": (
        function_with(lambda x: x * 2, lambda t: (t, t)),
        r"jvp returned an invalid number of forward gradients \(expected 1 but got 2\)",
    ),
    "not-a-tensor": (
        function_with(lambda x: x * 2, lambda t: 3.0),
        r"expected Variable or None \(got float\) for grad output 0",
    ),
    "shape": (
        function_with(lambda x: x * 2, lambda t: t.sum()),
        r"Tensor is of size \[2, 3\] while the given forward gradient is of size \[\]",
    ),
    "integer-tangent": (
        function_with(lambda x: x * 2, lambda t: t.long()),
        "Expected both tensor and its forward grad to be floating point or complex",
    ),
    "integer-output": (
        function_with(lambda x: (x * 2, x.argmax()), lambda t: (t * 2, t.sum())),
        NOT_DIFFERENTIABLE,
    ),
    "non-differentiable-output": (NonDiffOutput, NOT_DIFFERENTIABLE),
    "input-as-is": (
        function_with(lambda x: x, lambda t: t),
        r"returning a view \(or an input as-is\) but the jvp is not returning a view",
    ),
    "input-as-is-shape": (
        function_with(lambda x: x, lambda t: t[0]),
        r"Tensor is of size \[2, 3\] while the given forward gradient is of size \[3\]",
    ),
    "view-shape": (
        function_with(lambda x: x[0, :2], lambda t: t[1]),
        r"Tensor is of size \[2\] while the given forward gradient is of size \[3\]",
    ),
    "view-not-a-view": (
        function_with(lambda x: x[0], lambda t: t[0].clone()),
        r"returning a view \(or an input as-is\) but the jvp is not returning a view",
    ),
    "view-of-another": (
        function_with(lambda x: x[0], lambda t: t.clone()[0]),
        "jvp is not returning a view of the given grad input",
    ),
    "inplace-not-inplace": (
        function_with(double_inplace, lambda t: t * 2, dirty=the_input),
        "is not modifying the forward mode gradients inplace",
    ),
    "inplace-none": (
        function_with(double_inplace, lambda t: None, dirty=the_input),
        "is not modifying the forward mode gradients inplace",
    ),
    "inplace-not-as-is": (
        function_with(double_inplace, lambda t: t.mul_(2).view_as(t), dirty=the_input),
        "is not returning the forward mode gradients as-is",
    ),
    "dirty-not-an-input": (
        function_with(lambda x: x * 2, lambda t: t * 2, dirty=lambda x, out: out),
        "Only input Tensors should be given to ctx.mark_dirty()",
    ),
}


@pytest.mark.parametrize("case", list(JVP_ERRORS))
def test_jvp_breaking_the_rules_raises_native_errors(case):
    fn, match = JVP_ERRORS[case]

    def program(fwAD):
        with fwAD.dual_level():
            x = fwAD.make_dual(randn(2, 3), randn(2, 3)).clone()
            fn.apply(x)

    raises_both(program, RuntimeError, match)


def test_view_of_a_view_tangent_must_share_its_base():
    fn = function_with(lambda x: x.view(-1), lambda t: t.clone().view(-1))

    def program(fwAD):
        with fwAD.dual_level():
            x = fwAD.make_dual(randn(2, 3), randn(2, 3))
            fn.apply(x[1])

    raises_both(program, RuntimeError, "not returning a view of the same base")


@pytest.mark.parametrize("where", ["forward", "jvp"])
def test_errors_in_forward_or_jvp_propagate_and_leave_the_level_usable(where):
    def fail(value):
        raise ValueError(f"broken {where}")

    fn = function_with(
        fail if where == "forward" else torch.sin, fail if where == "jvp" else torch.cos
    )

    def program(fwAD):
        with fwAD.dual_level():
            x = fwAD.make_dual(randn(3), randn(3))
            with pytest.raises(ValueError, match=f"broken {where}"):
                fn.apply(x)
            return fwAD.unpack_dual(STE.apply(x))

    run_both(program)
