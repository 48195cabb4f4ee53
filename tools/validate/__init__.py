"""`dualgen validate`: every kernel of the spec through the gradcheck harness.

For each entry, its kernels (the functional or view op, its in-place variants) run
on the entry's samples in float64 and complex128. Each check (gradcheck slow, fast,
the adjoint check, and the jet check: Taylor mode to order 3 against nested
levels) passes if it passes on every sample torch accepts, fails if any
fails, and is n/a where torch runs no sample in that dtype. Each kernel runs in a
fresh, empty working directory (`sandbox_dir.empty_cwd`): one that leaves a file
there fails every check.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import sys
import tempfile
import warnings
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ..check.suggest import closest_op_name
from ..spec.model import Auto, Entry, OpKind, Spec
from .checked_function import checked_function
from .inputs import cases_for
from .reverse import KNOWN_REVERSE, known_reverse, reverse_verdict
from .sandbox_dir import FilesWritten, empty_cwd
from .verdicts import NotApplicable, Verdict

DTYPES = (torch.float64, torch.complex128)
CHECKS = ("slow", "fast", "adjoint", "jet", "reverse")
# An op torch runs in single precision only (mkldnn_rnn_layer) is checked in
# float32 when no double sample runs, with a step and tolerances for its precision.
SINGLE = torch.float32
SINGLE_TOLERANCES = {"eps": 1e-3, "atol": 1e-2, "rtol": 1e-2}


@dataclass(frozen=True)
class KernelReport:
    kernel: str  # "mul_.Tensor"
    entry: str  # the spec entry its formulas come from
    kind: str  # functional, inplace, view
    formulas: str  # which formulas and where they came from
    spec_line: int
    verdicts: dict = field(default_factory=dict)  # (dtype name, check) -> Verdict
    cases: dict = field(default_factory=dict)  # dtype name -> cases run
    # sample ("sample 3") -> torch's refusal, for the samples no dtype ran
    refused_samples: dict = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return any(v.status == "fail" for v in self.verdicts.values())


def load_kernels(files: dict[str, str]) -> dict:
    """Import generated files (from `generate_files`) as a fresh package; return its
    KERNELS. Validation checks what the spec generates, not what is installed."""
    global _loaded
    _loaded += 1
    name = f"_dualgen_validate_{_loaded}"
    with tempfile.TemporaryDirectory(prefix="dualgen-validate-") as root:
        package = Path(root) / name
        package.mkdir()
        for filename, text in files.items():
            if filename.endswith(".py"):  # the C++ twins run only when built
                (package / filename).write_text(text)
        spec = importlib.util.spec_from_file_location(
            name, package / "__init__.py", submodule_search_locations=[str(package)]
        )
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        # Every module now, while its file exists: the registry imports `vjp`
        # only when a kernel's VJP is first asked for.
        importlib.import_module(f"{name}.vjp")
        return importlib.import_module(f"{name}.registry").KERNELS


_loaded = 0


def kernels_by_entry(
    spec: Spec, kernels: dict
) -> list[tuple[Entry, torch._ops.OpOverload, object]]:
    """(entry, op, KernelInfo) for every generated kernel, in spec order."""
    entries = {e.schema.full_name: e for e in spec.entries}
    rows = []
    for op, info in kernels.items():
        entry = entries.get(info.name) or entries.get(info.derived_from or "")
        if entry is not None:
            rows.append((entry, op, info))
    rows.sort(key=lambda row: (row[0].location.line, row[2].kind != "functional"))
    return rows


def samples_of(spec: Spec, entry: Entry, op) -> tuple:
    """The samples an entry's kernel `op` runs on: its own, else (an in-place
    entry without formulas) those of the entry it takes its formulas from. The one
    source of inputs for `dualgen validate` and the kernel tests. Keyed by the
    installed torch's argument names: the spec's names and torch's match by
    position, and differ where a release renamed an argument (`renamed_in_torch`)."""
    source = entry
    if not entry.samples and entry.inherits_from:
        source = next(
            (e for e in spec.entries if e.schema.full_name == entry.inherits_from), None
        )
        if source is None:
            return ()
    torch_names = {
        written.name: torch_argument.name
        for written, torch_argument in zip(
            source.schema.arguments, op._schema.arguments
        )
        if written.name != torch_argument.name
    }
    if not torch_names:
        return source.samples
    return tuple(
        dataclasses.replace(
            sample,
            values=tuple((torch_names.get(k, k), v) for k, v in sample.values),
        )
        for sample in source.samples
    )


def seed_of(info) -> int:
    """The seed a kernel's samples are drawn with: the same inputs in every run."""
    return zlib.crc32(info.name.encode())


