"""The memory benchmark's goals and tables (bench/memory.py): reads the records the
fresh processes wrote, judges the issue's goals, prints markdown.

A record: workload, method, status ("ok", "raises", "out of memory", "timeout",
"failed"), and when ok peak_mib (above the inputs), seconds (the measured run)
and check (the norm of the returned tensor: the forward modes must agree).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass

from memory_workloads import FORWARD_MODES, METHODS, WORKLOADS

LABELS = {
    "primal": "primal",
    "native": "native",
    "native-math": "native, math attention",
    "func.jvp": "func.jvp",
    "dualgen": "dualgen",
    "dualgen-python": "dualgen (Python)",
    "backprop": "backprop",
}
DUALGEN_METHODS = ("dualgen", "dualgen-python")
# Peaks within this count as equal: the resident size moves by a few pages with
# the interpreter's own allocations (the table's precision).
NOISE_MIB = 0.1


def ratio_text(value: float) -> str:
    """A ratio; below 0.1 with three decimals, so that it never reads 0.00x."""
    return f"{value:.2f}x" if value >= 0.1 else f"{value:.3f}x"


@dataclass(frozen=True)
class Verdict:
    goal: str  # the column it shows in
    workload: str
    method: str  # the dualgen method judged
    value: float | None  # the ratio measured
    limit: float
    passed: bool | None  # None: not measurable (a method raised or timed out)
    note: str = ""

    def cell(self) -> str:
        if self.passed is None:
            return f"n/a ({self.note})"
        word, sign = ("pass", "≤") if self.passed else ("**fail**", ">")
        note = f", {self.note}" if self.note else ""
        return f"{word} ({ratio_text(self.value)} {sign} {self.limit:g}x{note})"


def _by_key(records: Iterable[dict]) -> dict[tuple[str, str], dict]:
    return {(r["workload"], r["method"]): r for r in records}


def _ok(record: dict | None) -> bool:
    return record is not None and record["status"] == "ok"


def _ratio(
    goal: str,
    workload: str,
    method: str,
    mine: dict | None,
    theirs: dict | None,
    limit: float,
    field: str = "peak_mib",
    note: str = "",
) -> Verdict:
    if not _ok(mine) or not _ok(theirs):
        missing = mine if not _ok(mine) else theirs
        why = f"{missing['method']} {missing['status']}" if missing else "not run"
        return Verdict(goal, workload, method, None, limit, None, why)
    value = mine[field] / max(theirs[field], 1e-9)
    slack = NOISE_MIB if field == "peak_mib" else 0.0
    passed = mine[field] <= limit * theirs[field] + slack
    return Verdict(goal, workload, method, value, limit, passed, note)


GOAL_NATIVE = "goal: ≤ native"
GOAL_PRIMAL = "goal: ≤ k× primal"
GOAL_TIME = "goal: time ≤ 2× primal"
GOAL_BACKPROP = "goal: ≤ 0.5× backprop"
GOALS = (GOAL_NATIVE, GOAL_PRIMAL, GOAL_TIME, GOAL_BACKPROP)


def native_reference(cells: dict, workload: str) -> tuple[dict | None, str]:
    """Native as shipped where it runs, else with the fused attention off."""
    native = cells.get((workload, "native"))
    if _ok(native) or not _ok(cells.get((workload, "native-math"))):
        return native, "native"
    return cells[(workload, "native-math")], "math attention"


def evaluate(records: list[dict]) -> list[dict]:
    """The issue's goals, for each dualgen backend measured."""
    cells = _by_key(records)
    verdicts = []
    for workload in dict.fromkeys(r["workload"] for r in records):
        for method in DUALGEN_METHODS:
            mine = cells.get((workload, method))
            if mine is None:
                continue
            native, which = native_reference(cells, workload)
            note = "" if which == "native" else f"vs native, {which}"
            verdicts.append(
                _ratio(GOAL_NATIVE, workload, method, mine, native, 1.0, note=note)
            )
            primal = cells.get((workload, "primal"))
            if workload == "transformer":
                verdicts.append(_ratio(GOAL_PRIMAL, workload, method, mine, primal, 3))
            if workload == "attention-8192":
                verdicts.append(_ratio(GOAL_PRIMAL, workload, method, mine, primal, 4))
                verdicts.append(
                    _ratio(GOAL_TIME, workload, method, mine, primal, 2, "seconds")
                )
            if workload == "training-step":
                backprop = cells.get((workload, "backprop"))
                verdicts.append(
                    _ratio(GOAL_BACKPROP, workload, method, mine, backprop, 0.5)
                )
    return [asdict(v) for v in verdicts]


