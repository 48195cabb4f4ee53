"""A truncated Taylor series as a tensor: `JetTensor` holds the normalised
coefficients c_0..c_d of x(t) = c_0 + c_1 t + ... + c_d t^d, and every aten op on
it is computed in truncated-polynomial arithmetic (`dualgen.taylor.arithmetic`).

A leaf module beside the `dualgen.taylor` package, not in it: the formula helpers
and custom Functions that only recognise a series import it without running the
package, whose arithmetic reaches the rules and the generated kernels.

A plain tensor among a jet's operands is a constant: its higher coefficients are
zero, exactly. A jet's degree says how far its coefficients are known; an op on
jets of several degrees knows its result to the lowest of them.
"""

from __future__ import annotations

import contextlib

import torch
from torch._functorch.pyfunctorch import (
    pop_dynamic_layer_stack,
    push_dynamic_layer_stack,
    temporarily_clear_interpreter_stack,
)


class JetTensor(torch.Tensor):
    """A tensor-valued truncated Taylor series, shaped and typed as its value c_0.
    A coefficient beyond c_0 may be None: zero, and costs nothing."""

    coefficients: tuple[torch.Tensor, ...]

    @staticmethod
    def __new__(cls, coefficients):
        value = coefficients[0]
        jet = torch.Tensor._make_wrapper_subclass(
            cls,
            value.shape,
            strides=_strides(value),
            dtype=value.dtype,
            device=value.device,
            layout=value.layout,
            requires_grad=False,
        )
        jet.coefficients = tuple(coefficients)
        return jet

    @property
    def degree(self) -> int:
        return len(self.coefficients) - 1

    def __repr__(self) -> str:
        return f"JetTensor(degree={self.degree}, value={self.coefficients[0]!r})"

    __torch_function__ = torch._C._disabled_torch_function_impl

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        # Dispatch reaches here with the keys above Python excluded (autograd,
        # conjugation, vmap): the arithmetic on the coefficients runs in the
        # caller's dispatch state instead, so that autograd records it, conj
        # views resolve and vmap batches it.
        include, exclude, layers = (
            _CALLER_KEYS[-1] if _CALLER_KEYS else (*_plain_keys(), None)
        )
        # functorch's transforms (vmap) as they were around the caller: its
        # layers popped for this call are pushed back while the coefficients,
        # which it batches, are computed.
        with (
            torch._C._ForceDispatchKeyGuard(include, exclude),
            _restored_layers(layers),
        ):
            return _ARITHMETIC[0](func, args, kwargs or {})


# The arithmetic on series (arithmetic.apply, which reads this module's helpers):
# set when `dualgen.taylor` imports it.
_ARITHMETIC: list = []


def use_arithmetic(apply) -> None:
    _ARITHMETIC[:] = [apply]


_LAYER_KEYS = torch._C.DispatchKeySet(
    torch._C.DispatchKey.FuncTorchDynamicLayerFrontMode
) | torch._C.DispatchKeySet(torch._C.DispatchKey.FuncTorchDynamicLayerBackMode)

# The dispatch keys of each `jet` call in progress (the innermost last).
_CALLER_KEYS: list = []


def _plain_keys():
    """Outside a `jet` call: nothing excluded but what the caller excludes."""
    return torch._C._dispatch_tls_local_include_set(), torch._C.DispatchKeySet()


@contextlib.contextmanager
def _restored_layers(layers):
    """The caller's functorch layers (innermost first) that are not on the
    stack now pushed back, for as long as the block runs."""
    missing = len(layers or ()) - torch._C._functorch.get_dynamic_layer_stack_depth()
    pushed = 0
    try:
        for layer in reversed(layers[:missing] if missing > 0 else []):
            push_dynamic_layer_stack(layer)
            pushed += 1
        yield
    finally:
        for _ in range(pushed):
            pop_dynamic_layer_stack()


def _functorch_layers() -> list:
    """The functorch layers now (innermost first), left in place."""
    with temporarily_clear_interpreter_stack() as layers:
        return layers


@contextlib.contextmanager
def callers_dispatch_keys():
    """Run the series' arithmetic in the dispatch state of this call's caller."""
    _CALLER_KEYS.append(
        (
            torch._C._dispatch_tls_local_include_set(),
            torch._C._dispatch_tls_local_exclude_set(),
            _functorch_layers(),
        )
    )
    try:
        yield
    finally:
        _CALLER_KEYS.pop()


def _strides(value: torch.Tensor):
    try:
        return value.stride()
    except RuntimeError:  # a tensor without strides (vmap's batched tensors)
        return None


def series(coefficients) -> torch.Tensor:
    """The series of these coefficients: a plain tensor for degree 0."""
    coefficients = tuple(coefficients)
    return coefficients[0] if len(coefficients) == 1 else JetTensor(coefficients)


def degree_of(value) -> int | None:
    """A jet's degree; None for a constant."""
    return value.degree if isinstance(value, JetTensor) else None


def coefficient(value, k: int):
    """Coefficient k of a series, None where it is zero (a constant's beyond 0)."""
    if isinstance(value, JetTensor):
        return value.coefficients[k]
    return value if k == 0 else None


def truncated(value, degree: int):
    """The series known to `degree` (a constant stays itself)."""
    if isinstance(value, JetTensor):
        return series(value.coefficients[: degree + 1])
    return value


def derivative(value, degree: int):
    """d/dt of the series, to `degree`; None for a constant (a zero tangent)."""
    if not isinstance(value, JetTensor):
        return None
    c = value.coefficients
    slopes = [_times(c[k], k) for k in range(1, degree + 2)]
    if all(x is None for x in slopes):
        return None
    if slopes[0] is None:  # coefficient 0 of a series is always a tensor
        slopes[0] = torch.zeros_like(value.coefficients[0])
    return series(slopes)


def _times(coefficient, k: int):
    if coefficient is None or k == 1:
        return coefficient
    return k * coefficient


def value_of(value):
    """Coefficient 0: the value at t = 0 (lists, tuples and dicts elementwise)."""
    if isinstance(value, (list, tuple)):
        return type(value)(value_of(v) for v in value)
    if isinstance(value, dict):  # keyword arguments
        return {k: value_of(v) for k, v in value.items()}
    return coefficient(value, 0) if isinstance(value, torch.Tensor) else value
