"""Stage 2, build: raw entries -> checked model entries.

Checks every entry against the operator torch registers (the overload exists, the
schema matches), classifies each key (backward formula, forward formula, metadata),
and parses every formula in its scope. Every problem goes to the ErrorSink.
"""

from __future__ import annotations

import ast
import difflib

from dualgen.operator_schema import needs_value

from ..spec.errors import ErrorSink, Location
from ..spec.load import RawEntry, RawField, RawList, RawScalar
from ..spec.model import (
    CONVENTIONS,
    BackwardFormula,
    CollectiveEntry,
    Entry,
    Formula,
    ForwardFormula,
    OperatorSchema,
    OpKind,
    Spec,
    TorchReleases,
)
from ..spec.sample import DERIVED, SampleError, parse_sample
from ..spec.schema import (
    SchemaProblem,
    SchemaSyntaxError,
    TorchOperators,
    parse_schema,
    registered_schema,
)
from .collective import build_collective
from .formula import FormulaError, Scope, names_used, parse_formula
from .forward import ForwardFormulas

META_KEYS = (
    "name",
    "non_differentiable",
    "output_differentiability",
    "sample",
    "convention",
    "renamed_in_torch",
    "torch_releases",
)


class _EntryError(Exception):
    """Stops checking one entry after a problem that makes the rest meaningless."""


def build_spec(
    raw_entries: list[RawEntry], path: str, ops: TorchOperators, sink: ErrorSink
) -> Spec:
    entries: list[Entry] = []
    collectives: list[CollectiveEntry] = []
    first_seen: dict[str, Location] = {}
    for raw in raw_entries:
        if raw.get("collective") is not None:
            entry = build_collective(raw, ops, sink)
        else:
            entry = _EntryBuilder(raw, ops, sink).build()
        if entry is None:
            continue
        name = entry.schema.full_name
        if name in first_seen:
            sink.report(
                f"duplicate entry (first at line {first_seen[name].line})",
                entry.location,
                name,
            )
            continue
        first_seen[name] = entry.location
        (collectives if isinstance(entry, CollectiveEntry) else entries).append(entry)
    _check_inheritance(entries, sink)
    return Spec(path, tuple(entries), tuple(collectives))


def _check_inheritance(entries: list[Entry], sink: ErrorSink) -> None:
    names = {e.schema.full_name for e in entries}
    for e in entries:
        if e.inherits_from is not None and e.inherits_from not in names:
            sink.report(
                f"in-place entry has no formulas and the spec has no entry "
                f"'{e.inherits_from}' to take them from",
                e.location,
                e.schema.full_name,
            )


