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
- it views memory with strides nobody checked (`_reshape_alias`). (aten's
  `_unsafe_*` indexing operators are admitted: they skip checks of indices the
  forward operator has already checked, and the spec's derivatives of
  `_unsafe_masked_index` need them);
- it is no dispatcher operator (TorchScript's `aten::Int`, `to.prim_Device`, ...):
  there is no eager kernel to judge;
- it builds quantized, sparse or MKL-DNN tensors: outside what a derivative needs.

A `torch.*` function, a function of `torch.linalg` / `special` / `fft` /
`nn.functional`, or a Tensor method that is a C binding of an aten operator is
judged as that operator (`torch.cos` and `x.cos()` as `aten::cos`,
`torch.linalg.solve` as `aten::linalg_solve`): every overload a call can reach
(out= variants aside, since `out=` is refused anyway) must pass. Python functions
cannot be read that way (one may do more than its namesake operator:
`F.embedding` renormalises its weight in place, `F.fractional_max_pool2d` draws
random samples): those that are pure are on an explicit allowlist
(`PYTHON_FUNCTIONS`, `PYTHON_METHODS`); any other is refused.
"""

from __future__ import annotations

import functools
import inspect

import torch

# Python-level torch functions known to be pure tensor math: they compose aten
# operators that pass the rule above, and do nothing else (no random draws, no
# in-place updates of their arguments: not F.dropout*, F.rrelu, F.embedding,
# F.batch_norm, F.instance_norm, F.fractional_max_pool*, F.gumbel_softmax).
PYTHON_FUNCTIONS = frozenset(
    {
        # torch: shapes, dtypes and compositions of pure operators
        "atleast_1d",
        "atleast_2d",
        "atleast_3d",
        "block_diag",
        "broadcast_shapes",
        "broadcast_tensors",
        "cartesian_prod",
        "cdist",
        "chain_matmul",
        "einsum",
        "finfo",
        "iinfo",
        "is_tensor",
        "meshgrid",
        "norm",
        "split",
        "stft",
        "tensordot",
        "unique_consecutive",
        "unravel_index",
        # nn.functional: element-wise activations (their `inplace=` is refused)
        "nn.functional.celu",
        "nn.functional.elu",
        "nn.functional.glu",
        "nn.functional.hardsigmoid",
        "nn.functional.hardswish",
        "nn.functional.hardtanh",
        "nn.functional.leaky_relu",
        "nn.functional.mish",
        "nn.functional.relu",
        "nn.functional.relu6",
        "nn.functional.selu",
        "nn.functional.sigmoid",
        "nn.functional.silu",
        "nn.functional.softsign",
        "nn.functional.tanh",
        "nn.functional.tanhshrink",
        "nn.functional.threshold",
        # nn.functional: normalisations without running statistics, softmaxes
        "nn.functional.group_norm",
        "nn.functional.layer_norm",
        "nn.functional.local_response_norm",
        "nn.functional.log_softmax",
        "nn.functional.normalize",
        "nn.functional.rms_norm",
        "nn.functional.softmax",
        "nn.functional.softmin",
        # nn.functional: deterministic pooling, resampling, folding, padding
        "nn.functional.adaptive_avg_pool2d",
        "nn.functional.adaptive_avg_pool3d",
        "nn.functional.adaptive_max_pool1d",
        "nn.functional.adaptive_max_pool2d",
        "nn.functional.adaptive_max_pool3d",
        "nn.functional.affine_grid",
        "nn.functional.fold",
        "nn.functional.grid_sample",
        "nn.functional.interpolate",
        "nn.functional.lp_pool1d",
        "nn.functional.lp_pool2d",
        "nn.functional.max_pool1d",
        "nn.functional.max_pool2d",
        "nn.functional.max_pool3d",
        "nn.functional.pad",
        "nn.functional.unfold",
        # nn.functional: losses
        "nn.functional.binary_cross_entropy",
        "nn.functional.binary_cross_entropy_with_logits",
        "nn.functional.cross_entropy",
        "nn.functional.huber_loss",
        "nn.functional.kl_div",
        "nn.functional.l1_loss",
        "nn.functional.mse_loss",
        "nn.functional.nll_loss",
        "nn.functional.smooth_l1_loss",
        "nn.functional.soft_margin_loss",
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

# Parameters through which a torch function writes into a tensor: a formula may
# pass them neither by keyword nor by position.
MUTATING_PARAMETERS = frozenset({"out", "inplace"})


def mutating_position(path: str) -> tuple[int, str] | None:
    """(index, name) of the first parameter of `torch.<path>` that makes it write
    into a tensor when passed positionally, or None (C bindings take `out=` by
    keyword only)."""
    try:
        parameters = list(inspect.signature(_resolve(path)).parameters.values())
    except (TypeError, ValueError):
        return None
    for index, parameter in enumerate(parameters):
        if parameter.kind not in (
            parameter.POSITIONAL_ONLY,
            parameter.POSITIONAL_OR_KEYWORD,
        ):
            return None
        if parameter.name in MUTATING_PARAMETERS:
            return index, parameter.name
    return None


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
    if path in PYTHON_FUNCTIONS:
        return None
    name = _aten_name(parts)
    if name is not None and _has_eager_overload(name):
        why = _why_not_packet(name, None)
        if why is not None or _is_binding(path):
            return why  # (a Python function whose operator is refused: that says why)
    return (
        "is no aten operator and not on the allowlist of pure Python functions "
        "(tools/check/admissible.py), so it is not known to be pure tensor math"
    )


def why_not_method(name: str) -> str | None:
    """Why a formula may not call the Tensor method `name`, or None."""
    if name in PYTHON_METHODS:
        return None
    method = getattr(torch.Tensor, name, None)
    if _has_eager_overload(name):
        why = _why_not_packet(name, None)
        if why is not None or type(method).__name__ == "method_descriptor":
            return why
    return (
        "is no aten operator and not on the allowlist of pure Tensor methods "
        "(tools/check/admissible.py), so it is not known to be pure tensor math"
    )


def binding_operator(path: str) -> str | None:
    """The aten operator `torch.<path>` is a C binding of (`linalg.solve` ->
    `linalg_solve`), or None: a Python function, or a binding with no namesake
    operator."""
    name = _aten_name(path.split("."))
    if name is not None and _has_eager_overload(name) and _is_binding(path):
        return name
    return None


def method_operator(name: str) -> str | None:
    """The aten operator the Tensor method `name` is a C binding of, or None."""
    method = getattr(torch.Tensor, name, None)
    if _has_eager_overload(name) and type(method).__name__ == "method_descriptor":
        return name
    return None


def dispatcher_schemas(name: str) -> list:
    """The schemas of aten::`name`'s dispatcher overloads (those a Python
    binding of the operator can reach)."""
    packet = getattr(torch.ops.aten, name, None)
    if packet is None:
        return []
    schemas = [getattr(packet, o)._schema for o in packet.overloads()]
    return [s for s in schemas if _in_dispatcher(s)]


def is_c_binding(obj) -> bool:
    """Whether `obj` is a C function (no Python signature to read)."""
    return type(obj).__name__ in ("builtin_function_or_method", "method_descriptor")


def in_dispatcher(schema) -> bool:
    """Whether the schema is a dispatcher operator's (not TorchScript's)."""
    return _in_dispatcher(schema)


def resolve(path: str):
    """`torch.<path>` (None where a part is missing)."""
    return _resolve(path)


def _is_binding(path: str) -> bool:
    """Whether `torch.<path>` is a C binding of the operator of its name. A
    Python function of that name may do more than the operator (F.embedding
    renormalises its weight in place, fractional_max_pool2d draws its samples):
    it must be on the allowlist instead."""
    return type(_resolve(path)).__name__ == "builtin_function_or_method"


def _resolve(path: str):
    """`torch.<path>` (None where a part is missing)."""
    obj = torch
    for part in path.split("."):
        obj = getattr(obj, part, None)
    return obj


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
    if overload is None and not _has_eager_overload(name):
        return _TORCHSCRIPT
    for overload_name in names:
        op = getattr(packet, overload_name, None)
        if op is None:
            return None
        if overload is None and (
            _is_out_variant(op._schema) or not _in_dispatcher(op._schema)
        ):
            # Reached only through out= (refused anyway), or a TorchScript
            # overload on Python numbers (`exp.float`) no tensor call reaches.
            continue
        why = why_not_op(op)
        if why is not None:
            return why
    return None


def why_not_op(op: torch._ops.OpOverload) -> str | None:
    """Why an aten overload is not pure, deterministic tensor math, or None."""
    schema = op._schema
    name = schema.name.split("::", 1)[-1]
    arguments = schema.arguments
    if not _in_dispatcher(schema):
        return _TORCHSCRIPT
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
    if name.lstrip("_").startswith(("empty", "new_empty", "resize")):
        return "returns uninitialised memory (aten's empty* and resize* operators)"
    if name in _UNCHECKED:
        return "skips its bounds checks (it can read outside the tensor's memory)"
    if (
        torch.Tag.data_dependent_output in op.tags
        or any(str(r.type) == "Scalar" for r in schema.returns)
        or name in _VALUE_TO_NUMBER
    ):
        return "reads tensor values into a Python number (not tensor math)"
    if any(word in name for word in _QUANTIZED_OR_SPARSE) or any(
        "QScheme" in str(a.type) for a in arguments
    ):
        return (
            "builds quantized, sparse or MKL-DNN tensors (not what a derivative needs)"
        )
    return None


# Where schema and tags do not tell: views with unchecked strides, and a value
# read into a bool without the data_dependent_output tag.
_UNCHECKED = frozenset({"_reshape_alias"})
_VALUE_TO_NUMBER = frozenset({"is_nonzero"})


_TORCHSCRIPT = (
    "is a TorchScript operator, not one of the dispatcher's (no eager kernel to "
    "judge or run)"
)


@functools.cache
def _has_eager_overload(name: str) -> bool:
    """Whether aten has a dispatcher operator `name` (a torch function of the same
    name may be its binding); TorchScript's operators on Python values
    (`aten::Int`, `aten::device`) do not count."""
    packet = getattr(torch.ops.aten, name, None)
    return packet is not None and any(
        _in_dispatcher(getattr(packet, o)._schema) for o in packet.overloads()
    )


def _in_dispatcher(schema) -> bool:
    try:
        torch._C._dispatch_find_schema_or_throw(schema.name, schema.overload_name)
    except RuntimeError:
        return False
    return True


def _names_a_file(argument: str) -> bool:
    return any(word in argument for word in ("file", "path", "filename"))


def _is_out_variant(schema) -> bool:
    return any(a.is_out for a in schema.arguments)
