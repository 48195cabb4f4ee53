"""`make fuzz`: the differential fuzzer for as long as asked, with a summary by cause.

    python -m tests.fuzz.run --seconds 600 --report reports/fuzz.md
    python -m tests.fuzz.run --examples 5000
    python -m tests.fuzz.run --weight linalg=0 --weight mixed_leaf=3

Runs hypothesis in batches (fresh random seeds, flat and nested programs in turn)
with the test suite's strategies and judges. A failing batch is shrunk by
hypothesis and its reproducer goes into the report; the run goes on. Exit status 1
if anything counted against dualgen or was unrecognised.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import given, settings

from .generate import DEFAULT_WEIGHTS, FUZZ_PROFILE, Weights, nested_programs, programs
from .judge import AGREE, DUALGEN_WRONG, UNRECOGNISED, Verdict, check, judge
from .native_defects import DEFECTS
from .nested import judge_nested

BATCH = 50
# Of every four batches, one is of nested programs (they cost about twice as much).
KINDS = ("flat", "flat", "flat", "nested")
LONG_RUN = settings(FUZZ_PROFILE, max_examples=BATCH)
PROGRESS_EVERY = 40  # batches


@dataclass
class Tally:
    """What a run saw. Counting stops within a batch at its first failure: what
    follows is hypothesis shrinking it, which reruns variants of one program."""

    programs: Counter = field(default_factory=Counter)  # by kind
    shapes: Counter = field(default_factory=Counter)  # by generator shape
    steps: int = 0
    outcomes: Counter = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)  # shrunk reproducers
    counting: bool = True

    def record(self, kind: str, verdict: Verdict) -> None:
        if self.counting:
            self.programs[kind] += 1
            self.shapes.update(verdict.program.kinds)
            self.steps += verdict.steps_compared
            self.outcomes[verdict.outcome] += 1
            self.counting = verdict.ok


def run_batch(kind: str, tally: Tally, weights: Weights = DEFAULT_WEIGHTS) -> None:
    """One hypothesis run of BATCH programs; a failure's shrunk report is kept."""
    strategy, judged = {
        "flat": (programs(weights=weights), judge),
        "nested": (nested_programs(weights=weights), judge_nested),
    }[kind]

    @LONG_RUN
    @given(strategy)
    def batch(program):
        verdict = judged(program)
        tally.record(kind, verdict)
        check(verdict)

    tally.counting = True
    try:
        batch()
    except AssertionError as failure:
        tally.failures.append(f"{kind}: {failure}")
        print(f"failure ({kind}):\n{failure}", flush=True)  # a long run's news
    except Exception as crash:  # noqa: BLE001 - the harness itself: report, go on
        tally.failures.append(f"{kind}: the fuzzer crashed: {crash!r}")


def progress(tally: Tally, seconds: float) -> str:
    """One line: how far a run is."""
    return (
        f"{seconds:.0f} s: {sum(tally.programs.values())} programs, "
        f"{tally.steps} steps, {tally.outcomes[DUALGEN_WRONG]} dualgen wrong, "
        f"{tally.outcomes[UNRECOGNISED]} unrecognised, {len(tally.failures)} failures"
    )


def summary(tally: Tally, seconds: float) -> str:
    """The report: totals, outcomes by cause, reproducers of failures."""
    total = sum(tally.programs.values())
    lines = [
        "# Fuzz run",
        "",
        f"- time: {seconds:.0f} s",
        (
            f"- programs run: {total} ({tally.programs['flat']} flat, "
            f"{tally.programs['nested']} nested, two levels)"
        ),
        f"- steps compared: {tally.steps}",
        f"- agreeing programs: {tally.outcomes[AGREE]}",
        f"- dualgen wrong: {tally.outcomes[DUALGEN_WRONG]} (must be 0)",
        f"- unrecognised disagreements: {tally.outcomes[UNRECOGNISED]} (must be 0)",
        "",
        "## Disagreements explained by native defects",
        "",
        "| cause | programs | shared by dualgen |",
        "|---|---|---|",
    ]
    for defect in DEFECTS:
        shared = "yes (on purpose)" if defect.shared else "no (dualgen right)"
        lines.append(f"| {defect.name} | {tally.outcomes[defect.name]} | {shared} |")
    lines += ["", "## Programs by generator shape", "", "| shape | programs |"]
    lines.append("|---|---|")
    for shape, count in sorted(tally.shapes.items()):
        lines.append(f"| {shape} | {count} |")
    if tally.failures:
        lines += ["", "## Failures (shrunk)", ""]
        for failure in tally.failures:
            lines += ["```", failure.strip(), "```", ""]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=None)
    parser.add_argument("--examples", type=int, default=None)
    parser.add_argument("--report", type=Path, default=Path("reports/fuzz.md"))
    parser.add_argument(
        "--weight",
        action="append",
        default=[],
        metavar="NAME=N",
        help="a vocabulary's weight (generate.Weights; 0 turns a shape off)",
    )
    args = parser.parse_args(argv)
    weights = Weights.parse(args.weight)
    if args.seconds is None and args.examples is None:
        args.seconds = 300.0
    tally, start, k = Tally(), time.monotonic(), 0
    while True:
        elapsed = time.monotonic() - start
        if args.seconds is not None and elapsed >= args.seconds:
            break
        if args.examples is not None and sum(tally.programs.values()) >= args.examples:
            break
        run_batch(KINDS[k % len(KINDS)], tally, weights)
        k += 1
        if k % PROGRESS_EVERY == 0:  # a long run says how far it is
            print(progress(tally, time.monotonic() - start), flush=True)
    report = summary(tally, time.monotonic() - start)
    args.report.parent.mkdir(parents=True, exist_ok=True)
    args.report.write_text(report)
    print(report)
    return 1 if tally.failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