def describe_formulas(entry: Entry, info) -> str:
    parts = []
    if info.derived_from and info.derived_from != info.name:
        parts.append(f"in-place, derived from {info.derived_from}")
    if entry.inherits_from:
        parts.append(f"formulas of {entry.inherits_from}")
    backward = [", ".join(b.inputs) for b in entry.backward]
    if backward:
        parts.append("backward: " + "; ".join(backward))
    forward = []
    for f in () if entry.schema.kind is OpKind.VIEW else entry.forward:
        forward.append(
            f"{f.output} = {f.auto.value if isinstance(f.auto, Auto) else 'formula'}"
        )
    if entry.schema.kind is OpKind.VIEW:
        forward.append("view of the tangent")
    if forward:
        parts.append("forward: " + "; ".join(forward))
    return "; ".join(parts) or "no formulas"


def _runs(function: Callable, inputs: tuple) -> str | None:
    """None if torch runs the op on these inputs, else its complaint."""
    try:
        with torch.no_grad():
            function(*(x.detach() for x in inputs))
    except Exception as exc:  # noqa: BLE001 (torch's refusal, whatever its type)
        return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return None


def _check(
    check: str, function: Callable, inputs: tuple, tolerances: dict | None = None
) -> str | None:
    """None on success, else the failure. `tolerances`: eps, atol and rtol other
    than gradcheck's (single precision)."""
    from dualgen import GradcheckError, adjoint_check, gradcheck, jetcheck

    tolerances = tolerances or {}
    try:
        with (
            warnings.catch_warnings()
        ):  # single precision is meant, with its tolerances
            warnings.filterwarnings("ignore", "Input #", UserWarning)
            if check == "adjoint":
                adjoint_check(
                    function,
                    inputs,
                    **{k: v for k, v in tolerances.items() if k != "eps"},
                )
            elif check == "reverse":
                return reverse_verdict(function, inputs, tolerances)
            elif check == "jet":
                if getattr(function, "nested", False):
                    return NotApplicable("Taylor mode takes no nested tensors")
                try:
                    jetcheck(
                        function,
                        inputs,
                        **{k: v for k, v in tolerances.items() if k != "eps"},
                    )
                except NotImplementedError as exc:
                    if "does not support it" not in str(exc):
                        raise
                    # A formula of this spec calls an op the spec has no forward
                    # formula for: no higher order exists, nested levels' neither.
                    return NotApplicable(
                        "an op in its formulas has no forward formula in this spec: "
                        + str(exc).splitlines()[0]
                    )
            else:
                gradcheck(
                    function,
                    inputs,
                    check_forward_ad=True,
                    check_backward_ad=True,
                    check_adjoint=False,
                    fast_mode=check == "fast",
                    **tolerances,
                )
    except Exception as exc:  # noqa: BLE001 (a crashing kernel is a failure to report)
        text = str(exc) or type(exc).__name__
        if not isinstance(exc, GradcheckError):
            text = f"{type(exc).__name__}: {text}"
        return text
    return None


def _empty_report(entry: Entry, info) -> KernelReport:
    """A kernel's report with no verdicts yet."""
    return KernelReport(
        kernel=info.name,
        entry=entry.schema.full_name,
        kind=info.kind,
        formulas=describe_formulas(entry, info),
        spec_line=entry.location.line,
    )


# Dispatch keys whose kernels run an op on this machine's CPU.
_CPU_KEYS = (
    "CPU",
    "NestedTensorCPU",  # (ops of nested tensors only: to_padded_tensor)
    "CompositeImplicitAutograd",
    "CompositeExplicitAutograd",
    "CompositeExplicitAutogradNonFunctional",
)
DEVICE_ONLY = (
    "no kernel runs it on CPU (a device kernel: --import a module that registers "
    "a reference CPU kernel, as tests/device_references/ does)"
)


def has_cpu_kernel(qualified_name: str) -> bool:
    """Whether a kernel runs the overload (`aten::add.Tensor`) on CPU."""
    return any(
        torch._C._dispatch_has_kernel_for_dispatch_key(qualified_name, key)
        for key in _CPU_KEYS
    )


