"""One-source helpers: helpers/*.yaml -> checked helper definitions.

A helper that is tensor math is written once, in helpers/<family>.yaml, as a function body in the formula
vocabulary, with its schema (one per C++ overload; Python has one function):

    - helper: mean_tangent(Tensor self_t, Tensor self_p, int[]? dim, bool keepdim) -> Tensor
      doc: Tangent of mean over `dim` (None or [] for all).
      body: |
        return sum_reduced(self_t, self_p, dim, keepdim) / reduced_numel(self_p, dim)

A body is statements of five kinds: `name = expr`, `a, b = expr` (a call that
returns several tensors), `if`/`elif`/`else`, `for name in list:` (of ints or of
tensors), `return` and a call alone (a check, run for its error); every expression is a
formula (the same names, calls and sandbox as derivatives.yaml's). Both its
Python (generated/helpers.py, the body as written) and its C++ (generated/cpp/helpers.cpp) are printed
from it. One-way: a one-source helper calls torch and other one-source helpers,
never a hand-written one (those may call these).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from ..spec.errors import ErrorSink, Location, SpecErrors
from ..spec.load import RawEntry, RawList, RawScalar, known_fields, load_spec
from ..spec.model import OperatorSchema
from ..spec.schema import SchemaSyntaxError, parse_schema
from .formula import FormulaError, Scope, check_expression

FIELDS = ("helper", "overloads", "internal", "doc", "body")
SOURCE = "helpers"  # a folder beside the spec: one file of helpers per family


@dataclass(frozen=True)
class Helper:
    schemas: tuple[OperatorSchema, ...]  # the C++ overloads; the first names them
    doc: str
    body: tuple[ast.stmt, ...]
    text: str  # the body as written (comments and all), for the Python
    location: Location
    body_line: int  # the line of the body's first statement
    # A building block of other helpers (tested through them), not formula
    # vocabulary: not exported by dualgen.formulas.
    internal: bool = False

    @property
    def name(self) -> str:
        return self.schemas[0].name

    @property
    def parameters(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.schemas[0].arguments)


def sources_beside(spec_path: Path) -> list[Path]:
    """The helper files (helpers/*.yaml) beside the spec, in name order: a spec
    with a helpers/ folder (dualgen's own) writes their code."""
    return sorted((spec_path.parent / SOURCE).glob("*.yaml"))


def installed_sources() -> tuple[list[Path], Path]:
    """dualgen's own helper files, and the folder to show them from: the
    checkout's helpers/ beside tools/, or the copy a wheel carries in
    dualgen.generated. Another spec's formulas may call these helpers."""
    import dualgen.generated

    checkout = Path(__file__).resolve().parents[2]
    for root in (checkout, Path(dualgen.generated.__file__).resolve().parent):
        paths = sorted((root / SOURCE).glob("*.yaml"))
        if paths:
            return paths, root
    return [], checkout


def load_helpers(paths: list[Path], display_root: Path) -> tuple[Helper, ...]:
    """The helpers of `paths` (shown relative to `display_root`), parsed; raise
    SpecErrors. Their bodies are checked by `check_bodies` once every helper's
    Python exists (they call each other)."""
    sink = ErrorSink()
    helpers = []
    for path in paths:
        display = (display_root / SOURCE / path.name).as_posix()
        for entry in load_spec(path.read_bytes(), display, sink):
            helper = _helper(entry, sink)
            if helper is not None:
                helpers.append(helper)
    seen: dict[str, Location] = {}
    for helper in helpers:
        if helper.name in seen:
            sink.report(
                f"helper {helper.name} is defined twice (first at line "
                f"{seen[helper.name].line})",
                helper.location,
            )
        seen.setdefault(helper.name, helper.location)
    if sink:
        raise SpecErrors(sink.sorted())
    return tuple(helpers)


def _helper(entry: RawEntry, sink: ErrorSink) -> Helper | None:
    fields = known_fields(entry, FIELDS, sink)
    if fields is None:
        return None
    missing = [k for k in ("helper", "doc", "body") if k not in fields]
    if missing:
        sink.report(f"missing {', '.join(missing)}", entry.location)
        return None
    signatures = [fields["helper"].value]
    if "overloads" in fields:
        value = fields["overloads"].value
        signatures += list(value.items) if isinstance(value, RawList) else [value]
    schemas = []
    for signature in signatures:
        try:
            schemas.append(parse_schema(signature.text))
        except SchemaSyntaxError as exc:
            sink.report(f"bad helper signature: {exc}", signature.location)
            return None
    first = schemas[0]
    for schema in schemas[1:]:
        if schema.name != first.name or [a.name for a in schema.arguments] != [
            a.name for a in first.arguments
        ]:
            sink.report(
                f"overload {schema} must have {first.name}'s name and parameter names",
                fields["overloads"].location,
            )
            return None
    body_field = fields["body"]
    if not isinstance(body_field.value, RawScalar):
        sink.report("body must be text", body_field.location)
        return None
    # A block scalar (`body: |`) starts on the next line.
    body_line = body_field.location.line + 1
    try:
        module = ast.parse(body_field.value.text)
    except SyntaxError as exc:
        sink.report(
            f"invalid syntax in body: {exc.msg}",
            Location(body_field.location.path, body_line + (exc.lineno or 1) - 1),
        )
        return None
    doc = fields["doc"].value
    doc_text = doc.text if isinstance(doc, RawScalar) else ""
    return Helper(
        tuple(schemas),
        doc_text,
        tuple(module.body),
        body_field.value.text.rstrip(),
        entry.location,
        body_line,
        "internal" in fields and fields["internal"].value.text == "true",
    )


def check_bodies(helpers: tuple[Helper, ...]) -> None:
    """Each body's statements are of the four kinds and its expressions are
    formulas over its parameters and locals; raise SpecErrors."""
    sink = ErrorSink()
    callable_names = {h.name for h in helpers} | set(_basics_names())
    for helper in helpers:
        try:
            _check_block(helper.body, set(helper.parameters), helper)
            _check_one_way(helper, callable_names)
        except _BodyError as exc:
            line = helper.body_line + exc.line - 1
            sink.report(exc.message, Location(helper.location.path, line), helper.name)
    if sink:
        raise SpecErrors(sink.sorted())


def _basics_names() -> list[str]:
    import dualgen.helper_basics

    return dualgen.helper_basics.__all__


def _check_one_way(helper: Helper, callable_names: set[str]) -> None:
    """A body calls torch, other one-source helpers and dualgen.helper_basics
    only: the hand-written helpers of dualgen.formulas import the generated ones,
    so a generated helper cannot import them back (its Python would not find
    the name; its C++ might, through a twin, and hide that)."""
    for statement in helper.body:
        for node in ast.walk(statement):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                name = node.func.id
                if name not in callable_names:
                    raise _BodyError(
                        f"'{name}' is a hand-written helper (dualgen.formulas): a "
                        "helper in helpers/ calls torch, other helpers of helpers/ "
                        "and dualgen.helper_basics only; write it here, or call it "
                        "from the spec's formula",
                        node.lineno,
                    )


class _BodyError(Exception):
    def __init__(self, message: str, line: int):
        super().__init__(message)
        self.message = message
        self.line = line


def _check_block(block, names: set[str], helper: Helper) -> None:
    for statement in block:
        line = statement.lineno
        if isinstance(statement, ast.Assign):
            if len(statement.targets) != 1:
                raise _BodyError("assign one target at a time", line)
            _check(statement.value, names, line)
            names |= _targets(statement.targets[0], line)
        elif isinstance(statement, ast.If):
            _check(statement.test, names, line)
            _check_block(statement.body, names, helper)
            _check_block(statement.orelse, names, helper)
        elif isinstance(statement, ast.For):
            if not isinstance(statement.target, ast.Name) or statement.orelse:
                raise _BodyError("`for name in list:` without else", line)
            _check(statement.iter, names, line)
            _check_block(statement.body, names | {statement.target.id}, helper)
        elif isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
            _check(statement.value, names, line)  # a call run for its check
        elif isinstance(statement, ast.Return):
            if statement.value is None:
                raise _BodyError("a helper returns a value", line)
            _check(statement.value, names, line)
        else:
            kind = type(statement).__name__
            raise _BodyError(
                f"'{kind}' statements are not allowed in a helper's body "
                "(assignments, calls, if, for and return are)",
                line,
            )


def _targets(target: ast.expr, line: int) -> set[str]:
    if isinstance(target, ast.Name):
        return {target.id}
    if isinstance(target, ast.Tuple) and all(
        isinstance(e, ast.Name) for e in target.elts
    ):
        return {e.id for e in target.elts}
    raise _BodyError("assign to a name or a tuple of names", line)


def _check(tree: ast.expr, names: set[str], line: int) -> None:
    try:
        check_expression(tree, Scope(frozenset(names)))
    except FormulaError as exc:
        raise _BodyError(str(exc), line) from None


def installed_helpers() -> tuple[Helper, ...]:
    """dualgen's own one-source helpers, as installed (see `installed_sources`)."""
    paths, root = installed_sources()
    return load_helpers(paths, root) if paths else ()
