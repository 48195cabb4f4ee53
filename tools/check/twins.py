"""The manifest of hand-written C++ twins: which helpers of `dualgen.formulas` have
C++ written by hand, with what signature, in which source.

Most helpers' C++ comes out of the generator (see `helpers`); the rest (loops over
factorizations and time steps, fused kernels) are written by hand in
runtime/csrc/dualgen/formulas/ and declared here, once, with a schema:

    - twin: gather_reduced(Tensor t, int dim, Tensor indices, bool keepdim) -> Tensor
      doc: The elements of `t` that a max/min over `dim` selected.
      source: reductions.cpp

From the declarations the generator writes the twins' C++ header and their Python
bindings (for parity tests), and the C++ printer knows which helpers it may call
and what they return. A formula calling a helper with no twin is an error at its
spec line; a twin's parity test is tests/cpp/test_twins_<source stem>.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..spec.errors import ErrorSink, Location, SpecErrors
from ..spec.load import RawEntry, RawScalar, known_fields, load_spec
from ..spec.model import OperatorSchema
from ..spec.schema import SchemaSyntaxError, parse_schema

FIELDS = ("twin", "doc", "source")


@dataclass(frozen=True)
class Twin:
    """One C++ overload of a helper."""

    schema: OperatorSchema
    doc: str
    source: str  # the hand-written file under csrc/dualgen/formulas/, or generated
    location: Location

    @property
    def name(self) -> str:
        return self.schema.name


@dataclass(frozen=True)
class Twins:
    """Every C++ overload of every helper, in manifest order."""

    overloads: tuple[Twin, ...]

    def of(self, name: str) -> tuple[Twin, ...]:
        return tuple(t for t in self.overloads if t.name == name)

    @property
    def names(self) -> frozenset[str]:
        return frozenset(t.name for t in self.overloads)

    def __add__(self, other: Twins) -> Twins:
        return Twins(self.overloads + other.overloads)


def manifest_path() -> Path:
    """twins.yaml beside the hand-written twins (shipped in the wheel with them)."""
    import dualgen

    return Path(dualgen.__file__).resolve().parent / "csrc/dualgen/formulas/twins.yaml"


def load_twins(path: Path, display: str | None = None) -> Twins:
    """The manifest at `path`; raise SpecErrors (`PATH:LINE: error: ...`)."""
    display = display or path.as_posix()
    sink = ErrorSink()
    raw = load_spec(path.read_bytes(), display, sink)
    overloads = []
    for entry in raw:
        twin = _twin(entry, path.parent, sink)
        if twin is not None:
            overloads.append(twin)
    seen: dict[str, Location] = {}
    for twin in overloads:
        key = str(twin.schema)
        if key in seen:
            sink.report(
                f"declared twice (first at line {seen[key].line})", twin.location
            )
        seen.setdefault(key, twin.location)
    if sink:
        raise SpecErrors(sink.sorted())
    return Twins(tuple(overloads))


def _twin(entry: RawEntry, folder: Path, sink: ErrorSink) -> Twin | None:
    fields = known_fields(entry, FIELDS, sink)
    if fields is None:
        return None
    values = {}
    for field in fields.values():
        if not isinstance(field.value, RawScalar):
            sink.report(f"{field.key} must be text", field.location)
            return None
        values[field.key] = field.value.text
    missing = [key for key in FIELDS if key not in values]
    if missing:
        sink.report(f"missing {', '.join(missing)}", entry.location)
        return None
    try:
        schema = parse_schema(values["twin"])
    except SchemaSyntaxError as exc:
        sink.report(f"bad twin signature: {exc}", entry.get("twin").location)
        return None
    if not (folder / values["source"]).is_file():
        sink.report(
            f"source {values['source']} does not exist", entry.get("source").location
        )
        return None
    return Twin(schema, values["doc"], values["source"], entry.location)


def basics(twins: Twins) -> frozenset[str]:
    """The hand-written helpers one-source helpers may call: those of basics.cpp
    (Python: dualgen.helper_basics, a leaf module), so imports run one way."""
    return frozenset(t.name for t in twins.overloads if t.source == "basics.cpp")