def runs_on_cpu(op) -> bool:
    schema = op._schema
    overload = f".{schema.overload_name}" if schema.overload_name else ""
    return has_cpu_kernel(schema.name + overload)


def validate_kernel(entry: Entry, op, info, samples: tuple) -> KernelReport:
    report = _empty_report(entry, info)
    if not runs_on_cpu(op):
        for dtype in DTYPES:
            for check in CHECKS:
                report.verdicts[(_name(dtype), check)] = Verdict("device", DEVICE_ONLY)
        return report
    seed = seed_of(info)
    differentiable = False
    for dtype in DTYPES:
        differentiable |= _validate_dtype(
            report, op, info, samples, dtype, seed, convention=entry.convention
        )
    if differentiable and not any(report.cases.values()):
        _validate_dtype(
            report, op, info, samples, SINGLE, seed, SINGLE_TOLERANCES, entry.convention
        )
        if not report.cases[_name(SINGLE)]:  # refused too: report the doubles only
            del report.cases[_name(SINGLE)]
            for check in CHECKS:
                del report.verdicts[(_name(SINGLE), check)]
    if any(report.cases.values()) and info.kind != "inplace":
        # (an in-place kernel takes its functional entry's samples, broadcasting
        # ones too, which an in-place op refuses)
        _fail_refused_samples(report)
    if differentiable and not any(report.cases.values()):
        # A differentiable kernel that no sample reaches is not validated, unless
        # what stops every sample is a device kernel it calls (a custom op whose
        # CPU implementation calls a CUDA-only aten op).
        reasons = [v.detail for v in report.verdicts.values()]
        if all(_NO_CPU_KERNEL in reason for reason in reasons):
            verdict = Verdict("device", DEVICE_ONLY)
        else:
            verdict = Verdict("fail", f"no sample runs: {reasons[0]}")
        for key in report.verdicts:
            report.verdicts[key] = verdict
    return report


# torch's NotImplementedError for an op without a kernel for the CPU.
_NO_CPU_KERNEL = "with arguments from the 'CPU' backend"


def _sample_of(label: str) -> str:
    return label.split(",")[0]  # "sample 3, 2-d" -> "sample 3"


def _fail_refused_samples(report: KernelReport) -> None:
    """A sample torch refuses in every dtype checks nothing (a shape or argument
    the op does not take): the kernel fails, naming it, rather than pass on the
    samples that run."""
    refused = {
        sample: why for sample, why in report.refused_samples.items() if why is not None
    }
    if not refused:
        return
    sample, why = next(iter(refused.items()))
    detail = f"{sample}: torch refuses it in every dtype ({why}); fix the sample"
    for key, verdict in report.verdicts.items():
        if verdict.status == "pass":
            report.verdicts[key] = Verdict("fail", detail)


def _validate_dtype(
    report: KernelReport,
    op,
    info,
    samples: tuple,
    dtype: torch.dtype,
    seed: int,
    tolerances: dict | None = None,
    convention: str | None = None,
) -> bool:
    """The kernel's verdicts in `dtype`, into `report`; whether any case had a
    differentiable input or output. Formulas stating a `convention`, not the
    derivative, are held to the backward formulas only (the adjoint check)."""
    dtype_name = _name(dtype)
    checks = ("adjoint",) if convention else CHECKS
    verdicts = {check: [] for check in checks}
    not_applicable: dict[str, str] = {}  # check -> the first case's reason
    passed: set[str] = set()
    refusals = []
    ran = 0
    differentiable = False
    refused = report.refused_samples
    for case in cases_for(op, samples, dtype, seed):
        sample = _sample_of(case.label)
        if case.refusal:
            differentiable = True  # unknown: counted, so all refused is a failure
            refusals.append(f"{case.label}: torch refuses: {case.refusal}")
            refused.setdefault(sample, case.refusal)
            continue
        made = checked_function(op, info, case)
        if made is None:
            refusals.append(f"{case.label}: no differentiable input or output")
            continue
        function, inputs = made
        differentiable = True
        refusal = _runs(function, inputs)
        if refusal:
            refusals.append(f"{case.label}: torch refuses: {refusal}")
            refused.setdefault(sample, refusal)
            continue
        refused[sample] = None  # it runs (in this dtype, at least)
        if any(x.numel() for x in inputs):
            ran += 1  # empty samples check shapes, not derivatives
        else:
            refusals.append(f"{case.label}: only empty inputs")
        for check in checks:
            failure = _check(check, function, inputs, tolerances)
            if isinstance(failure, NotApplicable):
                not_applicable.setdefault(check, f"{case.label}: {failure}")
            elif failure:
                verdicts[check].append(f"{case.label}: {failure}")
            else:
                passed.add(check)
    report.cases[dtype_name] = ran
    known = KNOWN_REVERSE.get(info.name)
    for check in CHECKS:
        if check == "reverse" and known and check in checks:
            verdict = known_reverse(verdicts[check], passed, known)
        elif check not in checks:
            verdict = Verdict(
                "n/a", f"a convention ({convention}), checked by the adjoint"
            )
        elif verdicts[check]:
            verdict = Verdict("fail", verdicts[check][0])
        elif check in not_applicable and check not in passed:
            verdict = Verdict("n/a", not_applicable[check])
        elif ran:
            verdict = Verdict("pass")
        else:
            verdict = Verdict("n/a", refusals[0] if refusals else "")
        report.verdicts[(dtype_name, check)] = verdict
    return differentiable


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


