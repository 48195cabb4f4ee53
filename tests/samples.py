"""Sample inputs for every spec entry, for the kernel tests.

`T(*shape, domain=...)` stands for a random tensor made at test time in the test's
dtype; everything else is passed as written. In-place variants derived from a
functional entry reuse its samples.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class T:
    shape: tuple[int, ...]
    domain: str = "any"  # any, positive, unit (|x| < 1), distinct, prob, above_one
    dtype: torch.dtype | None = None  # fixed dtype (e.g. bool), else the test's

    def __init__(
        self, *shape: int, domain: str = "any", dtype: torch.dtype | None = None
    ):
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "domain", domain)
        object.__setattr__(self, "dtype", dtype)


@dataclass(frozen=True)
class Sample:
    args: tuple
    kwargs: tuple[tuple[str, object], ...] = ()
    complex_ok: bool = True
    real_ok: bool = True


def S(*args, complex_ok: bool = True, real_ok: bool = True, **kwargs) -> Sample:
    return Sample(args, tuple(sorted(kwargs.items())), complex_ok, real_ok)


def unary(domain: str = "any", complex_ok: bool = True) -> list[Sample]:
    return [
        S(T(3, 4, domain=domain), complex_ok=complex_ok),
        S(T(domain=domain), complex_ok=complex_ok),
        S(T(0, 2, domain=domain), complex_ok=complex_ok),
    ]


def binary(
    domain: str = "any", other: str = "any", complex_ok: bool = True
) -> list[Sample]:
    return [
        S(T(3, 4, domain=domain), T(3, 4, domain=other), complex_ok=complex_ok),
        S(T(3, 4, domain=domain), T(4, domain=other), complex_ok=complex_ok),
        S(T(3, 1, domain=domain), T(4, domain=other), complex_ok=complex_ok),
        S(T(domain=domain), T(2, 3, domain=other), complex_ok=complex_ok),
    ]


# (kernel, "jvp" or "vjp") where native PyTorch 2.13 is wrong or has no rule, so
# comparing with it fails; `dualgen validate` checks these kernels against finite
# differences.
NATIVE_WRONG = {
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
}

# Kernels that differ from native on purpose, on every sample they have (a strict
# xfail; `dualgen validate` checks them against finite differences).
_BUFFER = (
    "dualgen gives log_sigmoid_forward's `buffer` (exp(-|x|)) a tangent and a "
    "gradient, because the CPU kernel of log_sigmoid_backward reads the derivative's "
    "size from it; native declares it non-differentiable"
)
DIFFERS_FROM_NATIVE = {
    (kernel, check): _BUFFER
    for kernel in ("log_sigmoid_forward", "log_sigmoid_backward")
    for check in ("jvp", "vjp")
}


def _statistics(x: torch.Tensor, dims, keepdim: bool, eps: float) -> tuple:
    """The mean and 1 / sqrt(biased variance + eps) of `x` over `dims`."""
    mean = x.mean(dims, keepdim=keepdim)
    return mean, (x.var(dims, correction=0, keepdim=keepdim) + eps).rsqrt()


_FIXED = torch.Generator().manual_seed(5)
_LN_X = torch.randn(2, 3, 4, generator=_FIXED, dtype=torch.float64)
_BN_X = torch.randn(3, 2, 4, generator=_FIXED, dtype=torch.float64)

SAMPLES: dict[str, list[Sample]] = {
    "abs": unary(domain="nonzero"),
    "neg": unary(),
    "sin": unary(),
    "cos": unary(),
    "tan": unary(domain="unit"),
    "tanh": unary(),
    "sigmoid": unary(),
    "exp": unary(),
    "exp2": unary(),
    "expm1": unary(),
    "log": unary(domain="positive"),
    "log2": unary(domain="positive"),
    "log1p": unary(domain="positive"),
    "sqrt": unary(domain="positive"),
    "rsqrt": unary(domain="positive"),
    "reciprocal": unary(domain="positive"),
    "relu": unary(domain="nonzero", complex_ok=False),
    "sinh": unary(),
    "cosh": unary(),
    "asin": unary(domain="unit"),
    "acos": unary(domain="unit"),
    "atan": unary(domain="unit"),
    "erf": unary(complex_ok=False),
    "clamp": [
        S(T(3, 4, domain="distinct"), -0.5, 0.5, complex_ok=False),
        S(T(3, 4, domain="distinct"), None, 0.2, complex_ok=False),
        S(T(5, domain="distinct"), min=-0.3, complex_ok=False),
    ],
    "clone": unary(),
    "_to_copy": [S(T(3, 4)), S(T(2, 2), dtype=torch.complex128, complex_ok=False)],
    "detach": unary(),
    "add.Tensor": binary() + [S(T(3, 4), T(3, 4), alpha=2.5)],
    "add.Scalar": [S(T(3, 4), 2.0), S(T(3), 1.5, 3)],
    "sub.Tensor": binary() + [S(T(2, 3), T(3), alpha=-1.5)],
    "sub.Scalar": [S(T(3, 4), 2.0), S(T(3), 1.5, 3)],
    "mul.Tensor": binary(),
    "rsub.Tensor": binary() + [S(T(3, 4), T(4), alpha=2.5)],
    "rsub.Scalar": [S(T(3, 4), 2.0), S(T(3), 1.5, 3)],
    "mul.Scalar": [S(T(3, 4), 2.5), S(T(2), 3)],
    "div.Tensor": binary(other="positive"),
    "div.Scalar": [S(T(3, 4), 2.5), S(T(), -4)],
    "pow.Tensor_Scalar": [
        S(T(3, 4, domain="positive"), 2.5),
        S(T(3, 4), 3),
        S(T(3, 4), 0),
        S(T(2, domain="positive"), -1.5),
    ],
    "pow.Tensor_Tensor": [
        S(T(3, 4, domain="positive"), T(3, 4)),
        S(T(3, 1, domain="positive"), T(4)),
    ],
    "pow.Scalar": [S(2.5, T(3, 4)), S(0.5, T(3))],
    "maximum": binary(domain="distinct", other="distinct", complex_ok=False),
    "minimum": binary(domain="distinct", other="distinct", complex_ok=False),
    "where.self": [
        S(T(3, 4, dtype=torch.bool), T(3, 4), T(3, 4)),
        S(T(3, 1, dtype=torch.bool), T(4), T(3, 4)),
    ],
    "atan2": binary(other="positive", complex_ok=False),
    "sum": [S(T(3, 4)), S(T()), S(T(0, 3))],
    "sum.dim_IntList": [
        S(T(3, 4, 5), [1]),
        S(T(3, 4, 5), [0, 2], True),
        S(T(3, 4), None),
        S(T(3, 4), [-1], dtype=torch.float32),
    ],
    "mean": [S(T(3, 4)), S(T())],
    "mean.dim": [S(T(3, 4, 5), [1]), S(T(3, 4, 5), [0, 2], True), S(T(3, 4), None)],
    "amax": [
        S(T(3, 4, 5, domain="distinct"), [1], complex_ok=False),
        S(T(3, 4, domain="distinct"), [], True, complex_ok=False),
        S(T(3, 4, domain="distinct"), [0, 1], complex_ok=False),
    ],
    "amin": [
        S(T(3, 4, 5, domain="distinct"), [1], complex_ok=False),
        S(T(3, 4, domain="distinct"), [0], True, complex_ok=False),
    ],
    "max.dim": [
        S(T(3, 4, domain="distinct"), 1, complex_ok=False),
        S(T(3, 4, domain="distinct"), 0, True, complex_ok=False),
    ],
    "min.dim": [
        S(T(3, 4, domain="distinct"), 1, complex_ok=False),
        S(T(3, 4, domain="distinct"), -1, True, complex_ok=False),
    ],
    "mm": [S(T(3, 4), T(4, 2))],
    "bmm": [S(T(2, 3, 4), T(2, 4, 5))],
    "addmm": [
        S(T(3, 2), T(3, 4), T(4, 2)),
        S(T(2), T(3, 4), T(4, 2), beta=0.5, alpha=2.0),
    ],
    "mv": [S(T(3, 4), T(4))],
    "dot": [S(T(4), T(4))],
    "alias": unary(),
    "as_strided": [S(T(4, 3), [2, 2], [3, 1], 1), S(T(6), [2, 2], [1, 2])],
    "zeros_like": [S(T(3, 4))],
    "ones_like": [S(T(3, 4))],
    "empty_like": [S(T(3, 4))],
    "full_like": [S(T(3, 4), 2.5)],
    "new_zeros": [S(T(3), [2, 2])],
    "new_ones": [S(T(3), [2, 2])],
    "new_empty": [S(T(3), [2, 2])],
    "new_full": [S(T(3), [2], 1.5)],
    # Backward ops: real only (their complex conjugation conventions are untested).
    "tanh_backward": [S(T(3, 4), T(3, 4, domain="unit"), complex_ok=False)],
    "sigmoid_backward": [S(T(3, 4), T(3, 4, domain="unit"), complex_ok=False)],
    "threshold_backward": [
        S(T(3, 4), T(3, 4, domain="nonzero"), 0.0, complex_ok=False)
    ],
    "_softmax_backward_data": [
        S(T(3, 4), T(3, 4, domain="positive"), 1, torch.float64, complex_ok=False)
    ],
    "_log_softmax_backward_data": [
        S(T(3, 4), T(3, 4), 0, torch.float64, complex_ok=False)
    ],
    "select_backward": [S(T(4), [3, 4], 0, 1), S(T(3), [3, 4], 1, -1)],
    "slice_backward": [S(T(2, 4), [5, 4], 0, 1, 4, 2), S(T(5, 2), [5, 6], 1, 0, 4, 2)],
    "view": [S(T(3, 4), [4, 3]), S(T(2, 3, 2), [-1])],
    "_unsafe_view": [S(T(3, 4), [2, 6])],
    "t": [S(T(3, 4)), S(T(3))],
    "transpose.int": [S(T(2, 3, 4), 0, 2)],
    "permute": [S(T(2, 3, 4), [2, 0, 1])],
    "expand": [S(T(3, 1), [2, 3, 4])],
    "slice.Tensor": [S(T(5, 4), 0, 1, 4), S(T(5, 6), 1, None, None, 2)],
    "select.int": [S(T(5, 4), 0, 2), S(T(5, 4), 1, -1)],
    "unsqueeze": [S(T(3, 4), 1), S(T(3, 4), -1)],
    "squeeze": [S(T(3, 1, 4)), S(T(1, 1))],
    "squeeze.dim": [S(T(3, 1, 4), 1), S(T(3, 4), 0)],
    "view_as_real": [S(T(3, 4), real_ok=False), S(T(), real_ok=False)],
    "view_as_complex": [S(T(3, 2), complex_ok=False), S(T(2, 4, 2), complex_ok=False)],
    # torch asserts on _conj of a real tensor: complex only.
    "_conj": [S(T(3, 4), real_ok=False), S(T(), real_ok=False)],
    "resolve_conj": unary(),
    "_neg_view": unary(),
    "resolve_neg": unary(),
    "conj_physical": unary(),
    "_conj_physical": unary(),
    "cat": [S([T(2, 3), T(4, 3)]), S([T(2, 3), T(2, 1)], 1), S([T(2, 3), T(0)])],
    "stack": [S([T(2, 3), T(2, 3)]), S([T(2, 3), T(2, 3), T(2, 3)], 1)],
    "copy_": [S(T(3, 4), T(3, 4)), S(T(3, 4), T(4))],
    "zero_": [S(T(3, 4))],
    "fill_.Scalar": [S(T(3, 4), 2.5)],
    "fill_.Tensor": [S(T(3, 4), T())],
    **{
        f"{op}_.Scalar": [S(T(3, 4), 0.25, complex_ok=False)]
        for op in ("eq", "ne", "lt", "le", "gt", "ge")
    },
    **{
        f"{op}_.Tensor": [
            S(T(3, 4), T(3, 4), complex_ok=False),
            S(T(3, 4), T(4), complex_ok=False),
        ]
        for op in ("eq", "ne", "lt", "le", "gt", "ge")
    },
    **{
        f"logical_{op}_": [S(T(3, 4), T(3, 4), complex_ok=False)]
        for op in ("and", "or", "xor")
    },
    "logical_not_": [S(T(3, 4), complex_ok=False)],
    "_softmax": [
        S(T(3, 4), 1, False, complex_ok=False),
        S(T(3, 4), 0, False, complex_ok=False),
    ],
    "_log_softmax": [S(T(3, 4), 1, False, complex_ok=False)],
    "softmax.int": [S(T(3, 4), -1, complex_ok=False)],
    "log_softmax.int": [S(T(3, 4), 0, complex_ok=False)],
    # nn (all real only: torch's CPU kernels have no complex support for these)
    "convolution": [
        S(T(2, 4, 5), T(6, 2, 3), T(6), [1], [1], [1], False, [0], 2, complex_ok=False),
        S(
            T(1, 2, 4, 5),
            T(3, 2, 2, 3),
            None,
            [2, 1],
            [0, 1],
            [1, 2],
            False,
            [0, 0],
            1,
            complex_ok=False,
        ),
        S(
            T(2, 4, 3, 3),
            T(4, 3, 2, 2),
            T(6),
            [2, 2],
            [1, 0],
            [1, 1],
            True,
            [1, 0],
            2,
            complex_ok=False,
        ),
    ],
    "native_layer_norm": [
        S(T(2, 3, 4), [4], T(4), T(4), 1e-5, complex_ok=False),
        S(T(2, 3, 4), [3, 4], None, None, 1e-5, complex_ok=False),
    ],
    "native_batch_norm": [
        S(T(3, 2, 4), T(2), T(2), None, None, True, 0.1, 1e-5, complex_ok=False),
        S(
            T(3, 2, 2, 2),
            T(2),
            T(2),
            T(2),
            T(2, domain="positive"),
            False,
            0.1,
            1e-5,
            complex_ok=False,
        ),
    ],
    "native_group_norm": [
        S(T(2, 4, 3), T(4), T(4), 2, 4, 3, 2, 1e-5, complex_ok=False),
        S(T(2, 6, 2, 2), None, None, 2, 6, 4, 3, 1e-5, complex_ok=False),
    ],
    "_adaptive_avg_pool2d": [S(T(2, 3, 5, 4), [2, 3], complex_ok=False)],
    "_adaptive_avg_pool3d": [S(T(2, 2, 4, 3, 5), [2, 2, 3], complex_ok=False)],
    "avg_pool2d": [
        S(T(2, 3, 5, 5), [2, 2], complex_ok=False),
        S(T(3, 5, 6), [3, 2], [2, 1], [1, 1], True, False, complex_ok=False),
    ],
    "avg_pool3d": [S(T(1, 2, 4, 4, 4), [2, 2, 2], complex_ok=False)],
    "max_pool2d_with_indices": [
        S(T(2, 3, 5, 5, domain="distinct"), [2, 2], complex_ok=False),
        S(
            T(3, 5, 6, domain="distinct"),
            [3, 2],
            [2, 1],
            [1, 1],
            [1, 2],
            True,
            complex_ok=False,
        ),
    ],
    "max_pool3d_with_indices": [
        S(T(1, 2, 4, 4, 4, domain="distinct"), [2, 2, 2], complex_ok=False)
    ],
    "adaptive_max_pool2d": [
        S(T(2, 3, 5, 4, domain="distinct"), [2, 3], complex_ok=False)
    ],
    "adaptive_max_pool3d": [
        S(T(2, 2, 4, 3, 5, domain="distinct"), [2, 2, 3], complex_ok=False)
    ],
    "upsample_nearest1d": [
        S(T(2, 3, 4), [7], complex_ok=False),
        S(T(2, 3, 4), [8], 2.0, complex_ok=False),
    ],
    "upsample_nearest2d": [S(T(2, 3, 4, 3), [7, 5], complex_ok=False)],
    "upsample_nearest3d": [S(T(1, 2, 2, 3, 2), [3, 5, 4], complex_ok=False)],
    "upsample_nearest1d.vec": [S(T(2, 3, 4), [7], None, complex_ok=False)],
    "upsample_nearest2d.vec": [S(T(2, 3, 4, 3), [7, 5], None, complex_ok=False)],
    "_upsample_nearest_exact1d": [S(T(2, 3, 4), [7], complex_ok=False)],
    "_upsample_nearest_exact2d": [S(T(2, 3, 4, 3), [7, 5], complex_ok=False)],
    "_upsample_nearest_exact3d": [S(T(1, 2, 2, 3, 2), [3, 5, 4], complex_ok=False)],
    "upsample_linear1d": [
        S(T(2, 3, 4), [7], False, complex_ok=False),
        S(T(2, 3, 4), [6], True, complex_ok=False),
    ],
    "upsample_bilinear2d": [
        S(T(2, 3, 4, 3), [7, 5], False, complex_ok=False),
        S(T(1, 2, 3, 3), [5, 4], True, complex_ok=False),
    ],
    "upsample_bilinear2d.vec": [
        S(T(2, 3, 4, 3), [7, 5], False, None, complex_ok=False)
    ],
    "upsample_bicubic2d": [
        S(T(2, 3, 4, 3), [7, 5], False, complex_ok=False),
        S(T(1, 2, 3, 3), [5, 4], True, complex_ok=False),
    ],
    "upsample_trilinear3d": [S(T(1, 2, 2, 3, 2), [3, 5, 4], False, complex_ok=False)],
    "mse_loss": [
        S(T(3, 4), T(3, 4), complex_ok=False),
        S(T(3, 4), T(3, 4), 0, complex_ok=False),
        S(T(3, 4), T(3, 4), 2, complex_ok=False),
    ],
    "smooth_l1_loss": [
        S(T(3, 4), T(3, 4), complex_ok=False),
        S(T(3, 4), T(3, 4), 0, 0.5, complex_ok=False),
    ],
    "huber_loss": [
        S(T(3, 4), T(3, 4), complex_ok=False),
        S(T(3, 4), T(3, 4), 2, 0.5, complex_ok=False),
    ],
    "glu": [S(T(3, 4), complex_ok=False), S(T(4, 3), 0, complex_ok=False)],
    # p=0, p=1 or eval mode: the random mask is then fixed.
    # torch's autograd refuses complex dropout: nothing to compare against there.
    "native_dropout": [
        S(T(3, 4), 0.0, True, complex_ok=False),
        S(T(3, 4), 1.0, True, complex_ok=False),
        S(T(3, 4), 0.5, False, complex_ok=False),
    ],
    "native_dropout_backward": [
        S(T(3, 4), T(3, 4, dtype=torch.bool), 2.0, complex_ok=False),
        S(T(3, 4), T(3, 4, dtype=torch.bool), 0.0, complex_ok=False),
    ],
    # ----- elementwise (part `elementwise`)
    "log10": unary(domain="positive"),
    "asinh": unary(),
    "atanh": unary(domain="unit"),
    "erfc": unary(complex_ok=False),
    "erfinv": unary(domain="unit", complex_ok=False),
    "lgamma": unary(domain="positive", complex_ok=False),
    "digamma": unary(domain="positive", complex_ok=False),
    "polygamma": [
        S(0, T(3, 4, domain="positive"), complex_ok=False),
        S(2, T(3, 4, domain="positive"), complex_ok=False),
    ],
    "mvlgamma": [
        S(T(3, 4, domain="positive"), 1, complex_ok=False),
        S(T(3, 4, domain="positive"), 2, complex_ok=False),
    ],
    "logit": [
        S(T(3, 4, domain="unit"), 0.1, complex_ok=False),
        S(T(3, 4, domain="positive"), 0.25, complex_ok=False),
        S(torch.tensor([0.2, 0.5, 0.7], dtype=torch.float64), complex_ok=False),
    ],
    "sinc": unary(),
    "i0": unary(complex_ok=False),
    "special_i0e": unary(complex_ok=False),
    "special_i1": unary(complex_ok=False),
    "special_i1e": unary(complex_ok=False),
    "special_ndtr": unary(complex_ok=False),
    "special_log_ndtr": unary(complex_ok=False),
    "special_erfcx": unary(complex_ok=False),
    "special_entr": unary(domain="positive", complex_ok=False),
    "sgn": unary(domain="nonzero"),
    "angle": unary(domain="nonzero"),
    "sign": unary(complex_ok=False),
    "ceil": unary(complex_ok=False),
    "floor": unary(complex_ok=False),
    "trunc": unary(complex_ok=False),
    "round": unary(complex_ok=False),
    "round.decimals": [S(T(3, 4), decimals=2, complex_ok=False)],
    "frac": unary(complex_ok=False),
    "deg2rad": unary(complex_ok=False),
    "rad2deg": unary(complex_ok=False),
    "nan_to_num": [
        S(T(3, 4), complex_ok=False),
        S(
            torch.tensor(
                [float("nan"), float("inf"), -float("inf"), 1.5], dtype=torch.float64
            ),
            complex_ok=False,
        ),
        S(T(3, 4), 0.5, 2.0, -2.0, complex_ok=False),
    ],
    "frexp.Tensor": unary(complex_ok=False),
    "hardswish": unary(complex_ok=False),
    "hardsigmoid": unary(complex_ok=False),
    "hardtanh": [
        S(T(3, 4, domain="nonzero"), complex_ok=False),
        S(T(3, 4, domain="distinct"), -0.5, 0.5, complex_ok=False),
    ],
    "leaky_relu": [
        S(T(3, 4, domain="nonzero"), complex_ok=False),
        S(T(3, 4, domain="nonzero"), 0.2, complex_ok=False),
    ],
    "elu": [
        S(T(3, 4, domain="nonzero"), complex_ok=False),
        S(T(3, 4, domain="nonzero"), 0.5, 1.5, 2, complex_ok=False),
    ],
    "celu": [
        S(T(3, 4, domain="nonzero"), complex_ok=False),
        S(T(3, 4, domain="nonzero"), 2.5, complex_ok=False),
    ],
    "silu": unary(complex_ok=False),
    "mish": unary(complex_ok=False),
    "gelu": [
        S(T(3, 4), complex_ok=False),
        S(T(3, 4), approximate="tanh", complex_ok=False),
    ],
    "softplus": [S(T(3, 4), complex_ok=False), S(T(3, 4), 2, 1, complex_ok=False)],
    "threshold": [S(T(3, 4, domain="nonzero"), 0.0, 2.5, complex_ok=False)],
    "softshrink": [
        S(T(3, 4, domain="distinct"), complex_ok=False),
        S(T(3, 4, domain="distinct"), 0.3, complex_ok=False),
    ],
    "hardshrink": [
        S(T(3, 4, domain="distinct"), complex_ok=False),
        S(T(3, 4, domain="distinct"), 0.3, complex_ok=False),
    ],
    # Not the empty sample: it cannot show the buffer's tangent (DIFFERS_FROM_NATIVE).
    "log_sigmoid_forward": unary(complex_ok=False)[:2],
    "_prelu_kernel": [
        S(T(3, 4, domain="nonzero"), T(4), complex_ok=False),
        S(T(2, 3, 4, domain="nonzero"), T(3, 1), complex_ok=False),
    ],
    "clamp_min": [S(T(3, 4, domain="distinct"), 0.1, complex_ok=False)],
    "clamp_max": [S(T(3, 4, domain="distinct"), 0.1, complex_ok=False)],
    "clamp_min.Tensor": binary(complex_ok=False),
    "clamp_max.Tensor": binary(complex_ok=False),
    "copysign.Tensor": binary(domain="nonzero", other="nonzero", complex_ok=False),
    "copysign.Scalar": [
        S(T(3, 4, domain="nonzero"), -1.5, complex_ok=False),
        S(T(3, domain="nonzero"), 2.0, complex_ok=False),
    ],
    "fmod.Tensor": binary(other="positive", complex_ok=False),
    "fmod.Scalar": [S(T(3, 4), 0.7, complex_ok=False)],
    "remainder.Tensor": binary(other="positive", complex_ok=False),
    "remainder.Scalar": [S(T(3, 4), 0.7, complex_ok=False)],
    "div.Tensor_mode": [
        S(T(3, 4), T(3, 4, domain="nonzero"), rounding_mode=None),
        S(T(3, 4), T(4, domain="nonzero"), rounding_mode="trunc", complex_ok=False),
        S(T(3, 1), T(4, domain="nonzero"), rounding_mode="floor", complex_ok=False),
    ],
    "div.Scalar_mode": [
        S(T(3, 4), 2.5, rounding_mode=None),
        S(T(3, 4), 2.5, rounding_mode="floor", complex_ok=False),
    ],
    "fmax": binary(complex_ok=False),
    "fmin": binary(complex_ok=False),
    "hypot": binary(domain="nonzero", other="nonzero", complex_ok=False),
    "logaddexp": binary(),
    "logaddexp2": binary(complex_ok=False),
    "ldexp.Tensor": [
        S(T(3, 4), torch.tensor([1, 2, 3, 0])),
        S(T(3, 4), T(4)),
    ],
    "xlogy.Tensor": binary(other="positive", complex_ok=False),
    "xlogy.Scalar_Self": [S(2.5, T(3, 4, domain="positive"), complex_ok=False)],
    "xlogy.Scalar_Other": [S(T(3, 4), 2.5, complex_ok=False)],
    "special_xlog1py": binary(other="positive", complex_ok=False),
    "special_xlog1py.self_scalar": [
        S(2.5, T(3, 4, domain="positive"), complex_ok=False)
    ],
    "special_xlog1py.other_scalar": [S(T(3, 4), 1.5, complex_ok=False)],
    "clamp.Tensor": [
        S(
            T(3, 4, domain="distinct"),
            T(3, 4, domain="unit"),
            T(4, domain="positive"),
            complex_ok=False,
        ),
        S(T(3, 4, domain="distinct"), T(4, domain="unit"), complex_ok=False),
        S(T(3, 4, domain="distinct"), None, T(3, 1, domain="unit"), complex_ok=False),
        S(T(3, 4), T(3, 4), T(3, 4), complex_ok=False),
    ],
    "lerp.Scalar": [S(T(3, 4), T(3, 4), 0.3), S(T(3, 4), T(4), 0.8)],
    "lerp.Tensor": [S(T(3, 4), T(3, 4), T(3, 4)), S(T(3, 1), T(4), T(3, 4))],
    "addcmul": [S(T(3, 4), T(3, 4), T(3, 4)), S(T(4), T(3, 1), T(3, 4), value=-0.5)],
    "addcdiv": [
        S(T(3, 4), T(3, 4), T(3, 4, domain="nonzero")),
        S(T(4), T(3, 1), T(3, 4, domain="nonzero"), value=-0.5),
    ],
    "nextafter": binary(complex_ok=False),
    "rrelu_with_noise": [S(T(3, 4, domain="nonzero"), T(3, 4), complex_ok=False)],
    "complex": [
        S(T(3, 4), T(3, 4), complex_ok=False),
        S(T(3, 1), T(4), complex_ok=False),
    ],
    "polar": [
        S(T(3, 4, domain="positive"), T(3, 4), complex_ok=False),
        S(T(4, domain="positive"), T(3, 1), complex_ok=False),
    ],
    # torch implements no derivative for these in-place variants (its own spec marks
    # them not_implemented), so the kernel tests have no reference; validate's
    # gradcheck covers them.
    "asinh_": [S(T(3, 4), real_ok=False, complex_ok=False)],
    "atanh_": [S(T(3, 4), real_ok=False, complex_ok=False)],
    "rrelu_with_noise_": [S(T(3, 4), T(3, 4), real_ok=False, complex_ok=False)],
    # ----- views (part `views`)
    "diagonal": [S(T(3, 4)), S(T(3, 4, 2), 1, 2, 0), S(T(4, 3), -2)],
    "squeeze.dims": [S(T(3, 1, 4, 1), [1, 3]), S(T(3, 1, 4), [0, -2])],
    "unfold": [S(T(3, 7), 1, 3, 2), S(T(5, 2), 0, 2, 1)],
    "narrow": [S(T(5, 4), 0, 1, 3), S(T(5, 4), 1, -3, 2)],
    "split.Tensor": [S(T(5, 4), 2), S(T(3, 4), 3, 1)],
    "split_with_sizes": [S(T(5, 4), [2, 3]), S(T(3, 4), [1, 0, 3], 1)],
    "unbind.int": [S(T(3, 4)), S(T(3, 4), 1)],
    "unsafe_split.Tensor": [S(T(5, 4), 2), S(T(3, 4), 3, 1)],
    "unsafe_split_with_sizes": [S(T(5, 4), [2, 3]), S(T(3, 4), [1, 0, 3], 1)],
    "split_with_sizes_copy": [S(T(5, 4), [2, 3]), S(T(3, 4), [1, 0, 3], 1)],
    "unbind_copy.int": [S(T(3, 4)), S(T(3, 4), 1)],
    "alias_copy": [S(T(3, 4)), S(T())],
    "view_copy": [S(T(3, 4), [4, 3]), S(T(2, 3, 2), [-1])],
    "t_copy": [S(T(3, 4)), S(T(3))],
    "transpose_copy.int": [S(T(2, 3, 4), 0, 2)],
    "permute_copy": [S(T(2, 3, 4), [2, 0, 1])],
    "unsqueeze_copy": [S(T(3, 4), 1), S(T(3, 4), -1)],
    "squeeze_copy": [S(T(3, 1, 4)), S(T(1, 1))],
    "squeeze_copy.dim": [S(T(3, 1, 4), 1), S(T(3, 4), 0)],
    "squeeze_copy.dims": [S(T(3, 1, 4, 1), [1, 3])],
    "unfold_copy": [S(T(3, 7), 1, 3, 2)],
    "narrow_copy": [S(T(5, 4), 0, 1, 3)],
    "diagonal_copy": [S(T(3, 4)), S(T(3, 4, 2), 1, 2, 0)],
    "expand_copy": [S(T(3, 1), [3, 4]), S(T(3, 1), [2, 3, 4])],
    # native autograd has no complex support for select_copy / slice_copy
    "select_copy.int": [
        S(T(5, 4), 0, 2, complex_ok=False),
        S(T(5, 4), 1, -1, complex_ok=False),
    ],
    "slice_copy.Tensor": [
        S(T(5, 4), 0, 1, 4, complex_ok=False),
        S(T(5, 6), 1, None, None, 2, complex_ok=False),
    ],
    "as_strided_copy": [S(T(3, 4), [2, 2], [1, 2], 1)],
    "constant_pad_nd": [S(T(3, 4), [1, 2], 1.5), S(T(3, 4), [1, -1, 0, 2])],
    "diag_embed": [S(T(3, 4)), S(T(2, 3), 1, 0, 2), S(T(3), -1)],
    "roll": [S(T(3, 4), [1], [1]), S(T(3, 4), [2, -1], [0, 1]), S(T(3, 4), [5])],
    "flip": [S(T(3, 4), [0]), S(T(3, 4), [0, 1])],
    "rot90": [S(T(3, 4)), S(T(3, 4, 2), 2, [2, 0]), S(T(3, 4), -1)],
    "repeat": [S(T(3, 4), [2, 3]), S(T(3, 4), [2, 1, 2]), S(T(), [])],
    "tril": [S(T(3, 4)), S(T(2, 3, 4), -1)],
    "triu": [S(T(3, 4)), S(T(2, 3, 4), 1)],
    "pixel_shuffle": [S(T(2, 8, 2, 3), 2)],
    "pixel_unshuffle": [S(T(2, 2, 4, 6), 2)],
    "channel_shuffle": [S(T(2, 6, 3), 2)],
    "reflection_pad1d": [S(T(2, 5), [2, 1])],
    "reflection_pad2d": [S(T(2, 4, 5), [2, 1, 0, 3])],
    "reflection_pad3d": [S(T(2, 3, 4, 5), [2, 1, 0, 2, 1, 1])],
    "replication_pad1d": [S(T(2, 5), [2, 1])],
    "replication_pad2d": [S(T(2, 4, 5), [2, 1, 0, 3])],
    "replication_pad3d": [S(T(2, 3, 4, 5), [2, 1, 0, 2, 1, 1])],
    "masked_fill.Scalar": [
        S(T(3, 4), T(3, 4, dtype=torch.bool), 1.5),
        S(T(3, 4), T(4, dtype=torch.bool), -2),
        S(T(3, 1), T(3, 4, dtype=torch.bool), 0.5),
    ],
    "masked_fill.Tensor": [
        S(T(3, 4), T(3, 4, dtype=torch.bool), T()),
        S(T(3, 1), T(3, 4, dtype=torch.bool), T()),
    ],
    "masked_select": [
        S(T(3, 4), T(3, 4, dtype=torch.bool)),
        S(T(3, 4), T(4, dtype=torch.bool)),
        S(T(4), T(3, 4, dtype=torch.bool)),
    ],
    "masked_scatter_backward": [
        S(T(3, 4), T(3, 4, dtype=torch.bool), [3, 5]),
        S(T(3, 4), T(4, dtype=torch.bool), [2, 7]),
    ],
    "masked_scatter": [
        S(T(3, 4), T(3, 4, dtype=torch.bool), T(3, 4)),
        S(T(3, 4), T(4, dtype=torch.bool), T(2, 7)),
        S(T(4), T(3, 4, dtype=torch.bool), T(13)),
    ],
    "index.Tensor": [
        S(T(3, 4), [T(3, 4, dtype=torch.bool)]),
        S(T(3, 4), [torch.tensor([0, 2, 2])]),
        S(T(3, 4), [None, torch.tensor([[1, 3], [0, 0]])]),
    ],
    "index_put": [
        S(T(3, 4), [T(3, 4, dtype=torch.bool)], T()),
        S(T(3, 4), [torch.tensor([0, 2, 2])], T(4), True),
        S(T(3, 4), [torch.tensor([0, 2])], T(2, 4)),
        S(T(3, 4), [None, torch.tensor([1, 3])], T(3, 1)),
    ],
    "transpose_": [S(T(2, 3, 4), 0, 2)],
    # native autograd has no complex support for select_scatter / slice_scatter
    "select_scatter": [
        S(T(3, 4), T(4), 0, 1, complex_ok=False),
        S(T(3, 4), T(3), 1, -1, complex_ok=False),
    ],
    "slice_scatter": [
        S(T(5, 4), T(2, 4), 0, 1, 4, 2, complex_ok=False),
        S(T(5, 4), T(5, 3), 1, -3, complex_ok=False),
    ],
    "diagonal_scatter": [S(T(3, 4), T(3)), S(T(3, 4, 2), T(4, 2), 1, 2, 0)],
    "fill.Scalar": [S(T(3, 4), 2.5)],
    "block_diag": [S([T(2, 3), T(1, 2)]), S([T(2, 3), T(3), T(), T(0, 2)])],
    # ----- reductions, scans, sorts (part: reductions)
    "linalg_vector_norm": [
        S(T(3, 4, domain="nonzero")),
        S(T(3, 4, domain="nonzero"), 1, [1], True),
        S(T(3, 4, domain="distinct"), float("inf"), [0]),
        S(T(3, 4, domain="nonzero"), 3, None),
        S(T(3, 4, domain="nonzero"), 0.5, [1]),
        S(T(domain="nonzero")),
    ],
    # 0-d only: native forward AD of norm.Scalar fails for inputs of 1+ dims
    # (tangent keeps the reduced dims: size [1, 1] for a [] output).
    "norm.Scalar": [S(T(domain="nonzero")), S(T(domain="nonzero"), 3)],
    "norm.ScalarOpt_dim": [
        S(T(3, 4, domain="nonzero"), 2, [1]),
        S(T(3, 4, domain="nonzero"), 1.5, [0], True),
    ],
    "dist": [S(T(3, 4), T(3, 4)), S(T(3, 4), T(4), 3)],
    "var.correction": [
        S(T(3, 4)),
        S(T(3, 4, 5), [1], correction=0, keepdim=True),
        S(T(3, 4), [0, 1], correction=2),
    ],
    "std.correction": [
        S(T(3, 4)),
        S(T(3, 4, 5), [1], correction=0, keepdim=True),
    ],
    "var_mean.correction": [
        S(T(3, 4)),
        S(T(3, 4, 5), [1], correction=0, keepdim=True),
    ],
    "std_mean.correction": [
        S(T(3, 4)),
        S(T(3, 4, 5), [1], correction=0, keepdim=True),
    ],
    "logsumexp": [S(T(3, 4), [1]), S(T(3, 4, 5), [0, 2], True)],
    "nansum": [
        S(T(3, 4), complex_ok=False),
        S(T(3, 4, 5), [1], True, complex_ok=False),
    ],
    "prod": [S(T(3, 4)), S(T()), S(T(0, 3))],
    "prod.dim_int": [S(T(3, 4), 1), S(T(3, 4, 5), 0, True)],
    "cumsum": [S(T(3, 4), 1), S(T(3, 4, 5), 0), S(T(3, 4), -1, dtype=torch.float32)],
    "cumprod": [S(T(3, 4), 1), S(T(3, 4, 5), 0)],
    "logcumsumexp": [S(T(3, 4), 1), S(T(3, 4, 5), 0)],
    "cummax": [
        S(T(3, 4, domain="distinct"), 1, complex_ok=False),
        S(T(3, 4, domain="distinct"), 0, complex_ok=False),
    ],
    "cummin": [
        S(T(3, 4, domain="distinct"), 1, complex_ok=False),
        S(T(3, 4, domain="distinct"), 0, complex_ok=False),
    ],
    "sort": [
        S(T(3, 4, domain="distinct"), complex_ok=False),
        S(T(3, 4, domain="distinct"), 0, True, complex_ok=False),
    ],
    "sort.stable": [
        S(T(3, 4, domain="distinct"), stable=True, complex_ok=False),
        S(
            T(3, 4, domain="distinct"),
            stable=False,
            dim=0,
            descending=True,
            complex_ok=False,
        ),
    ],
    "topk": [
        S(T(3, 4, domain="distinct"), 2, complex_ok=False),
        S(T(3, 4, domain="distinct"), 2, 0, False, complex_ok=False),
    ],
    "kthvalue": [
        S(T(3, 4, domain="distinct"), 2, complex_ok=False),
        S(T(3, 4, domain="distinct"), 3, 0, True, complex_ok=False),
    ],
    "mode": [
        S(T(3, 4, domain="distinct"), complex_ok=False),
        S(T(3, 4, domain="distinct"), 0, True, complex_ok=False),
    ],
    "median.dim": [
        S(T(3, 4, domain="distinct"), 1, complex_ok=False),
        S(T(3, 4, domain="distinct"), 0, True, complex_ok=False),
    ],
    "nanmedian.dim": [
        S(T(3, 4, domain="distinct"), 1, complex_ok=False),
        S(T(3, 4, domain="distinct"), 0, True, complex_ok=False),
    ],
    "median": [S(T(3, 4, domain="distinct"), complex_ok=False)],
    "nanmedian": [S(T(3, 4, domain="distinct"), complex_ok=False)],
    "max": [S(T(3, 4, domain="distinct"), complex_ok=False)],
    "min": [S(T(3, 4, domain="distinct"), complex_ok=False)],
    "aminmax": [
        S(T(3, 4, domain="distinct"), complex_ok=False),
        S(T(3, 4, domain="distinct"), dim=1, keepdim=True, complex_ok=False),
    ],
    "trace": [S(T(3, 3)), S(T(3, 4))],
    "renorm": [
        S(T(3, 4, domain="nonzero"), 2, 0, 0.5),
        S(T(3, 4, domain="nonzero"), 1, 1, 1.5),
    ],
    "vdot": [S(T(4), T(4))],
    "addmv": [
        S(T(3), T(3, 4), T(4), beta=0.5, alpha=2.0),
        S(T(), T(3, 4), T(4)),
    ],
    "addr": [
        S(T(3, 4), T(3), T(4), beta=0.5, alpha=2.0),
        S(T(4), T(3), T(4)),
    ],
    "baddbmm": [
        S(T(2, 3, 5), T(2, 3, 4), T(2, 4, 5), beta=0.5, alpha=2.0),
        S(T(5), T(2, 3, 4), T(2, 4, 5)),
    ],
    "addbmm": [
        S(T(3, 5), T(2, 3, 4), T(2, 4, 5), beta=0.5, alpha=2.0),
        S(T(3, 5), T(0, 3, 4), T(0, 4, 5)),
    ],
    # ----- views, integer-index entries (part `views`, views_indexing.yaml)
    "index_select": [
        S(T(4, 3), 0, torch.tensor([0, 2, 2])),
        S(T(4, 3), 1, torch.tensor([1])),
        S(T(), 0, torch.tensor([0])),
    ],
    "gather": [
        S(T(3, 4), 0, torch.tensor([[0, 2, 1, 2], [1, 0, 2, 2]])),
        S(T(4, 3), 1, torch.tensor([[0, 2, 1, 2], [1, 0, 2, 2]])),
    ],
    "take": [S(T(3, 4), torch.tensor([[0, 5], [11, 5]]))],
    "put": [
        S(T(3, 4), torch.tensor([[0, 5], [11, 7]]), T(2, 2)),
        S(T(3, 4), torch.tensor([0, 5, 5, 1]), T(4), True),
    ],
    "scatter.src": [
        S(T(3, 4), 0, torch.tensor([[0, 2, 1, 0], [1, 0, 2, 2]]), T(2, 4)),
    ],
    "scatter.value": [S(T(3, 4), 0, torch.tensor([[0, 2, 1, 0], [1, 0, 2, 2]]), 1.5)],
    "scatter_add": [
        S(T(3, 4), 0, torch.tensor([[0, 2, 1, 2], [1, 0, 2, 2]]), T(2, 4)),
        S(T(3, 4), 1, torch.tensor([[0, 2, 1, 2], [1, 0, 2, 2]]), T(2, 4)),
    ],
    "index_add": [
        S(T(4, 3), 0, torch.tensor([0, 2, 2]), T(3, 3), alpha=2),
        S(T(4, 3), 1, torch.tensor([1]), T(4, 1)),
    ],
    "scatter_reduce.two": [
        # torch's autograd has no complex scatter_reduce: real only here.
        S(
            T(3, 4),
            0,
            torch.tensor([[0, 2, 1, 2], [1, 0, 2, 2]]),
            T(2, 4),
            "sum",
            complex_ok=False,
        ),
        S(
            T(3, 4),
            0,
            torch.tensor([[0, 2, 1, 2], [1, 0, 2, 2]]),
            T(2, 4),
            "mean",
            complex_ok=False,
        ),
        S(
            T(3, 4, domain="distinct"),
            0,
            torch.tensor([[0, 2, 1, 2], [1, 0, 2, 2]]),
            T(2, 4, domain="distinct"),
            "amax",
            complex_ok=False,
        ),
        S(
            T(3, 4, domain="distinct"),
            1,
            torch.tensor([[0, 2], [1, 3], [2, 2]]),
            T(3, 2, domain="distinct"),
            "amin",
            include_self=False,
            complex_ok=False,
        ),
    ],
    "index_copy": [S(T(4, 3), 0, torch.tensor([3, 0]), T(2, 3))],
    "index_fill.int_Scalar": [S(T(4, 3), 0, torch.tensor([3, 0, 3]), 1.5)],
    "index_fill.int_Tensor": [S(T(4, 3), 1, torch.tensor([2, 0, 2]), T())],
    "_unsafe_masked_index": [
        S(
            T(4, 3),
            torch.tensor([[[True], [False]], [[True], [True]], [[False], [True]]]),
            [torch.tensor([[0, 3], [1, 3], [2, 2]]), None],
            0.5,
        ),
    ],
    "_unsafe_masked_index_put_accumulate": [
        S(
            T(4, 3),
            torch.tensor([[[True], [False]], [[True], [True]], [[False], [True]]]),
            [torch.tensor([[0, 3], [1, 3], [2, 2]]), None],
            T(3, 2, 3),
        ),
    ],
    # ----- nn ops with index inputs (class targets, indices, probabilities)
    "nll_loss_forward": [
        S(T(4, 5), torch.tensor([0, 2, 4, 1]), None, 1, -100, complex_ok=False),
        S(
            T(4, 5),
            torch.tensor([0, 2, 4, 2]),
            T(5, domain="positive"),
            0,
            2,
            complex_ok=False,
        ),
    ],
    "nll_loss2d_forward": [
        S(
            T(2, 3, 2, 2),
            torch.tensor([[[0, 1], [2, 0]], [[1, 1], [0, 2]]]),
            None,
            1,
            -100,
            complex_ok=False,
        ),
    ],
    "embedding": [
        S(T(5, 3), torch.tensor([[0, 2, 4, 1], [3, 3, 0, 1]]), complex_ok=False)
    ],
    "max_unpool2d": [
        S(T(1, 1, 2, 2), torch.tensor([[[[0, 5], [10, 15]]]]), [4, 4], complex_ok=False)
    ],
    "binary_cross_entropy": [
        S(T(3, 4, domain="prob"), T(3, 4, domain="prob"), complex_ok=False),
        S(
            T(3, 4, domain="prob"),
            T(3, 4, domain="prob"),
            T(3, 4, domain="positive"),
            0,
            complex_ok=False,
        ),
    ],
    # ----- element-wise ops with narrow domains
    "acosh": [
        S(T(3, 4, domain="above_one"), complex_ok=False),
        S(T(3, 4, domain="positive"), real_ok=False),
    ],
    "special_ndtri": [S(T(2, 2, domain="prob"), complex_ok=False)],
    # torch has no derivative for acosh_: validate's gradcheck covers it.
    "acosh_": [S(T(3, 4), real_ok=False, complex_ok=False)],
    # ----- fft (part: fft)
    "_fft_c2c": [
        S(T(3, 4), [1], 0, True, real_ok=False),
        S(T(3, 5), [0, 1], 1, False, real_ok=False),
        S(T(2, 3, 4), [2, 0], 2, True, real_ok=False),
        S(T(2, 3, 5), [1], 2, False, real_ok=False),
    ],
    "_fft_r2c": [
        S(T(3, 6), [1], 0, True, complex_ok=False),
        S(T(3, 5), [1], 1, True, complex_ok=False),
        S(T(3, 5), [0, 1], 2, False, complex_ok=False),
        S(T(2, 3, 5), [0, 2], 2, True, complex_ok=False),
        S(T(4, 3, 2), [1, 0], 1, True, complex_ok=False),
        S(T(3, 4), [1], 0, False, complex_ok=False),
    ],
    # input: the half spectrum, last_dim_size // 2 + 1 bins along dim[-1]
    "_fft_c2r": [
        S(T(3, 4), [1], 0, 6, real_ok=False),
        S(T(3, 4), [1], 1, 7, real_ok=False),
        S(T(2, 4, 3), [0, 2], 2, 4, real_ok=False),
        S(T(3, 4), [1, 0], 2, 5, real_ok=False),
        S(T(3, 2), [1], 0, 2, real_ok=False),
        S(T(3, 1), [1], 1, 1, real_ok=False),
    ],
    "unfold_backward": [
        S(T(3, 3, 3), [3, 7], 1, 3, 2),
        S(T(4, 2, 2), [5, 2], 0, 2, 1),
        S(T(3, 3, 2), [3, 8], 1, 2, 3),
        S(T(2, 4), [5], 0, 4, 1),
    ],
    # linalg1 (square matrices: T(3, 3) draws are invertible in practice; SPD and
    # triangular factors are literals, one real and one complex)
    "linalg_inv_ex": [S(T(3, 3)), S(T(2, 3, 3))],
    "_linalg_solve_ex": [
        S(T(3, 3), T(3, 2)),
        S(T(2, 3, 3), T(3, 2)),
        S(T(2, 3, 3), T(3)),
        S(T(2, 3, 3), T(2, 3)),
        S(T(3, 3), T(2, 3), left=False),
    ],
    "linalg_solve_triangular": [
        S(T(3, 3), T(3, 2), upper=True),
        S(T(2, 3, 3), T(3, 2), upper=False, unitriangular=True),
        S(T(3, 3), T(2, 3), upper=True, left=False),
    ],
    "triangular_solve": [
        S(T(3, 2), T(3, 3)),
        S(T(3, 4), T(2, 3, 3), True, True, True),
    ],
    "linalg_cholesky_ex": [
        S(
            torch.tensor(
                [[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]], dtype=torch.float64
            ),
            complex_ok=False,
        ),
        S(
            torch.tensor(
                [[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]], dtype=torch.float64
            ),
            upper=True,
            complex_ok=False,
        ),
        S(
            torch.tensor(
                [[4, 1 + 1j, 0.5j], [1 - 1j, 3, 0.2], [-0.5j, 0.2, 2]],
                dtype=torch.complex128,
            ),
            real_ok=False,
        ),
        S(
            torch.tensor(
                [[4, 1 + 1j, 0.5j], [1 - 1j, 3, 0.2], [-0.5j, 0.2, 2]],
                dtype=torch.complex128,
            ),
            upper=True,
            real_ok=False,
        ),
    ],
    "cholesky_solve": [
        S(
            T(3, 2),
            torch.tensor(
                [[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]], dtype=torch.float64
            ).tril(),
            complex_ok=False,
        ),
        S(
            T(3, 2),
            torch.tensor(
                [[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]], dtype=torch.float64
            ).triu(),
            True,
            complex_ok=False,
        ),
        S(
            T(3, 2),
            torch.tensor(
                [[4, 1 + 1j, 0.5j], [1 - 1j, 3, 0.2], [-0.5j, 0.2, 2]],
                dtype=torch.complex128,
            ).tril(),
            real_ok=False,
        ),
    ],
    "cholesky_inverse": [
        S(
            torch.tensor(
                [[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]], dtype=torch.float64
            ).tril(),
            complex_ok=False,
        ),
        S(
            torch.tensor(
                [[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]], dtype=torch.float64
            ).triu(),
            True,
            complex_ok=False,
        ),
        S(
            torch.tensor(
                [[4, 1 + 1j, 0.5j], [1 - 1j, 3, 0.2], [-0.5j, 0.2, 2]],
                dtype=torch.complex128,
            ).tril(),
            real_ok=False,
        ),
    ],
    "_linalg_det": [S(T(3, 3)), S(T(2, 3, 3))],
    "_linalg_slogdet": [S(T(3, 3)), S(T(2, 3, 3))],
    "linalg_lu_factor_ex": [S(T(3, 3)), S(T(2, 3, 4)), S(T(4, 3))],
    "linalg_lu": [S(T(3, 3)), S(T(2, 3, 4)), S(T(4, 3))],
    "lu_unpack": [
        S(T(3, 3), torch.tensor([2, 3, 3], dtype=torch.int32)),
        S(T(3, 4), torch.tensor([3, 2, 3], dtype=torch.int32)),
        S(T(4, 3), torch.tensor([4, 2, 3], dtype=torch.int32)),
    ],
    "linalg_lu_solve": [
        S(T(3, 3), torch.tensor([2, 3, 3], dtype=torch.int32), T(3, 2)),
        S(T(3, 3), torch.tensor([3, 2, 3], dtype=torch.int32), T(2, 3), left=False),
        S(T(3, 3), torch.tensor([1, 3, 3], dtype=torch.int32), T(3, 2), adjoint=True),
    ],
    "linalg_cross": [
        S(T(4, 3), T(4, 3)),
        S(T(1, 3), T(2, 3)),
        S(T(3, 1), T(3, 4), dim=0),
    ],
    "linalg_matrix_exp": [S(T(3, 3)), S(T(2, 3, 3))],
    "linalg_householder_product": [
        S(T(4, 3), T(2)),
        S(T(3, 3), T(3)),
        S(T(2, 4, 2), T(2, 2)),
    ],
    # ----- hvp_act: backward ops of activations and losses (real only: torch's CPU
    # kernels have no complex support, except silu_backward and rrelu in training)
    "elu_backward": [
        S(T(3, 4), 1.0, 1.0, 1.0, False, T(3, 4, domain="nonzero"), complex_ok=False),
        S(T(3, 4), 0.5, 1.5, 2.0, False, T(3, 4, domain="nonzero"), complex_ok=False),
        S(T(3, 4), 0.5, 1.5, 2.0, True, T(3, 4, domain="nonzero"), complex_ok=False),
    ],
    "log_sigmoid_backward": [
        S(T(3, 4), T(3, 4), T(3, 4, domain="positive"), complex_ok=False)
    ],
    "hardtanh_backward": [
        S(T(3, 4), T(3, 4, domain="distinct"), -1.0, 1.0, complex_ok=False),
        S(T(3, 4), T(3, 4, domain="distinct"), 0.0, 0.5, complex_ok=False),
    ],
    "softshrink_backward": [
        S(T(3, 4), T(3, 4, domain="distinct"), 0.5, complex_ok=False)
    ],
    "hardshrink_backward": [
        S(T(3, 4), T(3, 4, domain="distinct"), 0.5, complex_ok=False)
    ],
    "leaky_relu_backward": [
        S(T(3, 4), T(3, 4, domain="nonzero"), 0.01, False, complex_ok=False),
        S(T(3, 4), T(3, 4, domain="nonzero"), 0.2, True, complex_ok=False),
    ],
    "rrelu_with_noise_backward": [
        S(
            T(3, 4),
            T(3, 4, domain="nonzero"),
            T(3, 4, domain="positive"),
            0.125,
            0.3,
            False,
            False,
            complex_ok=False,
        ),
        S(
            T(3, 4),
            T(3, 4, domain="nonzero"),
            T(3, 4, domain="positive"),
            0.125,
            0.3,
            True,
            False,
            complex_ok=False,
        ),
    ],
    # torch has no derivatives of hardsigmoid_backward, silu_backward, mish_backward
    # (nor forward AD of huber_loss_backward) to compare with: `dualgen validate`
    # checks them against finite differences.
    "hardsigmoid_backward": [
        S(T(3, 4), T(3, 4, domain="distinct"), real_ok=False, complex_ok=False)
    ],
    "hardswish_backward": [S(T(3, 4), T(3, 4), complex_ok=False)],
    "softplus_backward": [
        S(T(3, 4), T(3, 4), 1.0, 20.0, complex_ok=False),
        S(T(3, 4), T(3, 4), 2.0, 1.0, complex_ok=False),
    ],
    "gelu_backward": [
        S(T(3, 4), T(3, 4), complex_ok=False),
        S(T(3, 4), T(3, 4), approximate="tanh", complex_ok=False),
    ],
    "silu_backward": [S(T(3, 4), T(3, 4), real_ok=False, complex_ok=False)],
    "mish_backward": [S(T(3, 4), T(3, 4), real_ok=False, complex_ok=False)],
    "glu_backward": [
        S(T(3, 2), T(3, 4), -1, complex_ok=False),
        S(T(2, 3), T(4, 3), 0, complex_ok=False),
    ],
    "_prelu_kernel_backward": [
        S(T(3, 4), T(3, 4, domain="nonzero"), T(4), complex_ok=False),
        S(T(2, 3, 4), T(2, 3, 4, domain="nonzero"), T(3, 1), complex_ok=False),
    ],
    "mse_loss_backward": [
        S(T(), T(3, 4), T(3, 4), 1, complex_ok=False),
        S(T(3, 4), T(3, 4), T(3, 4), 0, complex_ok=False),
        S(T(), T(3, 4), T(3, 4), 2, complex_ok=False),
    ],
    "smooth_l1_loss_backward": [
        S(T(), T(3, 4), T(3, 4), 1, 1.0, complex_ok=False),
        S(T(3, 4), T(3, 4), T(3, 4), 0, 0.5, complex_ok=False),
        S(T(), T(3, 4), T(3, 4), 2, 2.0, complex_ok=False),
    ],
    "huber_loss_backward": [
        S(T(), T(3, 4), T(3, 4), 1, 1.0, real_ok=False, complex_ok=False),
        S(T(3, 4), T(3, 4), T(3, 4), 0, 0.5, real_ok=False, complex_ok=False),
        S(T(), T(3, 4), T(3, 4), 2, 2.0, real_ok=False, complex_ok=False),
    ],
    "binary_cross_entropy_backward": [
        S(T(), T(3, 4, domain="prob"), T(3, 4, domain="prob"), complex_ok=False),
        S(
            T(3, 4),
            T(3, 4, domain="prob"),
            T(3, 4, domain="prob"),
            T(3, 4, domain="positive"),
            0,
            complex_ok=False,
        ),
        S(
            T(),
            T(3, 4, domain="prob"),
            T(3, 4, domain="prob"),
            T(4, domain="positive"),
            2,
            complex_ok=False,
        ),
    ],
    "nll_loss_backward": [
        # total_weight as nll_loss_forward computes it (torch's double backward
        # recomputes it from target and weight)
        S(
            T(),
            T(4, 5),
            torch.tensor([0, 2, 4, 1]),
            None,
            1,
            -100,
            torch.tensor(4.0, dtype=torch.float64),
            complex_ok=False,
        ),
        S(
            T(4),
            T(4, 5),
            torch.tensor([0, 2, 4, 2]),
            T(5, domain="positive"),
            0,
            2,
            T(domain="positive"),
            complex_ok=False,
        ),
        S(
            T(),
            T(4, 5),
            torch.tensor([0, 1, 4, 1]),
            T(5, domain="positive"),
            2,
            1,
            T(domain="positive"),
            complex_ok=False,
        ),
    ],
    "nll_loss2d_backward": [
        S(
            T(),
            T(2, 3, 2, 2),
            torch.tensor([[[0, 1], [2, 0]], [[1, 1], [0, 2]]]),
            None,
            1,
            -100,
            torch.tensor(8.0, dtype=torch.float64),
            complex_ok=False,
        ),
        S(
            T(2, 2, 2),
            T(2, 3, 2, 2),
            torch.tensor([[[0, 1], [2, 0]], [[1, 1], [0, 2]]]),
            T(3, domain="positive"),
            0,
            1,
            T(domain="positive"),
            complex_ok=False,
        ),
    ],
    # ----- linalg: decompositions, pseudo-inverse, least squares (part: linalg2)
    # Singular/eigen vectors: native autograd refuses cotangents that depend on
    # their phase (random complex ones do, and linalg_eig's vectors are always
    # complex), and it cannot differentiate _linalg_svd / _linalg_eigh called with
    # compute_uv / compute_v false; validate covers those through gauge-invariant
    # functions of the outputs, and the OpInfo sweep covers the tangents.
    "_linalg_svd": [
        S(T(4, 3), complex_ok=False),
        S(T(2, 3, 4), True, complex_ok=False),
        S(T(3, 5), False, complex_ok=False),
    ],
    "linalg_eig": [S(T(3, 3), real_ok=False, complex_ok=False)],
    "_linalg_eigh": [
        S(T(3, 3), complex_ok=False),
        S(T(2, 4, 4), "U", complex_ok=False),
    ],
    "linalg_qr": [S(T(4, 3)), S(T(2, 3, 5), "complete"), S(T(3, 3))],
    "linalg_pinv.atol_rtol_tensor": [S(T(4, 3)), S(T(2, 3, 5)), S(T(3, 3))],
    "linalg_lstsq": [
        S(T(5, 3), T(5, 2)),
        S(T(2, 4, 3), T(2, 4), driver="gels"),
        S(T(2, 5, 3), T(1, 5, 2), driver="gelsd"),
    ],
    # ----- nn2 (part `nn2`): real only where torch's CPU kernels have no complex support
    "_native_batch_norm_legit": [
        S(
            T(3, 2, 4),
            T(2),
            T(2),
            T(2),
            T(2, domain="positive"),
            True,
            0.1,
            1e-5,
            complex_ok=False,
        ),
        S(
            T(3, 2, 2, 2),
            None,
            T(2),
            T(2),
            T(2, domain="positive"),
            False,
            0.1,
            1e-5,
            complex_ok=False,
        ),
    ],
    "_native_batch_norm_legit.no_stats": [
        S(T(3, 2, 4), T(2), T(2), True, 0.1, 1e-5, complex_ok=False),
        S(T(4, 3), None, None, True, 0.1, 1e-5, complex_ok=False),
    ],
    "_native_batch_norm_legit_no_training": [
        S(
            T(3, 2, 2, 2),
            T(2),
            T(2),
            T(2),
            T(2, domain="positive"),
            0.1,
            1e-5,
            complex_ok=False,
        ),
    ],
    "_batch_norm_with_update": [
        S(
            T(3, 2, 4),
            T(2),
            T(2),
            T(2),
            T(2, domain="positive"),
            0.1,
            1e-5,
            complex_ok=False,
        ),
        # weight=None: torch's own backward fails (batch_norm_backward needs a weight)
        S(
            T(2, 3, 2, 2),
            T(3),
            None,
            T(3),
            T(3, domain="positive"),
            0.1,
            1e-5,
            complex_ok=False,
        ),
    ],
    "binary_cross_entropy_with_logits": [
        S(T(3, 4), T(3, 4, domain="prob"), complex_ok=False),
        S(
            T(3, 4),
            T(3, 4, domain="prob"),
            T(3, 4, domain="positive"),
            T(4, domain="positive"),
            0,
            complex_ok=False,
        ),
        S(
            T(3, 4),
            T(3, 4, domain="prob"),
            None,
            T(3, 4, domain="positive"),
            2,
            complex_ok=False,
        ),
    ],
    "im2col": [
        S(T(1, 2, 4, 5), [2, 3], [1, 1], [1, 0], [1, 2]),
        S(T(2, 4, 4), [2, 2], [2, 1], [1, 1], [1, 1]),
    ],
    "col2im": [
        S(T(1, 12, 10), [4, 5], [2, 3], [1, 1], [1, 0], [1, 2]),
        S(T(8, 16), [3, 3], [2, 2], [1, 1], [1, 1], [1, 1]),
    ],
    "_upsample_bilinear2d_aa": [
        S(T(2, 3, 4, 3), [7, 5], False, complex_ok=False),
        S(T(1, 2, 7, 6), [3, 2], True, complex_ok=False),
        S(T(1, 2, 6, 6), [3, 4], False, 0.5, 0.75, complex_ok=False),
    ],
    "_upsample_bilinear2d_aa.vec": [
        S(T(2, 3, 4, 3), [7, 5], False, None, complex_ok=False),
        S(T(1, 2, 7, 6), None, True, [0.5, 0.4], complex_ok=False),
    ],
    "fractional_max_pool2d": [
        S(
            T(2, 3, 7, 6, domain="distinct"),
            [2, 2],
            [3, 3],
            T(2, 3, 2, domain="prob"),
            complex_ok=False,
        ),
        S(
            T(2, 5, 5, domain="distinct"),
            [3, 2],
            [2, 4],
            T(1, 2, 2, domain="prob"),
            complex_ok=False,
        ),
    ],
    "fractional_max_pool3d": [
        S(
            T(1, 2, 5, 5, 4, domain="distinct"),
            [2, 2, 2],
            [3, 2, 2],
            T(1, 2, 3, domain="prob"),
            complex_ok=False,
        ),
    ],
    "max_pool2d_with_indices_backward": [
        S(
            T(1, 2, 2, 2),
            T(1, 2, 4, 4),
            [2, 2],
            [2, 2],
            [0, 0],
            [1, 1],
            False,
            torch.tensor([[[[0, 3], [9, 15]], [[5, 2], [13, 13]]]]),
            complex_ok=False,
        ),
    ],
    "max_unpool3d": [
        S(
            T(1, 2, 2, 1, 2),
            torch.tensor([[[[[0, 13]], [[40, 63]]], [[[7, 21]], [[33, 50]]]]]),
            [4, 4, 4],
            [2, 2, 2],
            [0, 0, 0],
            complex_ok=False,
        ),
    ],
    # torch's autograd refuses complex _trilinear
    "_trilinear": [
        S(T(2, 3), T(5, 3, 4), T(2, 4), [1, 3], [0], [1, 2], [2, 3], complex_ok=False),
        S(T(3, 2), T(3, 2), T(2), [], [], [0], [1], complex_ok=False),
    ],
    "_safe_softmax": [
        S(T(3, 4), 1, complex_ok=False),
        S(
            torch.tensor(
                [[0.5, -float("inf")], [-float("inf"), -float("inf")]],
                dtype=torch.float64,
            ),
            1,
            complex_ok=False,
        ),
    ],
    # random output: its tangent and gradient are zero whatever the draw
    "bernoulli": [S(T(3, 4, domain="prob"), complex_ok=False)],
    "bernoulli.p": [S(T(3, 4), 0.3, complex_ok=False)],
    # In-place random fills: self's tangent becomes zero.
    "uniform_": [S(T(3, 4), -1.0, 2.0), S(T())],
    "normal_": [S(T(3, 4), 1.0, 0.5), S(T())],
    "exponential_": [S(T(3, 4), 2.0, complex_ok=False)],
    "cauchy_": [S(T(3, 4), complex_ok=False)],
    "log_normal_": [S(T(3, 4), complex_ok=False)],
    "geometric_": [S(T(3, 4), 0.3, complex_ok=False)],
    "random_": [S(T(3, 4), complex_ok=False)],
    "random_.from": [S(T(3, 4), -3, 5, complex_ok=False)],
    "random_.to": [S(T(3, 4), 7, complex_ok=False)],
    "bernoulli_.float": [S(T(3, 4), 0.3, complex_ok=False)],
    "bernoulli.Tensor": [
        S(T(3, 4), T(3, 4, domain="prob"), complex_ok=False),
        S(T(3, 4), T(4, domain="prob"), complex_ok=False),
    ],
    # native's VJP is wrong for self: see NATIVE_WRONG (nn2_native_wrong.py)
    "as_strided_scatter": [
        S(T(3, 4), T(2, 2), [2, 2], [1, 2], 1),
        S(T(3, 4), T(3, 2), [3, 2], [4, 1]),
    ],
    "_batch_norm_no_update": [
        S(
            T(3, 2, 4),
            T(2),
            T(2),
            T(2),
            T(2, domain="positive"),
            0.1,
            1e-5,
            complex_ok=False,
        ),
        # weight=None: torch's own backward fails (batch_norm_backward needs a weight)
        S(
            T(2, 3, 2, 2),
            T(3),
            None,
            T(3),
            T(3, domain="positive"),
            0.1,
            1e-5,
            complex_ok=False,
        ),
    ],
    "_upsample_bilinear2d_aa_backward": [
        S(T(2, 3, 7, 5), [7, 5], [2, 3, 4, 3], False, complex_ok=False),
        S(T(1, 2, 3, 2), [3, 2], [1, 2, 7, 6], True, complex_ok=False),
    ],
    "max_pool3d_with_indices_backward": [
        S(
            T(1, 2, 2, 2, 1),
            T(1, 2, 4, 4, 3),
            [2, 2, 2],
            [2, 2, 2],
            [0, 0, 0],
            [1, 1, 1],
            False,
            torch.tensor([[[[[0], [5]], [[30], [30]]], [[[12], [7]], [[47], [20]]]]]),
            complex_ok=False,
        ),
    ],
    "fractional_max_pool2d_backward": [
        S(
            T(1, 2, 2, 2),
            T(1, 2, 4, 4),
            [2, 2],
            [2, 2],
            torch.tensor([[[[0, 3], [9, 15]], [[5, 2], [13, 13]]]]),
            complex_ok=False,
        ),
    ],
    "fractional_max_pool3d_backward": [
        S(
            T(1, 2, 2, 2, 1),
            T(1, 2, 4, 4, 3),
            [2, 2, 2],
            [2, 2, 1],
            torch.tensor([[[[[0], [5]], [[30], [30]]], [[[12], [7]], [[47], [20]]]]]),
            complex_ok=False,
        ),
    ],
    # nn backward ops (part hvp_nn). The norms' statistics are those of the input
    # (the backward formulas take them so), computed here from a fixed input.
    # Every output_mask is all True: the harness needs every output defined.
    "convolution_backward": [
        S(
            T(2, 6, 5),
            T(2, 4, 5),
            T(6, 2, 3),
            [6],
            [1],
            [1],
            [1],
            False,
            [0],
            2,
            [True, True, True],
            complex_ok=False,
        ),
        S(
            T(1, 3, 2, 3),
            T(1, 2, 4, 5),
            T(3, 2, 2, 3),
            [3],
            [2, 1],
            [0, 1],
            [1, 2],
            False,
            [0, 0],
            1,
            [True, True, True],
            complex_ok=False,
        ),
        S(
            T(2, 6, 5, 6),
            T(2, 4, 3, 3),
            T(4, 3, 2, 2),
            [6],
            [2, 2],
            [1, 0],
            [1, 1],
            True,
            [1, 0],
            2,
            [True, True, True],
            complex_ok=False,
        ),
    ],
    "avg_pool2d_backward": [
        S(
            T(2, 3, 2, 2),
            T(2, 3, 5, 5),
            [2, 2],
            [2, 2],
            [0, 0],
            False,
            True,
            None,
            complex_ok=False,
        ),
        S(
            T(3, 3, 7),
            T(3, 5, 6),
            [3, 2],
            [2, 1],
            [1, 1],
            True,
            False,
            None,
            complex_ok=False,
        ),
    ],
    "avg_pool3d_backward": [
        S(
            T(1, 2, 2, 2, 2),
            T(1, 2, 4, 4, 4),
            [2, 2, 2],
            [2, 2, 2],
            [0, 0, 0],
            False,
            True,
            None,
            complex_ok=False,
        ),
    ],
    "_adaptive_avg_pool2d_backward": [
        S(T(2, 3, 2, 3), T(2, 3, 5, 4), complex_ok=False)
    ],
    "_adaptive_avg_pool3d_backward": [
        S(T(2, 2, 2, 2, 3), T(2, 2, 4, 3, 5), complex_ok=False)
    ],
    "adaptive_max_pool2d_backward": [
        S(
            T(1, 2, 2, 2),
            T(1, 2, 4, 4),
            torch.tensor([[[[0, 3], [9, 14]], [[4, 6], [8, 15]]]]),
            complex_ok=False,
        ),
    ],
    "adaptive_max_pool3d_backward": [
        S(
            T(1, 1, 2, 1, 2),
            T(1, 1, 2, 2, 2),
            torch.tensor([[[[[0, 3]], [[5, 6]]]]]),
            complex_ok=False,
        ),
    ],
    "reflection_pad1d_backward": [S(T(2, 3, 8), T(2, 3, 5), [1, 2])],
    "reflection_pad2d_backward": [S(T(2, 3, 6, 7), T(2, 3, 4, 5), [1, 1, 2, 0])],
    "reflection_pad3d_backward": [
        S(T(1, 2, 5, 5, 6), T(1, 2, 3, 4, 4), [1, 1, 0, 1, 2, 0])
    ],
    "replication_pad1d_backward": [S(T(2, 3, 8), T(2, 3, 5), [1, 2])],
    "replication_pad2d_backward": [S(T(2, 3, 6, 7), T(2, 3, 4, 5), [1, 1, 2, 0])],
    "replication_pad3d_backward": [
        S(T(1, 2, 5, 5, 6), T(1, 2, 3, 4, 4), [1, 1, 0, 1, 2, 0])
    ],
    "upsample_nearest1d_backward": [S(T(2, 3, 7), [7], [2, 3, 4], complex_ok=False)],
    "upsample_nearest2d_backward": [
        S(T(2, 3, 7, 5), [7, 5], [2, 3, 4, 3], complex_ok=False)
    ],
    "upsample_nearest3d_backward": [
        S(T(1, 2, 3, 5, 4), [3, 5, 4], [1, 2, 2, 3, 2], complex_ok=False)
    ],
    "_upsample_nearest_exact1d_backward": [
        S(T(2, 3, 7), [7], [2, 3, 4], complex_ok=False)
    ],
    "_upsample_nearest_exact2d_backward": [
        S(T(2, 3, 7, 5), [7, 5], [2, 3, 4, 3], complex_ok=False)
    ],
    "_upsample_nearest_exact3d_backward": [
        S(T(1, 2, 3, 5, 4), [3, 5, 4], [1, 2, 2, 3, 2], complex_ok=False)
    ],
    "upsample_linear1d_backward": [
        S(T(2, 3, 7), [7], [2, 3, 4], False, complex_ok=False)
    ],
    "upsample_bilinear2d_backward": [
        S(T(2, 3, 7, 5), [7, 5], [2, 3, 4, 3], True, complex_ok=False)
    ],
    "upsample_bicubic2d_backward": [
        S(T(2, 3, 7, 5), [7, 5], [2, 3, 4, 3], False, complex_ok=False)
    ],
    "upsample_trilinear3d_backward": [
        S(T(1, 2, 3, 5, 4), [3, 5, 4], [1, 2, 2, 3, 2], False, complex_ok=False)
    ],
    "diagonal_backward": [S(T(3), [3, 4], 0, 0, 1), S(T(2, 2), [3, 2, 4], 1, 2, 0)],
    "embedding_dense_backward": [
        S(
            T(3, 4, 6),
            torch.tensor([[0, 2, 2, 4], [1, 0, 3, 3], [4, 4, 4, 0]]),
            5,
            -1,
            False,
            complex_ok=False,
        ),
        S(T(4, 6), torch.tensor([1, 2, 2, 0]), 5, 2, True, complex_ok=False),
    ],
    # Norm backward ops: the saved statistics are those of a fixed input, as the
    # formulas take them (moving with the input; their own tangents are ignored).
    "native_layer_norm_backward": [
        S(
            T(2, 3, 4),
            _LN_X,
            [4],
            *_statistics(_LN_X, (2,), keepdim=True, eps=1e-5),
            T(4),
            T(4),
            [True, True, True],
            complex_ok=False,
        ),
        S(
            T(2, 3, 4),
            _LN_X,
            [3, 4],
            *_statistics(_LN_X, (1, 2), keepdim=True, eps=0.0),
            None,
            None,
            [True, False, False],
            complex_ok=False,
        ),
    ],
    "native_batch_norm_backward": [
        S(
            T(3, 2, 4),
            _BN_X,
            T(2),
            None,
            None,
            *_statistics(_BN_X, (0, 2), keepdim=False, eps=1e-5),
            True,
            1e-5,
            [True, True, True],
            complex_ok=False,
        ),
        S(
            T(3, 2, 4),
            _BN_X,
            T(2),
            T(2),
            T(2, domain="positive"),
            None,
            None,
            False,
            1e-5,
            [True, True, True],
            complex_ok=False,
        ),
    ],
}


def samples_for(name: str, derived_from: str | None) -> list[Sample]:
    """Samples of an overload; derived in-place variants share their source's."""
    if name in SAMPLES:
        return SAMPLES[name]
    if derived_from is not None:
        return SAMPLES.get(derived_from, [])
    return []
