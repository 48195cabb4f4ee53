"""Where the kernel tests cannot take native PyTorch as the oracle.

Keys are (kernel, "jvp" or "vjp"); the value is the reason, for every case of the
kernel, or `OnCases` for the cases it names. Each such comparison is a strict
xfail, and `dualgen validate` checks the kernel against finite differences
instead. (Where native raises that it has no rule or refuses a dtype, the kernel
tests xfail at run time; see test_kernels._NATIVE_REFUSALS.)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class OnCases:
    reason: str
    # (the case's values by argument name, its dtype) -> whether native is wrong
    applies: Callable[[dict, torch.dtype], bool]


def _complex(values: dict, dtype: torch.dtype) -> bool:
    return dtype.is_complex


def _repeats_a_counted_index(values: dict, dtype: torch.dtype) -> bool:
    if not values["scale_grad_by_freq"]:
        return False
    counted = values["indices"][values["indices"] != values["padding_idx"]]
    return counted.unique().numel() < counted.numel()


_SVD_VECTORS = (
    "native's formulas read {vectors}, which {flag}=False leaves empty (INTERNAL "
    "ASSERT); torch.linalg asks for them whenever it differentiates"
)
_SILU = (
    "native's complex {what} of silu is not that of the holomorphic x sigmoid(x) "
    "(finite differences agree with dualgen's)"
)

_SAVED = (
    "native gives the {what} this op saves no tangent and no grad_fn; dualgen "
    "differentiates it, since native's backward formula reads it and under "
    "forward over reverse it must move with the input (docs/differences.md)"
)


def _has_weight(values: dict, dtype: torch.dtype) -> bool:
    return values.get("weight") is not None


_DROPPED_WEIGHT = (
    "native's forward formula takes the {what} as a constant: a tangent on it "
    "gives no share of the output's tangent, with no error (finite differences "
    "agree with dualgen's: tests/runtime/test_loss_weight_tangents.py)"
)


def _reads_running_statistics(values: dict, dtype: torch.dtype) -> bool:
    return values.get("running_mean") is not None and not values.get("training", False)


def _index_reduce_native_wrong(values: dict, dtype: torch.dtype) -> bool:
    extreme = values["reduce"] in ("amax", "amin") and not values["include_self"]
    return extreme or (values["reduce"] == "prod" and dtype.is_complex)


# Native PyTorch 2.13 is wrong or has no rule, so comparing with it fails.
NATIVE_WRONG = {
    **{
        (kernel, "vjp"): OnCases(
            "torch's backward of index_reduce counts self among the elements "
            "attaining amax/amin where include_self=False leaves it out (a source "
            "equal to self gets half its gradient), and does not conjugate prod's "
            "derivative for complex inputs (finite differences agree with dualgen's: "
            "dualgen validate)",
            _index_reduce_native_wrong,
        )
        for kernel in ("index_reduce", "index_reduce_")
    },
    **{
        (kernel, "jvp"): OnCases(
            "in eval mode native's forward formula takes the running statistics "
            "as constants: their tangents give no share, with no error (central "
            "differences: tests/runtime/test_loss_weight_tangents.py)",
            _reads_running_statistics,
        )
        for kernel in (
            "native_batch_norm",
            "_native_batch_norm_legit",
            "_native_batch_norm_legit_no_training",
            "_batch_norm_no_update",
            "cudnn_batch_norm",
            "miopen_batch_norm",
        )
    },
    **{
        (kernel, "jvp"): OnCases(_DROPPED_WEIGHT.format(what=what), _has_weight)
        for kernel, what in (
            ("binary_cross_entropy", "element weights"),
            ("binary_cross_entropy_backward", "element weights"),
            ("nll_loss_forward", "class weights"),
        )
    },
    ("native_dropout_backward", "jvp"): "native has no forward-AD formula for "
    "native_dropout_backward (NotImplementedError), so forward-over-reverse of "
    "dropout fails natively",
    ("masked_scatter_backward", "jvp"): "native's forward formula gives a tangent "
    "of grad_output's shape, not of `sizes` (RuntimeError: different size)",
    ("triangular_solve", "jvp"): "native's JVP uses the whole tangent of A, not the "
    "triangle the op reads, and dA X for dA^T X with transpose=True",
    ("cholesky_solve", "jvp"): "native's JVP uses the whole tangent of the factor, "
    "not the triangle the op reads",
    ("cholesky_solve", "vjp"): "native's gradient is not confined to the triangle "
    "the op reads",
    ("cholesky_inverse", "jvp"): "native's JVP is wrong even for a triangular "
    "tangent (its own backward agrees with finite differences)",
    ("cholesky_inverse", "vjp"): "native's gradient is not confined to the "
    "triangle the op reads",
    ("as_strided_scatter", "vjp"): "native's gradient of self is grad inside the "
    "scattered region and zero outside, the reverse of the derivative",
    **{
        (f"logical_{op}_", check): f"native's {what} though the result (0 or 1) "
        "is piecewise constant (docs/differences.md)"
        for op in ("and", "or", "xor", "not")
        for check, what in (
            ("jvp", "tangent is self's old one"),
            ("vjp", "gradient passes grad through to self"),
        )
    },
    ("_weight_norm_interface", "vjp"): "native gives the norms output no grad_fn, "
    "so its gradient cannot be asked (RuntimeError: element 1 does not require "
    "grad); dualgen differentiates both outputs",
    ("_fake_quantize_learnable_per_tensor_affine", "vjp"): OnCases(
        "native's backward runs in float32 only (RuntimeError: Expected "
        "dY_.scalar_type() == ScalarType::Float); dualgen's in any floating dtype",
        lambda values, dtype: dtype != torch.float32,
    ),
    ("norm.Scalar", "jvp"): OnCases(
        "native's JVP gives the 0-d norm of a tensor with dims a [1, 1] tangent "
        "(RuntimeError: a forward gradient of a different size)",
        lambda values, dtype: values["self"].dim() > 0,
    ),
    **{
        ("_linalg_svd", check): OnCases(
            _SVD_VECTORS.format(vectors="U and Vh", flag="compute_uv"),
            lambda values, dtype: not values["compute_uv"],
        )
        for check in ("jvp", "vjp")
    },
    **{
        ("_linalg_eigh", check): OnCases(
            _SVD_VECTORS.format(vectors="the eigenvectors", flag="compute_v"),
            lambda values, dtype: not values["compute_v"],
        )
        for check in ("jvp", "vjp")
    },
    ("silu", "jvp"): OnCases(_SILU.format(what="JVP"), _complex),
    ("silu_", "jvp"): OnCases(_SILU.format(what="JVP"), _complex),
    ("silu_", "vjp"): OnCases(_SILU.format(what="gradient"), _complex),
    **{
        (kernel, "vjp"): OnCases(
            "native's gradient of src has index's shape, not src's, when index is "
            "smaller (RuntimeError: invalid gradient)",
            lambda values, dtype: values["index"].shape != values["src"].shape,
        )
        for kernel in ("scatter.src", "scatter_.src")
    },
    **{
        (kernel, "vjp"): OnCases(
            "with reduction='mean', native's gradient of grad_output divides by the "
            "weight total it recomputes from target and weight, not by the "
            "total_weight passed; they agree only when total_weight is that total",
            lambda values, dtype: values["reduction"] == 1,
        )
        for kernel in ("nll_loss_backward", "nll_loss2d_backward")
    },
    **{
        (kernel, check): OnCases(
            "native's complex derivative of nan_to_num zeroes both parts of a value "
            "when one is not finite; nan_to_num replaces each part on its own",
            lambda values, dtype: dtype.is_complex
            and not values["self"].isfinite().all(),
        )
        for kernel in ("nan_to_num", "nan_to_num_")
        for check in ("jvp", "vjp")
    },
    ("sum.dim_IntList", "vjp"): OnCases(
        "native's backward of a real tensor summed to a complex dtype fails "
        "(RuntimeError: Expected isFloatingType(grad.scalar_type()) ...)",
        lambda values, dtype: not dtype.is_complex
        and values["dtype"] is not None
        and values["dtype"].is_complex,
    ),
    ("embedding_dense_backward", "vjp"): OnCases(
        "native's gradient of grad_output ignores scale_grad_by_freq (it is "
        "grad_output's rows, not divided by their index's count)",
        _repeats_a_counted_index,
    ),
    **{
        (kernel, "vjp"): OnCases(
            "native's backward fails without a weight (RuntimeError: Expected a "
            "proper Tensor but got None for argument 'weight')",
            lambda values, dtype: values["weight"] is None,
        )
        for kernel in ("_batch_norm_no_update", "_batch_norm_with_update")
    },
    ("norm.ScalarOpt_dtype", "jvp"): OnCases(
        "native's JVP gives the 0-d norm of a tensor with dims a [1, 1] tangent "
        "(RuntimeError: a forward gradient of a different size)",
        lambda values, dtype: values["self"].dim() > 0,
    ),
    ("_foreach_norm.Scalar", "jvp"): "native's JVP gives the 0-d norm of each "
    "tensor a [1, 1] tangent (RuntimeError: a forward gradient of a different size)",
    ("soft_margin_loss", "jvp"): OnCases(
        "native's complex tangent of soft_margin_loss disagrees with finite "
        "differences (dualgen's agrees)",
        _complex,
    ),
    **{
        (kernel, check): "native treats a normal draw as not differentiable (zero "
        f"{what}); with the draws fixed by the seed, result = mean + std * eps and "
        "its derivative is the pathwise one"
        for kernel in (
            "normal.Tensor_float",
            "normal.float_Tensor",
            "normal.Tensor_Tensor",
        )
        for check, what in (("jvp", "tangent"), ("vjp", "gradient"))
    },
    **{
        (kernel, "vjp"): "native's gradient of log_probs assumes they came from a "
        "log_softmax; dualgen's is the derivative of the op itself"
        for kernel in ("_ctc_loss", "_ctc_loss.Tensor")
    },
    **{
        (f"_foreach_{op}.{overload}", "jvp"): "native's tangent is scalar + w * "
        "(self_t - scalar), affine in self_t: with a zero tangent it gives "
        "(1 - w) * scalar"
        for op in ("minimum", "maximum")
        for overload in ("Scalar", "ScalarList")
    },
    ("mkldnn_rnn_layer", "vjp"): OnCases(
        "without biases (has_biases=False: the bias arguments are placeholders "
        "shaped like the weights) native's backward returns (4 hidden) bias "
        "gradients, which autograd refuses (invalid gradient shape)",
        lambda values, dtype: not values["has_biases"],
    ),
    ("_embedding_bag_forward_only", "vjp"): "native's backward refuses the op "
    "(RuntimeError: Autograd not support dtype: Long)",
}

# Kernels that differ from native on purpose, on every case they have.
_BUFFER = (
    "dualgen gives log_sigmoid_forward's `buffer` (exp(-|x|)) a tangent and a "
    "gradient, because the CPU kernel of log_sigmoid_backward reads the derivative's "
    "size from it; native declares it non-differentiable"
)
DIFFERS_FROM_NATIVE = {
    **{
        (kernel, "vjp"): "native gives total_weight (the mean's divisor, a sum of "
        "class weights) no grad_fn; dualgen differentiates it with the weights, "
        "since nll_loss_backward reads it (finite differences: dualgen validate)"
        for kernel in ("nll_loss_forward", "nll_loss2d_forward")
    },
    **{
        (kernel, check): _SAVED.format(what="LU factorization")
        for kernel in ("_linalg_det", "_linalg_slogdet", "_linalg_solve_ex")
        for check in ("jvp", "vjp")
    },
    **{
        (kernel, check): _BUFFER
        for kernel in ("log_sigmoid_forward", "log_sigmoid_backward")
        for check in ("jvp", "vjp")
    },
    ("max_pool2d_backward", "jvp"): "native's forward formula (auto_linear) runs "
    "the op on self's tangent, so it scatters to the maxima of the tangent, not of "
    "self; finite differences agree with dualgen's (max_pool2d_backward(grad_t, self))",
    ("max_pool2d_backward", "vjp"): "native refuses its double backward (max_pool2d "
    "with return_indices=False is not infinitely differentiable); dualgen gathers "
    "grad at the maxima of self",
    ("_scaled_dot_product_flash_attention_for_cpu", "vjp"): "native gives logsumexp "
    "no gradient and refuses one for attn_mask; dualgen differentiates both",
    **{
        (kernel, "vjp"): "native gives logsumexp no gradient (and cuDNN's attn_bias "
        "none); dualgen differentiates them (finite differences through the test "
        "references: dualgen validate, tests/runtime/test_device_attention.py)"
        for kernel in (
            "_scaled_dot_product_flash_attention",
            "_scaled_dot_product_efficient_attention",
            "_scaled_dot_product_cudnn_attention",
        )
    },
    **{
        (kernel, "vjp"): "native gives the lower attention kernels' logsumexp no "
        "gradient, and its backward runs the device's backward kernel, which has no "
        "CPU kernel; dualgen differentiates logsumexp (finite differences through "
        "the test references: dualgen validate, "
        "tests/runtime/test_device_attention_lower.py)"
        for kernel in ("_flash_attention_forward", "_efficient_attention_forward")
    },
    **{
        (kernel, "vjp"): "dualgen differentiates the fused cell's workspace (its "
        "activated gates, which the backward kernel reads in place of the inputs) "
        "and native does not (forward over reverse needs it: docs/differences.md; "
        "finite differences through the test references: dualgen validate, "
        "tests/runtime/test_device_rnn_cells.py)"
        for kernel in ("_thnn_fused_lstm_cell", "_thnn_fused_gru_cell")
    },
}


def native_difference(kernel: str, check: str, values: dict, dtype) -> str | None:
    """Why native cannot be the oracle for this comparison, if it cannot."""
    reason = NATIVE_WRONG.get((kernel, check)) or DIFFERS_FROM_NATIVE.get(
        (kernel, check)
    )
    if isinstance(reason, OnCases):
        return reason.reason if reason.applies(values, dtype) else None
    return reason
