"""Aten schema text <-> OperatorSchema, and lookup of the operators torch registers.

`parse_schema` reads the schema notation (`add_.Tensor(Tensor(a!) self, ...) ->
Tensor(a!)`) into the model; `str()` on the result prints it back. `TorchOperators`
answers which overloads exist and their canonical schemas, with suggestions.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

from dualgen.operator_schema import SchemaSyntaxError, parse_schema

from .model import OperatorSchema


@dataclass(frozen=True)
class Lookup:
    schema: OperatorSchema | None
    suggestions: tuple[str, ...]


class TorchOperators:
    """The aten operators registered in the installed torch, by `name.overload`.

    Built once per process: the schema texts by key, an index of the overloads of
    each operator name, and each schema parsed at most once. The analysis asks for
    the overloads of every entry's in-place twin, and a scan of all ~2,500 keys per
    question was most of its time."""

    def __init__(self) -> None:
        self._parsed: dict[str, OperatorSchema] = {}

    @cached_property
    def release(self) -> tuple[int, int]:
        """(major, minor) of the installed torch."""
        import torch

        from dualgen.torch_support import release

        return release(torch.__version__)

    @cached_property
    def _schemas(self) -> dict[str, str]:
        import torch

        table = {}
        for s in torch._C._jit_get_all_schemas():
            if s.name.startswith("aten::"):
                key = s.name[len("aten::") :]
                if s.overload_name:
                    key += "." + s.overload_name
                table[key] = str(s)
        return table

    @cached_property
    def _by_name(self) -> dict[str, tuple[str, ...]]:
        """Operator name (no overload part) -> its keys, sorted."""
        index: dict[str, list[str]] = {}
        for key in sorted(self._schemas):
            index.setdefault(key.split(".")[0], []).append(key)
        return {name: tuple(keys) for name, keys in index.items()}

    def _table(self, full_name: str) -> dict[str, str]:
        """The schema texts of `full_name`'s namespace: aten's, or those of a
        custom op library (read when first asked: the modules that register them
        are imported before the spec is checked)."""
        namespace, sep, _ = full_name.partition("::")
        if not sep:
            return self._schemas
        table = self._foreign.get(namespace)
        if table is None:
            table = self._foreign[namespace] = _namespace_schemas(namespace)
        return table

    @cached_property
    def _foreign(self) -> dict[str, dict[str, str]]:
        return {}

    def _parse(self, key: str) -> OperatorSchema:
        schema = self._parsed.get(key)
        if schema is None:
            schema = self._parsed[key] = parse_schema(self._table(key)[key])
        return schema

    def lookup(self, full_name: str) -> Lookup:
        table = self._table(full_name)
        if full_name in table:
            return Lookup(self._parse(full_name), ())
        close = difflib.get_close_matches(full_name, table.keys(), n=3, cutoff=0.6)
        return Lookup(None, tuple(close))

    def has_namespace(self, namespace: str) -> bool:
        """Whether torch registers any operator in `namespace`."""
        return namespace == "aten" or bool(self._table(f"{namespace}::"))

    def exists(self, full_name: str) -> bool:
        return full_name in self._table(full_name)

    def schema(self, full_name: str) -> OperatorSchema | None:
        return self._parse(full_name) if self.exists(full_name) else None

    def all_names(self) -> list[str]:
        return sorted(self._schemas)

    def overloads(self, name: str) -> list[OperatorSchema]:
        """Every overload of `name` (no overload part): `pow_` gives pow_.Scalar, ...;
        `mylib::op` those of a custom op."""
        if "::" in name:
            table = self._table(name)
            keys = sorted(k for k in table if k.split(".")[0] == name)
            return [self._parse(key) for key in keys]
        return [self._parse(key) for key in self._by_name.get(name, ())]


def _namespace_schemas(namespace: str) -> dict[str, str]:
    """`ns::name.overload` (`ns::name` for the default overload) -> schema text, for
    the operators torch registers in `namespace`."""
    import torch

    prefix = f"{namespace}::"
    table = {}
    for s in torch._C._jit_get_all_schemas():
        if s.name.startswith(prefix):
            key = s.name + (f".{s.overload_name}" if s.overload_name else "")
            table[key] = str(s)
    return table


def describe_mismatch(written: OperatorSchema, real: OperatorSchema) -> str:
    """Say where a written schema differs from torch's, in one phrase."""
    for i, (w, r) in enumerate(zip(written.arguments, real.arguments)):
        if w != r:
            if str(w) == str(r):
                where = "keyword-only (after '*')" if r.kwarg_only else "positional"
                return f"argument {i + 1} '{r.name}' is {where} in torch"
            return f"argument {i + 1} is '{w}', torch has '{r}'"
    if len(written.arguments) != len(real.arguments):
        extra = (
            written.arguments[len(real.arguments) :]
            or real.arguments[len(written.arguments) :]
        )
        who = "the spec" if len(written.arguments) > len(real.arguments) else "torch"
        return f"{who} has the extra argument '{extra[0]}'"
    if written.returns != real.returns:
        return "the returns differ"
    return "the schemas differ"


def renamed(schema: OperatorSchema, renames: Mapping[str, str]) -> OperatorSchema:
    """`schema` with the arguments `renames` names under their other names."""
    arguments = tuple(
        dataclasses.replace(a, name=renames.get(a.name, a.name))
        for a in schema.arguments
    )
    return dataclasses.replace(schema, arguments=arguments)


class SchemaProblem(ValueError):
    """An entry's `name:` that is malformed, names no overload torch has, or
    differs from torch's schema; `label` is the name as written, once parsed."""

    def __init__(self, message: str, label: str | None):
        super().__init__(message)
        self.label = label


def registered_schema(
    text: str, ops: TorchOperators, renames: Mapping[str, str] | None = None
) -> tuple[OperatorSchema, OperatorSchema]:
    """(the schema as written, torch's): the checks every kind of entry shares.
    `renames` (the entry's `renamed_in_torch`): arguments some torch release
    names otherwise; where torch's names are those, the written schema stands for
    torch's (the generated code keeps the spec's names and passes arguments by
    position, so it is the same on every release)."""
    try:
        written = parse_schema(text)
    except SchemaSyntaxError as exc:
        raise SchemaProblem(f"malformed schema: {exc}", None) from None
    label = written.full_name
    lookup = ops.lookup(label)
    if lookup.schema is None:
        hint = (
            f"; did you mean '{lookup.suggestions[0]}'?" if lookup.suggestions else ""
        )
        if not ops.has_namespace(written.namespace):
            hint = (
                f"; nothing registers operators in '{written.namespace}': "
                f"pass --import with the module that defines them"
            )
        qualified = label if not written.is_aten else f"aten::{label}"
        raise SchemaProblem(f"torch has no operator overload {qualified}{hint}", label)
    if renames and written != lookup.schema == renamed(written, renames):
        return written, written
    if written != lookup.schema:
        raise SchemaProblem(
            f"schema does not match torch: {describe_mismatch(written, lookup.schema)} "
            f"(torch: {lookup.schema})",
            label,
        )
    return written, lookup.schema
