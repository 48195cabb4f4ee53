"""Which torch callables a formula may call: pure, deterministic tensor math.

Formulas are code the runtime and `dualgen validate` execute, so what they call is
decided by what an operator *is*, read from its aten schema and tags, not from a
list of names someone thought of:

- it writes into an argument (the schema's alias annotations): it mutates;
- it is tagged `nondeterministic_seeded` or takes a `Generator`: it draws random
  numbers (and advances the global generator);
- it returns nothing: it exists for a side effect (printing, asserting, I/O);
- it takes a file name or path: it reads or writes files;
- it is one of aten's `empty*` factories or `resize*` operators: its value is
  (partly) uninitialised memory;
- it returns a Python number read from a tensor's values (`Scalar`, or tagged
  `data_dependent_output`): it leaves tensor math;
- it builds quantized, sparse or MKL-DNN tensors: outside what a derivative needs.

A `torch.*` function, a function of `torch.linalg` / `special` / `fft` /
`nn.functional`, or a Tensor method is judged as the aten operator it dispatches
to (`torch.cos` and `x.cos()` as `aten::cos`, `torch.linalg.solve` as
`aten::linalg_solve`): every overload a call can reach (out= variants aside,
since `out=` is refused anyway) must pass. Python functions with no operator of
their own cannot be read that way: those that are pure are on an explicit
allowlist (`PYTHON_FUNCTIONS`, `PYTHON_METHODS`); any other is refused.
"""

from __future__ import annotations

import functools

import torch

# Python-level torch functions (no aten operator of their name) known to be pure
# tensor math: they compose aten operators that pass the rule above. Names that
# have an aten operator are judged by it, never listed here.
PYTHON_FUNCTIONS = frozenset(
    {
        "finfo",  # a dtype's limits
        "iinfo",
        "is_tensor",
        "unravel_index",
        "nn.functional.normalize",
        "nn.functional.softmin",
    }
)
# Tensor methods with no aten operator of their name, known to be pure: dtype
# conversions (`.double()` is `.to(torch.float64)`), sizes, `lu`.
PYTHON_METHODS = frozenset(
    {
        "bfloat16",
        "bool",
        "cdouble",
        "cfloat",
        "double",
        "float",
        "half",
        "int",
        "long",
        "lu",
        "ndimension",
        "nelement",
    }
)

# The namespace a Python path maps to among aten's operator names.
_ATEN_PREFIX = {"linalg": "linalg_", "special": "special_", "fft": "fft_"}

_QUANTIZED_OR_SPARSE = ("quantiz", "sparse", "mkldnn", "_coo", "csr", "csc", "bsr")


def why_not(path: str) -> str | None:
    """Why a formula may not call `torch.<path>` (dotted, below `torch`), or None.

    `path` may name an aten operator (`ops.aten.cos`, `ops.aten.cos.default`), a
    torch function (`cos`, `linalg.solve`, `nn.functional.relu`)."""
    parts = path.split(".")
    if parts[:2] == ["ops", "aten"]:
        if len(parts) < 3:
            return None
        return _why_not_packet(parts[2], parts[3] if len(parts) > 3 else None)
    name = _aten_name(parts)
    if name is not None and hasattr(torch.ops.aten, name):
        return _why_not_packet(name, None)
    if path in PYTHON_FUNCTIONS:
        return None
    return (
        "is no aten operator and not on the allowlist of pure Python functions "
        "(tools/admissible.py), so it is not known to be pure tensor math"
    )


def why_not_method(name: str) -> str | None:
    """Why a formula may not call the Tensor method `name`, or None."""
    if hasattr(torch.ops.aten, name):
        return _why_not_packet(name, None)
    if name in PYTHON_METHODS:
        return None
    return (
        "is no aten operator and not on the allowlist of pure Tensor methods "
        "(tools/admissible.py), so it is not known to be pure tensor math"
    )


def _aten_name(parts: list[str]) -> str | None:
    if len(parts) == 1:
        return parts[0]
    if len(parts) == 2 and parts[0] in _ATEN_PREFIX:
        return _ATEN_PREFIX[parts[0]] + parts[1]
    if parts[:2] == ["nn", "functional"] and len(parts) == 3:
        return parts[2]
    return None


@functools.cache
def _why_not_packet(name: str, overload: str | None) -> str | None:
    packet = getattr(torch.ops.aten, name, None)
    if packet is None:
        return None  # the name check reports it (with a suggestion)
    names = [overload] if overload is not None else packet.overloads()
    for overload_name in names:
        op = getattr(packet, overload_name, None)
        if op is None:
            return None
        if overload is None and _is_out_variant(op._schema):
            continue  # reached only through out=, which is refused
        why = why_not_op(op)
        if why is not None:
            return why
    return None


def why_not_op(op: torch._ops.OpOverload) -> str | None:
    """Why an aten overload is not pure, deterministic tensor math, or None."""
    schema = op._schema
    name = schema.name.split("::", 1)[-1]
    arguments = schema.arguments
    if any(a.alias_info is not None and a.alias_info.is_write for a in arguments):
        return "mutates its arguments"
    if torch.Tag.nondeterministic_seeded in op.tags or any(
        "Generator" in str(a.type) for a in arguments
    ):
        return "draws random numbers (nondeterministic, advances the global generator)"
    if any(str(a.type) == "str" and _names_a_file(a.name) for a in arguments):
        return "reads or writes files"
    if not schema.returns:
        return "returns nothing: it exists for a side effect (printing, asserting, I/O)"
    if name.startswith(("empty", "new_empty", "_empty", "resize")):
        return "returns uninitialised memory (aten's empty* and resize* operators)"
    if torch.Tag.data_dependent_output in op.tags or any(
        str(r.type) == "Scalar" for r in schema.returns
    ):
        return "reads tensor values into a Python number (not tensor math)"
    if any(word in name for word in _QUANTIZED_OR_SPARSE) or any(
        "QScheme" in str(a.type) for a in arguments
    ):
        return (
            "builds quantized, sparse or MKL-DNN tensors (not what a derivative needs)"
        )
    return None


def _names_a_file(argument: str) -> bool:
    return any(word in argument for word in ("file", "path", "filename"))


def _is_out_variant(schema) -> bool:
    return any(a.is_out for a in schema.arguments)
