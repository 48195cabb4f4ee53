"""Benchmark: dualgen's runtime now against dualgen at an earlier git revision.

    python bench/against_revision.py af4b3b6 [--size tiny] [--processes 3] [--quick]

Exports the revision's runtime and generated kernels (`git archive`) into a
temporary directory laid out as the installed package, then runs
`bench/runtime_speed.py --json` alternately under that code and under the working
tree, in fresh processes, so both see the same machine load. Per case it prints
each side's dualgen / native ratio (the median over processes; native is timed in
the same process as the dualgen it divides) and the change. Machine times vary
between runs here, so the ratios are the figures to compare.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SPEED = ROOT / "bench" / "runtime_speed.py"


def export(revision: str, into: Path) -> None:
    """The revision's `runtime/` as `dualgen/`, its `generated/` inside it."""
    archive = into / "code.tar"
    with archive.open("wb") as out:
        subprocess.run(
            ["git", "archive", revision, "runtime", "generated"],
            cwd=ROOT,
            stdout=out,
            check=True,
        )
    with tarfile.open(archive) as tar:
        tar.extractall(into / "tree", filter="data")
    (into / "tree" / "runtime").rename(into / "dualgen")
    (into / "tree" / "generated").rename(into / "dualgen" / "generated")


def measure(pythonpath: str | None, extra: list[str]) -> dict[str, float]:
    """dualgen / native per case, from one fresh process."""
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    run = subprocess.run(
        [sys.executable, str(SPEED), "--json", *extra],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    times = json.loads(run.stdout.strip().splitlines()[-1])
    return {case: t["dualgen"] / t["native"] for case, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("revision", help="the git revision to compare with")
    parser.add_argument("--processes", type=int, default=3, help="runs per side")
    parser.add_argument("--size", choices=["tiny", "large"])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    extra = (["--size", args.size] if args.size else []) + (
        ["--quick"] if args.quick else []
    )
    before: list[dict[str, float]] = []
    after: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        export(args.revision, Path(tmp))
        for _ in range(args.processes):
            before.append(measure(tmp, extra))
            after.append(measure(None, extra))
    print(
        f"dualgen / native, median of {args.processes} processes a side "
        f"(runtime_speed.py {' '.join(extra) or '(full)'})\n"
    )
    print(f"| case | size | {args.revision} | now | now / {args.revision} |")
    print("|---|---|---|---|---|")
    for case in after[0]:
        old = statistics.median(run[case] for run in before)
        new = statistics.median(run[case] for run in after)
        name, size = case.rsplit(" | ", 1)
        print(f"| {name} | {size} | {old:.2f}x | {new:.2f}x | {new / old:.2f} |")


if __name__ == "__main__":
    main()