def cell(record: dict | None, field: str = "peak_mib") -> str:
    """A record as a table cell: MiB (or seconds), else what happened."""
    if record is None:
        return ""
    if record["status"] != "ok":
        return record["status"]
    if field == "seconds":
        return f"{record['seconds']:.3f} s"
    return f"{record['peak_mib']:.1f}"


def disagreements(records: list[dict]) -> set[tuple[str, str]]:
    """Forward modes whose tangent's norm is not the reference's (func.jvp's where
    it ran, else native's): a figure of a wrong answer means nothing."""
    cells = _by_key(records)
    wrong = set()
    for workload in dict.fromkeys(r["workload"] for r in records):
        runs = [cells.get((workload, m)) for m in ("func.jvp", "native", "native-math")]
        reference = next((r for r in runs if _ok(r)), None)
        if reference is None:
            continue
        for method in FORWARD_MODES:
            record = cells.get((workload, method))
            if _ok(record):
                scale = max(abs(reference["check"]), 1e-12)
                agreement = WORKLOADS[workload].agreement
                if abs(record["check"] - reference["check"]) > agreement * scale:
                    wrong.add((workload, method))
    return wrong


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def _present(records: list[dict]) -> tuple[list[str], list[str]]:
    workloads = list(dict.fromkeys(r["workload"] for r in records))
    measured = {r["method"] for r in records}
    return workloads, [m for m in METHODS if m in measured]


def peak_table(records: list[dict], verdicts: list[dict]) -> str:
    cells, wrong = _by_key(records), disagreements(records)
    workloads, methods = _present(records)
    judged = {
        (v["goal"], v["workload"]): v for v in verdicts if v["method"] == "dualgen"
    }
    header = ["workload (MiB)"] + [LABELS[m] for m in methods]
    header += ["dualgen / native", "dualgen / primal", *GOALS]
    rows = []
    for workload in workloads:
        row = [workload]
        for method in methods:
            mark = " ≠" if (workload, method) in wrong else ""
            row.append(cell(cells.get((workload, method))) + mark)
        dualgen = cells.get((workload, "dualgen"))
        native, which = native_reference(cells, workload)
        for other, note in ((native, which), (cells.get((workload, "primal")), "")):
            ratio = _ratio("", workload, "dualgen", dualgen, other, 1.0)
            suffix = f" ({note})" if note and note != "native" else ""
            row.append(
                ratio_text(ratio.value) + suffix if ratio.value is not None else ""
            )
        for goal in GOALS:
            verdict = judged.get((goal, workload))
            row.append(Verdict(**verdict).cell() if verdict else "")
        rows.append(row)
    return _table(header, rows)


def time_table(records: list[dict]) -> str:
    cells = _by_key(records)
    workloads, methods = _present(records)
    header = ["workload (measured run)"] + [LABELS[m] for m in methods]
    rows = [
        [w] + [cell(cells.get((w, m)), "seconds") for m in methods] for w in workloads
    ]
    return _table(header, rows)


def summary(verdicts: list[dict]) -> list[str]:
    lines = []
    for method in DUALGEN_METHODS:
        mine = [Verdict(**v) for v in verdicts if v["method"] == method]
        judged = [v for v in mine if v.passed is not None]
        if not mine:
            continue
        met = sum(v.passed for v in judged)
        missed = [
            f"{v.workload} {v.goal[6:]} ({ratio_text(v.value)})"
            for v in judged
            if not v.passed
        ]
        line = f"- {LABELS[method]}: {met} of {len(judged)} goals met"
        lines.append(line + (f"; missed: {', '.join(missed)}" if missed else ""))
    return lines


def report(records: list[dict], verdicts: list[dict]) -> str:
    workloads, _ = _present(records)
    parts = [
        (
            "Peak resident memory above the inputs, MiB (goals judged for dualgen's "
            "default C++ kernels):"
        ),
        "",
        peak_table(records, verdicts),
        "",
        *summary(verdicts),
        "",
        "Time of the measured run:",
        "",
        time_table(records),
        "",
        "Workloads:",
        *(f"- {w}: {WORKLOADS[w].description}" for w in workloads),
    ]
    wrong = disagreements(records)
    if wrong:
        parts.append(
            "≠: the tangent disagrees with func.jvp's (or native's): "
            + ", ".join(f"{w} {m}" for w, m in sorted(wrong))
        )
    failures = [r for r in records if r["status"] != "ok"]
    if failures:
        parts += ["", "Raised, or not measured:"]
        parts += [
            f"- {r['workload']}, {LABELS[r['method']]}: {r['status']}: {r.get('reason', '')}"
            for r in failures
        ]
    return "\n".join(parts)