# The entries every check runs through, whatever the spec: make_dual is an alias,
# in-place samples are cloned.
HARNESS_OPS = {
    "alias": torch.ops.aten.alias.default,
    "clone": torch.ops.aten.clone.default,
}


def with_harness_kernels(kernels: dict) -> dict:
    """`kernels`, plus the built-in (installed) kernels of the harness's own entries
    that the spec lacks: a spec holding only a user's entries validates as it is.
    The spec's own alias or clone, where it has them, are the ones checked."""
    missing = [op for op in HARNESS_OPS.values() if op not in kernels]
    if not missing:
        return kernels
    from dualgen.generated.registry import KERNELS as BUILT_IN

    return kernels | {op: BUILT_IN[op] for op in missing if op in BUILT_IN}


def missing_harness_entries(kernels: dict) -> list[str]:
    """The harness's entries that `kernels` lacks."""
    return [name for name, op in HARNESS_OPS.items() if op not in kernels]


def unknown_names(
    spec: Spec, kernels: dict, selected: set[str] | None
) -> dict[str, str | None]:
    """Each selected name that is no kernel or entry -> the known one closest to it
    (None where none is close; of two as close, the first in the spec), in name
    order."""
    if selected is None:
        return {}
    rows = kernels_by_entry(spec, kernels)
    names = (name for e, _, info in rows for name in (e.schema.full_name, info.name))
    known = list(dict.fromkeys(names))
    unknown = sorted(selected - set(known))
    return {name: closest_op_name(name, known) for name in unknown}


def validate(
    spec: Spec, kernels: dict, selected: set[str] | None, progress: bool
) -> list[KernelReport]:
    """Check every kernel of `spec` (generated as `kernels`), or those `selected`."""
    from tqdm import tqdm

    from dualgen.rules import using_kernels

    rows = [
        row
        for row in kernels_by_entry(spec, kernels)
        if selected is None
        or row[2].name in selected
        or row[0].schema.full_name in selected
    ]
    reports = []
    # disable=None: no bar where stderr is not a terminal (CI logs).
    bar = tqdm(
        rows,
        desc="validate",
        unit="kernel",
        disable=None if progress else True,
        leave=False,
    )
    with using_kernels(kernels):
        for entry, op, info in bar:
            bar.set_postfix_str(info.name)
            samples = samples_of(spec, entry, op)
            reports.append(_validate_in_empty_cwd(entry, op, info, samples))
    return reports


def _validate_in_empty_cwd(entry: Entry, op, info, samples: tuple) -> KernelReport:
    """`validate_kernel` with a fresh, empty working directory: a kernel that leaves
    anything in it fails every check, the message naming what it wrote."""
    report = None
    try:
        with empty_cwd(prefix="dualgen-validate-cwd-"):
            report = validate_kernel(entry, op, info, samples)
    except FilesWritten as exc:
        if report is None:  # it raised as well (validate_kernel catches torch's)
            report = _empty_report(entry, info)
        for dtype in DTYPES:
            for check in CHECKS:
                key = (str(dtype).removeprefix("torch."), check)
                report.verdicts[key] = Verdict("fail", str(exc))
    return report
