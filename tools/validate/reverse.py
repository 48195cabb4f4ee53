"""validate's reverse-over-forward column: the check's verdict per sample
(dualgen.harness.reverse_check), what torch's autograd cannot differentiate, and
the kernels known to disagree, with why."""

from __future__ import annotations

from collections.abc import Callable

from .verdicts import NotApplicable, Verdict

# What torch's autograd itself does not differentiate: the gradient of a tangent
# cannot be taken there, whatever the formula (reverse_over_forward_check).
_AUTOGRAD_CANNOT = (
    "does not support automatic differentiation for outputs with complex dtype",
    "is not differentiable with respect to argument",
    "is not implemented",  # an op the formula calls has no derivative in torch
    "cannot resize variables that require grad",
    "Autograd not support dtype",
    "specified up to multiplication by e^{i phi}",  # a gauge: torch refuses
    "no autograd formula was registered",  # a custom op without register_autograd
    # torch's backward formulas broadcast, which nested tensors refuse (the
    # gradient of softmax's backward op with respect to the output)
    "does not support broadcasting when given a NestedTensor",
)


# Kernels whose tangents' gradients disagree with finite differences, and why:
# reported as "known", and as a failure once they pass (as a strict xfail is).
KNOWN_REVERSE = {
    **dict.fromkeys(
        ("cholesky_solve", "cholesky_inverse"),
        "torch's own backward of the op gives the triangle of the factor it never "
        "reads a gradient (a symmetric convention), which the tangent's graph "
        "inherits through the op's output",
    ),
    **dict.fromkeys(
        ("normal.float_Tensor", "normal.Tensor_Tensor"),
        "torch's backward of normal is zero (not reparameterized) while its "
        "tangent, native's as dualgen's, is mean_t + std_t * the drawn noise",
    ),
    **dict.fromkeys(
        ("_scaled_dot_product_efficient_attention", "_efficient_attention_forward"),
        "a sample computes no logsumexp (compute_log_sumexp=False), which torch's "
        "backward of the op reads (torch computes it wherever autograd records)",
    ),
    "_masked_softmax": "torch's backward of the op refuses the masks of "
    "mask_type 1 and 0 ((B, L) and (L, L): 'Mask shape should match grad shape'), "
    "so autograd cannot differentiate the output the tangent reads (samples 3 "
    "and 4)",
    "_flash_attention_forward": "torch's backward of the op drops alibi_slopes "
    "(FlashAttentionBackward0 saves none; _flash_attention_backward takes none), "
    "so the gradient autograd gives the output, which the tangent reads, is that "
    "of attention without ALiBi (the third sample)",
}


def reverse_verdict(function: Callable, inputs: tuple, tolerances: dict) -> str | None:
    """The reverse-over-forward check; n/a where autograd cannot take the
    gradient or the sample sits on a kink, and in single precision (whose
    differences would need the step sizes and tolerances of their own)."""
    from dualgen.harness import reverse_check

    if tolerances:
        return NotApplicable("checked in double precision only")
    try:
        reverse_check.reverse_over_forward_check(function, inputs)
    except reverse_check.NotApplicable as exc:
        return NotApplicable(str(exc))
    except RuntimeError as exc:  # NotImplementedError included
        text = str(exc)
        if "does not support it" in text:
            # (as the jet check: a spec without the rule of an op the run needs)
            return NotApplicable(
                "an op the check runs has no forward formula in this spec"
            )
        if any(reason in text for reason in _AUTOGRAD_CANNOT):
            return NotApplicable("autograd cannot: " + text.splitlines()[0])
        raise
    return None


def known_reverse(failures: list[str], passed: set[str], reason: str) -> Verdict:
    """A KNOWN_REVERSE kernel's verdict: known while it fails, a failure once it
    passes (so the list stays true)."""
    if failures:
        return Verdict("known", f"{reason} ({failures[0]})")
    if "reverse" in passed:
        return Verdict(
            "fail", "passes: remove it from KNOWN_REVERSE (tools/validate/reverse.py)"
        )
    return Verdict("n/a", "")
