"""The record the generated registry holds for each operator overload."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property


@dataclass(frozen=True)
class KernelInfo:
    """Kernels and metadata of one operator overload (aten's, or a custom op's).

    `jvp(*primals, *tangents, *outputs)`: primals in schema order (tensors as
    `<name>_p`, other arguments as themselves), then the tangents of
    `differentiable_inputs` (None where absent), then the outputs. Returns the
    output tangent (a tuple for several outputs), None where there is none.
    `vjp(grad_or_grads, *arguments, *outputs)` returns the gradients of
    `differentiable_inputs`, in order.
    """

    name: str  # "mul.Tensor"
    kind: str  # "functional", "inplace", "view"
    jvp: Callable
    vjp_kernel: str  # the VJP kernel's name in the generated `vjp` module
    arguments: tuple[str, ...]
    outputs: tuple[str, ...]
    differentiable_inputs: tuple[str, ...]
    differentiable_outputs: tuple[str, ...]
    needs_original_self: bool = False  # in-place: the JVP reads self before the update
    jvp_uses_outputs: bool = False  # the JVP reads the op's outputs
    # The JVP is auto_element_wise (native's dtype rule for complex outputs:
    # dualgen.dtypes).
    element_wise_jvp: bool = False
    derived_from: str | None = (
        None  # in-place: the functional entry its formulas come from
    )

    # The C++ twin's name in the extension's registry ("aten::add.Tensor"); None
    # for kernels generated without one (a spec under test, a library's package
    # of custom-op kernels: docs/custom_ops.md).
    cpp_kernel: str | None = None

    @cached_property
    def vjp(self) -> Callable:
        """The VJP kernel, imported on first use: forward mode never needs the
        `vjp` module (the slowest generated file to load), the tape does."""
        package = self.jvp.__module__.rpartition(".")[0]
        return getattr(importlib.import_module(f"{package}.vjp"), self.vjp_kernel)


def has_overload(name: str, overload: str) -> bool:
    """Whether the installed torch has aten's `name.overload`: a generated registry
    registers the kernels of an entry of some torch releases only (its
    `torch_releases`) where it does, found by looking it up."""
    import torch

    try:
        packet = getattr(torch.ops.aten, name)
    except AttributeError:
        return False
    return overload in packet.overloads()
