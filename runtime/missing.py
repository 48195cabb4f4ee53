"""What a user reads when an op with tangent inputs has no forward rule.

Native's error type (NotImplementedError) and key phrase ("Trying to use forward
AD with NAME that does not support it because ..."), which users and PyTorch's
tests match, followed by what native cannot say: the overload, where the user's
code called it, and the spec entry to add, as a stub to fill in.
"""

from __future__ import annotations

import os
import sys

import torch

from .operator_schema import SchemaSyntaxError, TypeKind, needs_value, parse_schema

_DIFFERENTIABLE_TYPES = ("Tensor", "Optional[Tensor]", "List[Tensor]")

# Frames inside these directories are not the user's call site.
_INTERNAL = tuple(
    os.path.dirname(module.__file__) + os.sep
    for module in (torch, sys.modules[__package__])
)


def qualified_name(func) -> str:
    """`aten::mul.Tensor`, `mylib::mysin` (with its namespace and overload)."""
    schema = func._schema
    if schema.overload_name:
        return f"{schema.name}.{schema.overload_name}"
    return schema.name


def kernel_error_note(func, origin: str) -> str:
    """The note an error raised by an op's JVP rule gets (under either kernel
    backend): the op and where its rule was written."""
    return f"while computing the tangent of {qualified_name(func)} ({origin})"


def _native_name(func, out: bool) -> str:
    """The name native's message uses: the C++ function's (`add_out`, `igamma`)."""
    base = func._schema.name.split("::", 1)[-1]
    return f"{base}_out" if out else base


def out_variant_message(func) -> str:
    return (
        f"Trying to use forward AD with {_native_name(func, out=True)} that does "
        f"not support it because it is an out= function ({qualified_name(func)}"
        f"{_called_at()}). Call its functional form instead: its result carries "
        f"tangents."
    )


def no_rule_message(func) -> str:
    if func._schema.name.startswith("aten::"):
        where = (
            "Add an entry to derivatives.yaml (or register one with "
            "dualgen.register_jvp)"
        )
    else:  # a custom op: its library's own spec (docs/custom_ops.md)
        where = (
            "Add an entry to your library's spec (a derivatives.yaml of its own, "
            "generated with `dualgen generate --import` and loaded with "
            "dualgen.load_kernels; see docs/custom_ops.md), or register one with "
            "dualgen.register_jvp"
        )
    return (
        f"Trying to use forward AD with {_native_name(func, out=False)} that does "
        f"not support it because it has not been implemented yet.\n"
        f"dualgen has no forward-mode (JVP) rule for {qualified_name(func)}"
        f"{_called_at()}. {where}:\n\n{spec_stub(func)}"
    )


def spec_stub(func) -> str:
    """The entry to write: the schema as the spec writes it (aten's bare, a custom
    op's with its namespace), a sample for `dualgen validate`, a backward formula to
    fill in per differentiable input, and the forward formula of each output."""
    schema = func._schema
    lines = [f"- name: {str(schema).removeprefix('aten::')}"]
    lines.append(f"  sample: {sample_stub(schema)}")
    inputs = [a.name for a in schema.arguments if str(a.type) in _DIFFERENTIABLE_TYPES]
    grad = "grad" if len(schema.returns) == 1 else "grads"
    lines += [f"  {name}: <gradient of {name}, from {grad}>" for name in inputs]
    tangents = ", ".join(f"{name}_t" for name in inputs)
    outputs = [r.name or "result" for r in schema.returns]
    if len(outputs) > 1:
        outputs = [r.name or f"result{i}" for i, r in enumerate(schema.returns)]
    lines += [f"  {name}: <tangent, from {tangents}>" for name in outputs]
    return "\n".join(lines)


def sample_stub(schema) -> str:
    """A `sample:` value: a 3x4 tensor for each tensor argument (a list of two for
    a Tensor[]), a placeholder naming the type of each other argument that
    `dualgen validate` cannot pick a value for (operator_schema.needs_value);
    the others take their defaults."""

    try:
        arguments = parse_schema(str(schema)).arguments
    except SchemaSyntaxError:  # a schema the spec could not name either
        return "<name=value, ...: the inputs dualgen validate runs the op on>"
    values = []
    for a in arguments:
        if a.kind is TypeKind.TENSOR:
            values.append(f"{a.name}=any(3, 4)")
        elif a.kind is TypeKind.TENSOR_LIST:
            values.append(f"{a.name}=[any(3, 4), any(3, 4)]")
        elif needs_value(a):
            values.append(f"{a.name}=<{a.type}>")
    return ", ".join(values)


def _called_at() -> str:
    """`, called at FILE:LINE`: the innermost frame outside torch and dualgen."""
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not filename.startswith(_INTERNAL) and not filename.startswith("<"):
            return f", called at {filename}:{frame.f_lineno}"
        frame = frame.f_back
    return ""
