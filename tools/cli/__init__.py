"""The `dualgen` command line.

dualgen generate [--spec PATH] [--out DIR] [--import MODULE ...] [--check] [-v]
dualgen validate [--spec PATH] [--import MODULE ...] [--ops NAME ...] [--report PATH]
                 [--no-progress]
dualgen --version

Run from anywhere inside a project: --spec and --out default to derivatives.yaml
and generated/ in its root (tools/spec/project.py). `python -m dualgen` is the same.
`--import mylib.ops` imports the module that registers a library's custom ops
before the spec is checked (docs/custom_ops.md).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ..spec.errors import SpecErrors, SpecUnreadable
from ..spec.project import (
    COMPANION_SPECS,
    SPEC_NAME,
    NotInProject,
    default_paths,
    find_root,
    installed_spec,
)


@dataclass(frozen=True)
class Outcome:
    files: dict[str, str]
    entries: int
    kernels: int


def generate_files(spec_path: Path, imports: tuple[str, ...] = ()) -> Outcome:
    """Run load -> build -> analyse -> emit -> format in memory; raise SpecErrors.
    `imports`: the modules registering the spec's custom ops, already imported;
    the generated registry imports them too."""
    from ..analyse import analyse
    from ..emit_python import Emitter
    from .write import format_python

    written, known = one_source_helpers(spec_path)
    spec, ops = checked_spec(spec_path)
    plans = analyse(spec, ops)
    emitter = Emitter(spec_path.name, imports)
    files = emitter.render_all(plans, spec.collectives, written, known)
    return Outcome(format_python(files), len(spec.entries), len(plans))


def companion_files(spec_path: Path) -> dict[str, str]:
    """The files of the project spec's companion specs (`COMPANION_SPECS`, beside
    the project's derivatives.yaml), each under its package's folder; none for
    any other spec. Raise SpecErrors, or ImportFailed for a module they need."""
    if spec_path.name != SPEC_NAME:
        return {}
    files = {}
    for relative, (package, imports) in COMPANION_SPECS.items():
        path = spec_path.parent / relative
        if not path.is_file():
            continue
        import_modules(list(imports))
        outcome = generate_files(path, imports)
        files.update(
            {f"{package}/{name}": text for name, text in outcome.files.items()}
        )
    return files


def one_source_helpers(spec_path: Path):
    """(helpers written here, helpers known): the helpers of helpers/*.yaml beside
    the spec (dualgen's own spec: their code is written with its kernels), else
    dualgen's installed ones (known, so formulas may call them, but not written).
    Loaded, defined in Python (formulas may call one written in this run) and
    checked; raise SpecErrors."""
    from ..check.formula import use_one_source_helpers
    from ..check.helpers import (
        check_bodies,
        installed_helpers,
        load_helpers,
        sources_beside,
    )
    from ..check.twins import basics, load_twins, manifest_path
    from ..emit_python.helpers import define_python

    written = load_helpers(sources_beside(spec_path), spec_path.parent)
    installed = installed_helpers()
    # The spec's own helpers, and dualgen's that it does not define itself.
    own = {h.name for h in written}
    helpers = written + tuple(h for h in installed if h.name not in own)
    if not helpers:
        return (), ()
    twins = load_twins(manifest_path(), "runtime/csrc/dualgen/formulas/twins.yaml")
    from dualgen import helper_basics as basics_module

    # Bodies may call basics' utilities besides each other.
    use_one_source_helpers({n: getattr(basics_module, n) for n in basics(twins)})
    use_one_source_helpers(define_python(helpers, basics(twins)))
    check_bodies(helpers)
    return written, helpers


def checked_spec(spec_path: Path):
    """Load and build the spec: (Spec, TorchOperators); raise SpecErrors."""
    from ..check.build import build_spec
    from ..spec.errors import ErrorSink
    from ..spec.load import load_spec
    from ..spec.schema import TorchOperators

    sink = ErrorSink()
    display = spec_path.as_posix()
    try:
        data = spec_path.read_bytes()
    except OSError as exc:
        message = f"{display}: error: cannot read spec: {exc.strerror}"
        raise SpecUnreadable(message) from None
    raw = load_spec(data, display, sink)
    if sink and not raw:
        raise SpecErrors(sink.sorted())
    ops = TorchOperators()
    spec = build_spec(raw, display, ops, sink)
    if sink:
        raise SpecErrors(sink.sorted())
    return spec, ops


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dualgen", description="Forward-mode AD kernels for PyTorch."
    )
    parser.add_argument("--version", action=_Version, nargs=0, help=_Version.HELP)
    sub = parser.add_subparsers(dest="command", required=True)
    gen = sub.add_parser("generate", help="generate kernels from the derivatives spec")
    gen.add_argument(
        "--spec",
        type=Path,
        help="spec file (default: derivatives.yaml in the project root)",
    )
    gen.add_argument(
        "--out",
        type=Path,
        help="output directory (default: generated/ in the project root)",
    )
    _import_option(gen)
    gen.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 with a diff if the output is stale",
    )
    gen.add_argument(
        "-v", "--verbose", action="store_true", help="timings, and tracebacks on errors"
    )
    bld = sub.add_parser(
        "build",
        help="build the C++ kernels (the extension dualgen_cpp); changed sources only",
    )
    bld.add_argument("-v", "--verbose", action="store_true", help="compiler commands")
    val = sub.add_parser(
        "validate", help="gradcheck every kernel of the spec on its samples"
    )
    val.add_argument(
        "--spec",
        type=Path,
        help="spec file (default: derivatives.yaml in the project root)",
    )
    _import_option(val)
    val.add_argument(
        "--ops",
        nargs="+",
        metavar="NAME",
        help="only these kernels or entries (`mul.Tensor`, `mul_.Tensor`, `exp`)",
    )
    val.add_argument(
        "--report",
        type=Path,
        metavar="PATH",
        help="write PATH.md (a Markdown table) and PATH.html (a standalone page)",
    )
    val.add_argument("--no-progress", action="store_true", help="no progress bar")
    val.add_argument(
        "-v", "--verbose", action="store_true", help="every failure in full"
    )
    return parser


def _import_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MODULE",
        help="import MODULE first: it registers the spec's custom ops "
        "(repeatable; the working directory is on the import path)",
    )


class ImportFailed(Exception):
    """An --import module could not be imported: one line, with Python's reason."""


def import_modules(modules: list[str]) -> None:
    """Import each module, as `python -m` would find it (the working directory
    first on the path); raise ImportFailed with the first failure."""
    import importlib

    if modules and "" not in sys.path and str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    for module in modules:
        try:
            importlib.import_module(module)
        except Exception as exc:  # the module's own error, whatever it is
            raise ImportFailed(
                f"--import {module}: {type(exc).__name__}: {exc}"
            ) from exc


def _build(args: argparse.Namespace) -> int:
    """Compile the C++ kernels; a failure is one line with the compiler's first
    error (and the whole log with -v)."""
    import time

    from dualgen import cpp

    start = time.perf_counter()
    try:
        cpp.build(verbose=args.verbose, progress=sys.stderr.isatty())
    except cpp.BuildError as exc:
        print(f"dualgen: error: {exc}", file=sys.stderr)
        return 1
    print(f"built {cpp.NAME} in {time.perf_counter() - start:.1f}s", file=sys.stderr)
    return 0


class _Version(argparse.Action):
    """`--version`: dualgen's version, torch's, the kernels in use and the C++
    build's state, one line each (argparse's own action would join the lines)."""

    HELP = "versions, the kernels in use and the C++ build's state"

    def __call__(self, parser, namespace, values, option_string=None):
        from dualgen.versions import report

        print(report())
        parser.exit()


def _with_project_paths(args: argparse.Namespace) -> argparse.Namespace:
    """Fill in --spec (and --out) from the project around the working directory;
    outside any project, `validate` checks the installed package's own spec."""
    out = getattr(args, "out", None)
    if args.command == "validate" and args.spec is None and out is None:
        installed = installed_spec()
        if installed is not None and find_root(Path.cwd()) is None:
            args.spec = installed
    args.spec, out = default_paths(args.spec, out, Path.cwd())
    if args.command == "generate":
        args.out = out
    return args


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "build":
        return _build(args)
    try:
        args = _with_project_paths(args)
    except NotInProject as exc:
        print(f"dualgen: error: {exc}", file=sys.stderr)  # argparse's usage errors
        return 2
    # What a failure leaves unchanged: generate never half-writes its output.
    after = f"; {args.out} left unchanged" if args.command == "generate" else ""
    try:
        import_modules(args.imports)
    except ImportFailed as exc:
        print(f"dualgen: error: {exc}", file=sys.stderr)
        if args.verbose:
            raise
        return 1
    try:
        if args.command == "validate":
            return _validate(args)
        return _generate(args)
    except SpecErrors as exc:
        for error in exc.errors:
            print(error, file=sys.stderr)
        print(f"{len(exc.errors)} error(s){after}", file=sys.stderr)
        if args.verbose:
            raise
        return 1
    except SpecUnreadable as exc:
        print(
            f"{exc}" + (f"\n{args.out} left unchanged" if after else ""),
            file=sys.stderr,
        )
        return 1
    except KeyboardInterrupt:
        print(f"interrupted{after}", file=sys.stderr)
        return 130


def _generate(args: argparse.Namespace) -> int:
    from ..analyse import analyse
    from ..emit_python import Emitter
    from ..stopwatch import running
    from .write import format_files, read_existing, stale_diff, write_atomically

    with running() as clock:
        written, known = one_source_helpers(args.spec)
        spec, ops = checked_spec(args.spec)  # laps "load" inside
        clock.lap("build")
        plans = analyse(spec, ops)
        clock.lap("analyse")
        rendered = Emitter(args.spec.name, tuple(args.imports)).render_all(
            plans, spec.collectives, written, known
        )
        clock.lap("emit")
        # What is on disk is black's output for most chunks; --check reuses it too.
        formatted = format_files(rendered, read_existing(args.out))
        clock.lap("format")
        files = {**formatted.files, **companion_files(args.spec)}
        clock.lap("companions")
        outcome = Outcome(files, len(spec.entries), len(plans))
        if args.check:
            diff = stale_diff(args.out, outcome.files, source=args.spec.name)
            clock.lap("compare")
        else:
            changed = write_atomically(args.out, outcome.files)
            clock.lap("write")
    if args.verbose:
        print(
            f"generated in {clock.total:.2f}s ({clock.summary()}); black ran on "
            f"{formatted.blacked} of {formatted.chunks} chunks",
            file=sys.stderr,
        )
    if args.check:
        if diff:
            sys.stdout.write(diff)
            sys.stdout.flush()  # the hint below is the last line on a terminal
            print(_stale_hint(args.out), file=sys.stderr)
            return 1
        print(
            f"{args.out} is up to date ({outcome.entries} entries, {outcome.kernels} kernels)"
        )
        return 0
    state = "written" if changed else "unchanged"
    print(f"{args.out}: {state} ({outcome.entries} entries, {outcome.kernels} kernels)")
    return 0


def _stale_hint(out: Path) -> str:
    return (
        f"{out.as_posix()} is stale: run `make generate` (or dualgen generate) "
        f"to update {out.as_posix()}/"
    )


def _validate(args: argparse.Namespace) -> int:
    from ..analyse import analyse
    from ..check.suggest import did_you_mean
    from ..emit_python import Emitter
    from ..validate import (
        load_kernels,
        missing_harness_entries,
        unknown_names,
        validate,
        with_harness_kernels,
    )
    from ..validate.report import summary, write_reports

    start = time.perf_counter()
    written, known = one_source_helpers(args.spec)
    spec, ops = checked_spec(args.spec)
    files = Emitter(args.spec.name, tuple(args.imports)).render_all(
        analyse(spec, ops), (), written, known
    )
    kernels = with_harness_kernels(load_kernels(files))
    missing = missing_harness_entries(kernels)
    if missing:  # only where the installed kernels lack them too
        print(
            f"{args.spec}: error: validate needs entries for {', '.join(missing)}: "
            f"the harness itself runs them (make_dual is an alias, in-place samples "
            f"are cloned)",
            file=sys.stderr,
        )
        return 1
    selected = set(args.ops) if args.ops else None
    unknown = unknown_names(spec, kernels, selected)
    for name, close in unknown.items():
        print(
            f"no kernel or entry named '{name}'{did_you_mean(close)}", file=sys.stderr
        )
    if unknown:
        return 2
    reports = validate(spec, kernels, selected, progress=not args.no_progress)
    for r in reports:
        for (dtype, check), verdict in r.verdicts.items():
            if verdict.status == "fail":
                detail = (
                    verdict.detail if args.verbose else verdict.detail.split("\n")[0]
                )
                print(
                    f"FAIL {r.kernel} [{dtype} {check}] (spec line {r.spec_line}): {detail}"
                )
    print(f"{summary(reports)} in {time.perf_counter() - start:.1f}s")
    if args.report:
        table, page = write_reports(args.report, reports)
        print(f"report: {table}, {page}")
    return 1 if any(r.failed for r in reports) else 0


if __name__ == "__main__":
    sys.exit(main())
