"""The real-model suite as a table: which systems give a correct JVP at the
defaults (dualgen, native forward AD, torch.func.jvp), why the others fail, and
dualgen's time against native's.

    python -m tests.models.table [--families gpt2,bert] [--rounds 7]

Each model in eval mode, float32, with tangents on its inputs and, separately, on
every parameter. A system passes when it runs and agrees with the reference of
the test suite (native at the defaults, else native with attention by its
definition, else float64 finite differences). Times: median over interleaved
rounds of one JVP of the prepared model; where native fails at the defaults, its
time with attention by its definition (marked *).
"""

from __future__ import annotations

import argparse
import re
import statistics
import time
from contextlib import nullcontext
from dataclasses import dataclass, field

import torch

from .check import (
    AGAINST_FD,
    SAME_DTYPE,
    Case,
    by_definition,
    error_against_fd,
    jvp,
    prepare,
    reference,
    relative_error,
    run,
)
from .families import FAMILIES, HAS_TRANSFORMERS

SYSTEMS = ("dualgen", "native", "func.jvp")


def reason(error: str) -> str:
    """A failure in a few words: the op without a rule, or the error's kind."""
    op = re.search(r"forward AD with (?:aten::)?(\w+)", error)
    if op:
        return f"no rule: `{op.group(1)}`"
    if "custom autograd.Function" in error or "autograd.Function" in error:
        return "custom Function without jvp"
    kind, _, message = error.partition(": ")
    return f"{kind}: {message[:60]}"


def verdict(case: Case, result, ref_name: str, ref) -> str:
    if result.error is not None:
        return reason(result.error)
    if ref.error is None:
        ok = relative_error(result.tangent, ref.tangent) <= SAME_DTYPE[case.dtype]
    else:
        ok = error_against_fd(case, result.tangent) <= AGAINST_FD
    return "✓" if ok else "wrong"


@dataclass
class Group:
    """A group's models, how many checks each system passes, dualgen's ratios."""

    models: set = field(default_factory=set)
    checks: int = 0
    passed: list = field(default_factory=lambda: [0] * len(SYSTEMS))
    ratios: list = field(default_factory=list)

    def add(self, model: str, cells: list[str], ratio: float | None) -> None:
        self.models.add(model)
        self.checks += 1
        self.passed = [n + (c == "✓") for n, c in zip(self.passed, cells)]
        if ratio is not None:
            self.ratios.append(ratio)


def print_groups(groups: dict[str, Group]) -> None:
    """The table by group (the README's): checks passed per system, median ratio."""
    header = " | ".join(SYSTEMS)
    print(f"\n| models | checks | {header} | time, dualgen / native (median) |")
    print("|---|---|" + "---|" * len(SYSTEMS) + "---|")
    total = Group()
    for name, group in groups.items():
        _print_group(f"{name}: {', '.join(sorted(group.models))}", group)
        total.models |= group.models
        total.checks += group.checks
        total.passed = [a + b for a, b in zip(total.passed, group.passed)]
        total.ratios += group.ratios
    _print_group(f"**total** ({len(total.models)} models)", total)


def _print_group(label: str, group: Group) -> None:
    passed = " | ".join(f"{n}/{group.checks}" for n in group.passed)
    median = f"{statistics.median(group.ratios):.2f}x" if group.ratios else ""
    print(f"| {label} | {group.checks} | {passed} | {median} |")


def timing(case: Case, rounds: int) -> tuple[float, float, bool] | None:
    """Median seconds of one JVP: dualgen's and native's (by definition where
    native fails at the defaults), interleaved."""
    prepared = {
        s: prepare(case.family, case.mode, case.dtype) for s in ("dualgen", "native")
    }
    by_def = False
    try:
        jvp("native", case, prepared["native"])
    except Exception:  # noqa: BLE001
        by_def = True
    times = {"dualgen": [], "native": []}
    try:
        for _ in range(rounds):
            for system, seconds in times.items():
                context = (
                    by_definition() if system == "native" and by_def else nullcontext()
                )
                start = time.perf_counter()
                with context:
                    jvp(system, case, prepared[system])
                seconds.append(time.perf_counter() - start)
    except Exception:  # noqa: BLE001 - no time without both running
        return None
    return (
        statistics.median(times["dualgen"]),
        statistics.median(times["native"]),
        by_def,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--families", help="comma-separated names (default: all)")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    names = set(args.families.split(",")) if args.families else None
    torch.set_num_threads(2)
    print(
        "| model | group | tangents on | dualgen | native | func.jvp | time, dualgen / native |"
    )
    print("|---|---|---|---|---|---|---|")
    ratios = []
    groups: dict[str, Group] = {}
    for family in FAMILIES:
        if names and family.name not in names:
            continue
        if family.needs_transformers and not HAS_TRANSFORMERS:
            continue
        for on in family.on:
            case = Case(family, "eval", torch.float32, on)
            ref_name, ref = reference(case)
            cells = [verdict(case, run(case, s), ref_name, ref) for s in SYSTEMS]
            timed = timing(case, args.rounds) if cells[0] == "✓" else None
            if timed:
                ours, theirs, by_def = timed
                ratios.append(ours / theirs)
                ratio = f"{ours / theirs:.2f}x" + (" *" if by_def else "")
            else:
                ratio = ""
            row = " | ".join([family.name, family.group, on, *cells, ratio])
            print(f"| {row} |", flush=True)
            group = groups.setdefault(family.group, Group())
            group.add(family.name, cells, ours / theirs if timed else None)
    if groups:
        print_groups(groups)
    if ratios:
        print(
            f"\nmedian time ratio {statistics.median(ratios):.2f}x, "
            f"slowest {max(ratios):.2f}x over {len(ratios)} checks "
            "(* native timed with attention by its definition)"
        )


if __name__ == "__main__":
    main()
