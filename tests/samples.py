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
    domain: str = "any"  # "any", "positive", "unit" (|x| < 1), "distinct"
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
    # torch asserts on _conj of a real tensor: complex only.
    "_conj": [S(T(3, 4), real_ok=False), S(T(), real_ok=False)],
    "resolve_conj": unary(),
    "conj_physical": unary(),
    "_conj_physical": unary(),
    "cat": [S([T(2, 3), T(4, 3)]), S([T(2, 3), T(2, 1)], 1), S([T(2, 3), T(0)])],
    "stack": [S([T(2, 3), T(2, 3)]), S([T(2, 3), T(2, 3), T(2, 3)], 1)],
    "copy_": [S(T(3, 4), T(3, 4)), S(T(3, 4), T(4))],
    "zero_": [S(T(3, 4))],
    "fill_.Scalar": [S(T(3, 4), 2.5)],
    "fill_.Tensor": [S(T(3, 4), T())],
    "_softmax": [
        S(T(3, 4), 1, False, complex_ok=False),
        S(T(3, 4), 0, False, complex_ok=False),
    ],
    "_log_softmax": [S(T(3, 4), 1, False, complex_ok=False)],
    "softmax.int": [S(T(3, 4), -1, complex_ok=False)],
    "log_softmax.int": [S(T(3, 4), 0, complex_ok=False)],
}


def samples_for(name: str, derived_from: str | None) -> list[Sample]:
    """Samples of an overload; derived in-place variants share their source's."""
    if name in SAMPLES:
        return SAMPLES[name]
    if derived_from is not None:
        return SAMPLES.get(derived_from, [])
    return []