class _EntryBuilder(ForwardFormulas):
    def __init__(self, raw: RawEntry, ops: TorchOperators, sink: ErrorSink):
        self.raw = raw
        self.ops = ops
        self.sink = sink
        self.label = raw.name_text or "<entry>"
        self.failed = False

    def error(self, message: str, location: Location) -> None:
        self.sink.report(message, location, self.label)
        self.failed = True

    def build(self) -> Entry | None:
        try:
            releases = self._torch_releases()
            schema = self._schema(releases)
        except _EntryError:
            return None
        self.schema = schema
        self.label = schema.full_name
        backward_fields, forward_fields = self._classify_keys()
        non_diff = self._non_differentiable()
        out_diff = self._output_differentiability()
        self.out_diff = out_diff
        inherits = None
        if schema.kind is OpKind.INPLACE and not backward_fields and not forward_fields:
            if non_diff or self.raw.get("output_differentiability"):
                self.error(
                    "an in-place entry without formulas takes everything from "
                    f"'{schema.functional_name}'; remove the other keys",
                    self.raw.location,
                )
            inherits = schema.functional_name
            backward: tuple[BackwardFormula, ...] = ()
            forward: tuple[ForwardFormula, ...] = ()
        else:
            backward = self._backward(backward_fields, non_diff)
            # Differentiable inputs come from the keys, so one broken backward formula
            # does not make its input look non-differentiable to the forward checks.
            diff_inputs = [
                p.strip()
                for f in backward_fields
                for p in f.key.split(",")
                if self.schema.argument(p.strip()).kind.is_tensor_like
            ]
            if backward_fields and not any(out_diff):
                self.error(
                    "backward formulas given, but no output is differentiable",
                    backward_fields[0].location,
                )
            forward = self._forward(forward_fields, diff_inputs, out_diff)
        samples = self._samples(inherited=inherits is not None, non_diff=non_diff)
        convention = self._convention()
        if self.failed:
            return None
        return Entry(
            schema,
            self.raw.location,
            backward,
            forward,
            non_diff,
            out_diff,
            inherits,
            samples,
            convention,
            releases,
        )

    def _convention(self) -> str | None:
        field = self.raw.get("convention")
        if field is None:
            return None
        value = field.value
        text = value.text if isinstance(value, RawScalar) else None
        if text not in CONVENTIONS:
            self.error(
                f"convention must be one of: {', '.join(CONVENTIONS)}", field.location
            )
            return None
        return text

    # -- samples ------------------------------------------------------------

    def _samples(self, *, inherited: bool, non_diff: tuple[str, ...]) -> tuple:
        field = self.raw.get("sample")
        texts: list[tuple[RawScalar, Location]] = []
        if field is not None:
            items = (
                field.value.items
                if isinstance(field.value, RawList)
                else (field.value,)
            )
            for item in items:
                if item.kind != "str":
                    self.error("sample must be `name=value, ...` text", item.location)
                    return ()
                texts.append((item, item.location))
        arguments = {a.name: a for a in self.schema.arguments}
        samples = []
        for item, location in texts:
            try:
                samples.append(parse_sample(item.text, arguments, location))
            except SampleError as exc:
                self.error(f"sample: {exc}", location)
                continue
            for name, value in samples[-1].values:
                if isinstance(value, DERIVED) and name not in non_diff:
                    sources = "', '".join(value.sources)
                    self.error(
                        f"sample: '{name}' is computed from '{sources}'; list "
                        f"it under non_differentiable (its rule takes it as a "
                        f"function of '{sources}')",
                        location,
                    )
        if inherited or len(samples) != len(texts):
            return tuple(samples)  # an inheriting entry may use its source's
        for argument in self.schema.arguments:
            if not needs_value(argument):
                continue
            where = field.location if field is not None else self.raw.location
            if not samples or any(argument.name not in dict(s.values) for s in samples):
                self.error(
                    f"sample: '{argument.name}' ({argument.type}) has no default; "
                    f"give it in every sample, e.g. `sample: {argument.name}=...`",
                    where,
                )
        return tuple(samples)

    # -- schema -------------------------------------------------------------

    def _schema(self, releases: TorchReleases | None) -> OperatorSchema:
        field = self.raw.get("name")
        if field is None:
            self.error("entry has no 'name:' key", self.raw.location)
            raise _EntryError
        if not isinstance(field.value, RawScalar) or field.value.kind != "str":
            self.error("'name' must be an aten schema string", field.location)
            raise _EntryError
        renames = self._renamed_in_torch()
        if releases is not None and self.ops.release not in releases:
            # Not in this release: the entry is checked on the releases that have
            # it; here its schema is taken as written (the output is the same).
            try:
                return parse_schema(field.value.text)
            except SchemaSyntaxError as exc:
                self.error(f"malformed schema: {exc}", field.location)
                raise _EntryError from None
        try:
            written, registered = registered_schema(field.value.text, self.ops, renames)
        except SchemaProblem as problem:
            self.label = problem.label or self.label
            self.error(str(problem), field.location)
            raise _EntryError from None
        self.label = written.full_name
        unknown = sorted(set(renames) - {a.name for a in written.arguments})
        if unknown:
            self.error(
                f"renamed_in_torch: '{unknown[0]}' is no argument of the entry",
                self.raw.get("renamed_in_torch").location,
            )
            raise _EntryError
        written_to = [
            a.name for a in written.arguments if a.type.alias and a.type.alias.is_write
        ]
        if not written.is_aten and written_to:
            self.error(
                f"custom op writes into '{written_to[0]}': a spec describes "
                f"functional custom ops only (mutates_args=())",
                field.location,
            )
            raise _EntryError
        if written.kind is OpKind.OUT:
            self.error(
                "out= overloads take no formulas; write the functional entry",
                field.location,
            )
            raise _EntryError
        return registered

    def _torch_releases(self) -> TorchReleases | None:
        """`torch_releases: ">=2.14"`, `"<2.14"` or `">=2.12,<2.14"`: the torch
        releases that have the entry's overload (docs/spec.md#torch-releases)."""
        field = self.raw.get("torch_releases")
        if field is None:
            return None
        text = field.value.text if isinstance(field.value, RawScalar) else ""
        bounds: dict[str, tuple[int, int]] = {}
        for part in (p.strip() for p in text.split(",")):
            operator = (
                ">=" if part.startswith(">=") else "<" if part.startswith("<") else ""
            )
            numbers = part[len(operator) :].strip().split(".")
            if (
                not operator
                or operator in bounds
                or len(numbers) != 2
                or not all(n.isdigit() for n in numbers)
            ):
                self.error(
                    'torch_releases must be ">=X.Y", "<X.Y" or both, comma-separated '
                    "(the first release with the overload, the first without it)",
                    field.location,
                )
                raise _EntryError
            bounds[operator] = (int(numbers[0]), int(numbers[1]))
        return TorchReleases(text, bounds.get(">="), bounds.get("<"))

    def _renamed_in_torch(self) -> dict[str, str]:
        """`renamed_in_torch: grad=grad_output, ...`: arguments that some torch
        release names otherwise (docs/spec.md#torch-releases)."""
        field = self.raw.get("renamed_in_torch")
        if field is None:
            return {}
        value = field.value
        pairs = value.text.split(",") if isinstance(value, RawScalar) else []
        renames = {}
        for pair in pairs:
            ours, _, theirs = (p.strip() for p in pair.partition("="))
            if not (ours.isidentifier() and theirs.isidentifier()):
                renames = {}
                break
            renames[ours] = theirs
        if not renames:
            self.error(
                "renamed_in_torch must be `name=torch_name, ...` (argument names)",
                field.location,
            )
            raise _EntryError
        return renames

    # -- keys ---------------------------------------------------------------

    def _classify_keys(self) -> tuple[list[RawField], list[RawField]]:
        arg_names = {a.name for a in self.schema.arguments}
        outputs = set(self.schema.output_names())
        backward, forward = [], []
        for field in self.raw.fields:
            if field.key in META_KEYS:
                continue
            parts = [p.strip() for p in field.key.split(",")]
            if all(p in arg_names for p in parts):
                backward.append(field)
            elif field.key in outputs:
                forward.append(field)
            else:
                bad = next((p for p in parts if p not in arg_names), field.key)
                choices = sorted(arg_names | outputs | set(META_KEYS))
                close = difflib.get_close_matches(bad, choices, n=1, cutoff=0.6)
                hint = f"; did you mean '{close[0]}'?" if close else ""
                self.error(
                    f"unknown key '{bad}': not an argument, an output or one of "
                    f"{', '.join(META_KEYS)}{hint}",
                    field.location,
                )
        return backward, forward

    def _non_differentiable(self) -> tuple[str, ...]:
        field = self.raw.get("non_differentiable")
        if field is None:
            return ()
        if isinstance(field.value, RawScalar):
            names = [n.strip() for n in field.value.text.split(",")]
        else:
            names = [item.text for item in field.value.items]
        for i, name in enumerate(names):
            arg = self.schema.argument(name)
            if name in names[:i]:
                self.error(f"non_differentiable names '{name}' twice", field.location)
            elif arg is None:
                self.error(
                    f"non_differentiable names '{name}', which is not an argument",
                    field.location,
                )
            elif not arg.kind.is_tensor_like:
                self.error(
                    f"non_differentiable names '{name}', which is not a tensor",
                    field.location,
                )
        return tuple(names)

    def _output_differentiability(self) -> tuple[bool, ...]:
        returns = self.schema.returns
        default = tuple(r.type.kind.is_tensor_like for r in returns)
        field = self.raw.get("output_differentiability")
        if field is None:
            return default
        if not isinstance(field.value, RawList) or any(
            i.kind != "bool" for i in field.value.items
        ):
            self.error(
                "output_differentiability must be a list of true/false", field.location
            )
            return default
        values = tuple(
            i.text.lower() in ("true", "yes", "on") for i in field.value.items
        )
        if len(values) != len(returns):
            self.error(
                f"output_differentiability has {len(values)} values for {len(returns)} outputs",
                field.location,
            )
            return default
        for value, ret, name in zip(values, returns, self.schema.output_names()):
            if value and not ret.type.kind.is_tensor_like:
                self.error(
                    f"output '{name}' is not a tensor and cannot be differentiable",
                    field.location,
                )
        return values

    # -- formulas -----------------------------------------------------------

    def _formula_text(self, field: RawField) -> str | None:
        value = field.value
        if not isinstance(value, RawScalar) or value.kind in ("null", "bool"):
            self.error(f"'{field.key}' must be a formula", field.location)
            return None
        return value.text

    def _parse(
        self, text: str, scope: Scope, field: RawField, origin: str = "spec"
    ) -> Formula | None:
        try:
            tree = parse_formula(text, scope)
        except FormulaError as exc:
            self.error(f"{field.key}: {exc}", field.location)
            return None
        # The source is shown in one-line comments above the generated code.
        return Formula(" ".join(text.split()), tree, field.location, origin)

    def _grad_names(self) -> tuple[set[str], dict[str, str]]:
        """The names of the outputs' gradients in a backward formula, and hints for
        names a writer may wrongly use. An argument named like one (`grad` in
        `_cdist_backward(Tensor grad, ...)`) keeps its name: a one-output op's
        gradient is then `grads[0]` or `grad_<output>`."""
        outputs = self.schema.output_names()
        arg_names = {a.py_name for a in self.schema.arguments}
        if len(outputs) == 1 and "grad" not in arg_names:
            return {"grad"}, {"grads": "this op has one output: use 'grad'"}
        names = {"grads"} | {f"grad_{o}" for o in outputs}
        hints = {}
        if len(outputs) > 1 and sum(self.out_diff) == 1:
            names.add("grad")
        elif len(outputs) > 1:
            hints["grad"] = "this op has several outputs: use grads[i] or grad_<output>"
        return names - arg_names, hints

    def _grad_argument_hint(self, tree: ast.expr) -> str:
        """Where an argument is named `grad`, a formula that reads it but no output
        gradient was most likely meant for the gradient: say what to write."""
        if "grad" not in names_used(tree) or self.schema.argument("grad") is None:
            return ""
        outputs = self.schema.output_names()
        if len(outputs) == 1:
            write = f"grads[0] or grad_{outputs[0]}"
        else:
            write = "grads[i] or grad_<output>"
        return (
            f": 'grad' is this op's argument grad; write {write} "
            f"for the gradient of the output"
        )

    def _grads_indexed(self, tree: ast.expr) -> bool:
        """Every read of `grads` is `grads[i]` with a constant i in range."""
        outputs = len(self.schema.output_names())
        indexed = set()
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Subscript)
                and isinstance(node.value, ast.Name)
                and node.value.id == "grads"
            ):
                indexed.add(id(node.value))
                index = node.slice
                if not (
                    isinstance(index, ast.Constant)
                    and type(index.value) is int
                    and 0 <= index.value < outputs
                ):
                    return False
        return all(
            id(n) in indexed
            for n in ast.walk(tree)
            if isinstance(n, ast.Name) and n.id == "grads"
        )

    def _backward(
        self, fields: list[RawField], non_diff: tuple[str, ...]
    ) -> tuple[BackwardFormula, ...]:
        grad_names, hints = self._grad_names()
        arg_names = {a.py_name for a in self.schema.arguments}
        for arg in self.schema.arguments:
            if arg.kind.is_tensor_like:
                hints[f"{arg.name}_t"] = (
                    "tangents are not available in a backward formula"
                )
                hints[f"{arg.name}_p"] = (
                    f"backward formulas use plain argument names: write {arg.name}"
                )
        scope = Scope(
            frozenset(arg_names | grad_names | set(self.schema.output_names())), hints
        )
        covered: dict[str, Location] = {}
        formulas = []
        grad_styles: set[str] = set()
        for field in fields:
            inputs = tuple(p.strip() for p in field.key.split(","))
            for name in inputs:
                arg = self.schema.argument(name)
                assert arg is not None
                if not arg.kind.is_tensor_like:
                    self.error(
                        f"'{name}' is not a tensor: only tensor inputs have gradients",
                        field.location,
                    )
                elif name in non_diff:
                    self.error(
                        f"'{name}' has a backward formula and is listed as non_differentiable",
                        field.location,
                    )
                elif name in covered:
                    self.error(f"'{name}' has two backward formulas", field.location)
                covered[name] = field.location
            text = self._formula_text(field)
            if text is None:
                continue
            formula = self._parse(text, scope, field)
            if formula is None:
                continue
            tree = formula.tree
            if (
                len(inputs) > 1
                and isinstance(tree, (ast.Tuple, ast.List))
                and len(tree.elts) != len(inputs)
            ):
                self.error(
                    f"{field.key}: formula gives {len(tree.elts)} gradients for {len(inputs)} inputs",
                    field.location,
                )
            used = names_used(formula.tree) & grad_names
            if not used:
                self.error(
                    f"{field.key}: backward formula does not use the gradient of the output"
                    + self._grad_argument_hint(formula.tree),
                    field.location,
                )
            elif "grads" in used and not self._grads_indexed(formula.tree):
                last = len(self.schema.output_names()) - 1
                self.error(
                    f"{field.key}: 'grads' is the tuple of the outputs' gradients: "
                    + (
                        f"index it with a constant, grads[0] to grads[{last}]"
                        if last
                        else "this op has one output, write grads[0]"
                    ),
                    field.location,
                )
            grad_styles |= {
                "grad" if u == "grad" else "grads" if u == "grads" else "grad_<name>"
                for u in used
            }
            formulas.append(BackwardFormula(inputs, formula))
        if len(grad_styles) > 1:
            self.error(
                f"backward formulas mix {' and '.join(sorted(grad_styles))}; use one style",
                self.raw.location,
            )
        for arg in self.schema.arguments:
            if (
                arg.kind.is_tensor_like
                and arg.name not in covered
                and arg.name not in non_diff
            ):
                self.error(
                    f"input '{arg.name}' has no backward formula; add '{arg.name}: ...' "
                    f"or list it under non_differentiable",
                    self.raw.location,
                )
        return tuple(formulas)
