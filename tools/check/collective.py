"""Stage 2, build, for a collective's entry (`collective:` key): raw entry ->
CollectiveEntry.

A collective's JVP is not a formula: a linear collective's is the same
collective of the tangents, which the runtime sends in the same message as the
values. What the spec states is what the runtime cannot see from the schema:
which arguments are sent and received (torch.distributed's `c10d::` schemas do
not mark the tensors they write), which names the reduce kind, and how values
and tangents may share a message. Every name is checked against the schema.
"""

from __future__ import annotations

from ..spec.errors import ErrorSink
from ..spec.load import RawEntry, RawField, RawList, RawScalar
from ..spec.model import PACKINGS, CollectiveEntry, OperatorSchema
from ..spec.schema import SchemaProblem, TorchOperators, registered_schema

KEYS = (
    "name",
    "collective",
    "sends",
    "receives",
    "reduce",
    "root",
    "scatters",
    "returns",
)
_REDUCE_TYPES = ("__torch__.torch.classes.c10d.ReduceOp", "str")
_TENSOR_SUFFIXES = ("", "[]", "[][]")


class _Stop(Exception):
    pass


def build_collective(
    raw: RawEntry, ops: TorchOperators, sink: ErrorSink
) -> CollectiveEntry | None:
    builder = _Builder(raw, ops, sink)
    try:
        return builder.build()
    except _Stop:
        return None


class _Builder:
    def __init__(self, raw: RawEntry, ops: TorchOperators, sink: ErrorSink):
        self.raw, self.ops, self.sink = raw, ops, sink
        self.label = raw.name_text or "<entry>"

    def error(self, message: str, field: RawField | RawEntry) -> None:
        self.sink.report(message, field.location, self.label)
        raise _Stop

    def build(self) -> CollectiveEntry:
        schema = self._schema()
        self.label = schema.full_name
        self.arguments = {a.name: a for a in schema.arguments}
        for field in self.raw.fields:
            if field.key not in KEYS:
                self.error(
                    f"unknown key '{field.key}' in a collective's entry; "
                    f"allowed: {', '.join(KEYS)}",
                    field,
                )
        packing = self._scalar("collective")
        if packing not in PACKINGS:
            self.error(
                f"collective: '{packing}' is not one of {', '.join(PACKINGS)}",
                self.raw.get("collective"),
            )
        if packing in ("passes_through", "no_data"):
            extra = [f for f in self.raw.fields if f.key not in ("name", "collective")]
            if extra:
                self.error(
                    f"a '{packing}' collective takes no '{extra[0].key}'", extra[0]
                )
            return CollectiveEntry(schema, self.raw.location, packing)
        sends, receives = self._tensors("sends"), self._tensors("receives")
        returns_new = self._returns_new(schema)
        if not sends and not receives:
            self.error("a collective sends or receives something", self.raw)
        return CollectiveEntry(
            schema,
            self.raw.location,
            packing,
            sends,
            receives,
            self._argument("reduce", _REDUCE_TYPES),
            self._argument("root", ("int",)),
            self._flag("scatters"),
            returns_new,
        )

    def _schema(self) -> OperatorSchema:
        field = self.raw.get("name")
        if field is None or not isinstance(field.value, RawScalar):
            self.error("entry has no 'name:' schema string", field or self.raw)
        try:
            _, registered = registered_schema(field.value.text, self.ops)
        except SchemaProblem as problem:
            self.label = problem.label or self.label
            self.error(str(problem), field)
        return registered

    def _scalar(self, key: str) -> str | None:
        field = self.raw.get(key)
        if field is None:
            return None
        if not isinstance(field.value, RawScalar):
            self.error(f"'{key}' takes one value", field)
        return field.value.text

    def _tensors(self, key: str) -> tuple[str, ...]:
        field = self.raw.get(key)
        if field is None:
            return ()
        items = (
            field.value.items if isinstance(field.value, RawList) else (field.value,)
        )
        names = tuple(item.text for item in items)
        for name in names:
            argument = self.arguments.get(name)
            if argument is None:
                self.error(f"{key}: '{name}' is not an argument", field)
            if (
                argument.type.base != "Tensor"
                or argument.type.suffix not in _TENSOR_SUFFIXES
            ):
                self.error(
                    f"{key}: '{name}' is a {argument.type}, not a tensor or a list of them",
                    field,
                )
        return names

    def _argument(self, key: str, types: tuple[str, ...]) -> str | None:
        name = self._scalar(key)
        if name is None:
            return None
        argument = self.arguments.get(name)
        if argument is None:
            self.error(f"{key}: '{name}' is not an argument", self.raw.get(key))
        if str(argument.type) not in types:
            self.error(
                f"{key}: '{name}' is a {argument.type}, not a {' or '.join(types)}",
                self.raw.get(key),
            )
        return name

    def _flag(self, key: str) -> bool:
        field = self.raw.get(key)
        if field is None:
            return False
        if not isinstance(field.value, RawScalar) or field.value.kind != "bool":
            self.error(f"'{key}' takes true or false", field)
        return field.value.text.lower() == "true"

    def _returns_new(self, schema: OperatorSchema) -> bool:
        value = self._scalar("returns")
        if value is None:
            return False
        if value != "new":
            self.error(
                f"returns: '{value}': the only value is 'new'", self.raw.get("returns")
            )
        if not any(
            r.type.base == "Tensor" and r.type.alias is None for r in schema.returns
        ):
            self.error(
                "returns: new, but the schema returns no new tensor",
                self.raw.get("returns"),
            )
        return True
