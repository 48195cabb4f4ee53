"""Probes of the installed torch, for the table of internals
(torch_internals.INTERNALS): each looks a private name, module, signature
detail or op up, never torch's version number, and says whether it is there."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable

import torch


def resolve(path: str):
    """The object at dotted `path` ('torch._C._functorch.is_batchedtensor'),
    importing submodules on the way as `from ... import` would; raises
    AttributeError or ImportError when it is not there."""
    parts = path.split(".")
    value = importlib.import_module(parts[0])
    for i, part in enumerate(parts[1:], 1):
        try:
            value = getattr(value, part)
        except AttributeError:
            if not inspect.ismodule(value):
                raise
            value = importlib.import_module(".".join(parts[: i + 1]))
    return value


def has(path: str) -> Callable[[], bool]:
    def probe() -> bool:
        try:
            resolve(path)
        except (AttributeError, ImportError):
            return False
        return True

    return probe


def parameter(path: str, name: str) -> Callable[[], bool]:
    """`path` is a callable with a parameter `name`."""

    def probe() -> bool:
        try:
            return name in inspect.signature(resolve(path)).parameters
        except (AttributeError, ImportError, TypeError, ValueError):
            return False

    return probe


def in_dict(path: str, name: str) -> Callable[[], bool]:
    """`name` is in the class's own `__dict__` (a C++ field's descriptor)."""

    def probe() -> bool:
        try:
            return name in vars(resolve(path))
        except (AttributeError, ImportError, TypeError):
            return False

    return probe


def all_of(*probes: Callable[[], bool]) -> Callable[[], bool]:
    return lambda: all(p() for p in probes)


def function_class_fields() -> bool:
    """A subclass of autograd.Function gets `_backward_cls` (its ctx class, a
    BackwardCFunction) and the ctx class `_forward_cls`."""

    class Probe(torch.autograd.Function):
        @staticmethod
        def forward(x):
            return x

    backward = getattr(Probe, "_backward_cls", None)
    return (
        isinstance(backward, type)
        and issubclass(backward, torch.autograd.function.BackwardCFunction)
        and getattr(backward, "_forward_cls", None) is Probe
    )


def storage_cdata() -> bool:
    return isinstance(getattr(torch.empty(0).untyped_storage(), "_cdata", None), int)


def distributed() -> bool:
    return torch.distributed.is_available()


def c10d(path: str) -> Callable[[], bool]:
    return lambda: distributed() and has(path)()


def op(namespace: str, name: str, overload: str) -> Callable[[], bool]:
    def probe() -> bool:
        try:
            getattr(getattr(getattr(torch.ops, namespace), name), overload)
        except (AttributeError, RuntimeError):
            return False
        return True

    return probe


def c10d_op(namespace: str, name: str, overload: str) -> Callable[[], bool]:
    return lambda: distributed() and op(namespace, name, overload)()


def jagged_fields() -> bool:
    """A jagged nested tensor keeps its values, offsets, lengths, ragged
    dimension and sequence-length bounds in these attributes (declared on the
    class: making one would import and log more than a probe should)."""
    declared = resolve(
        "torch.nested._internal.nested_tensor.NestedTensor"
    ).__annotations__
    return all(
        name in declared
        for name in (
            "_values",
            "_offsets",
            "_lengths",
            "_ragged_idx",
            "_metadata_cache",
        )
    )
