"""Benchmark: building the C++ extension (`dualgen build`), cold and after an edit.

In a fresh build directory: a cold build of everything (the hand-written runtime
and formula twins, and the generated kernel shards), a rebuild with nothing
changed, and a rebuild after one generated shard changed (as adding or editing one
spec entry changes one shard): the shard that was slowest to compile in the cold
build, the worst case of a spec edit. Then the cold build's translation units,
the slowest first, from ninja's log. The sources are copied to a temporary tree
first, so the checkout is never touched (and its build directory is not reused).
Compiles use every core (ninja).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

from dualgen import cpp


def timed(label: str) -> float:
    start = time.perf_counter()
    cpp.build()
    seconds = time.perf_counter() - start
    print(f"| {label} | {seconds:.1f} s |")
    return seconds


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="dualgen-build-") as root:
        root = Path(root)
        csrc, generated = root / "csrc", root / "generated"
        shutil.copytree(cpp.CSRC, csrc)
        shutil.copytree(cpp.generated_dir(), generated)
        os.environ["DUALGEN_BUILD_DIR"] = str(root / "build")
        cpp.CSRC = csrc
        cpp.generated_dir = lambda: generated
        print(f"{os.cpu_count()} cores\n")
        print("| build | time |")
        print("|---|---|")
        timed("cold (everything)")
        steps = _ninja_steps(root / "build")
        timed("nothing changed")
        slowest = next(name for name, _ in steps if name.startswith("jvp_"))
        shard = generated / f"{Path(slowest).stem}.cpp"
        shard.write_text(shard.read_text() + "// an edit\n")
        timed(f"one shard changed ({shard.name}, the slowest)")
        print("\n| cold build's step | seconds |\n|---|---|")
        for name, seconds in steps:
            print(f"| {name} | {seconds:.1f} |")


def _ninja_steps(directory: Path) -> list[tuple[str, float]]:
    """Each step of the last build (ninja's log: start and end in ms), slowest first."""
    steps = {}
    for line in (directory / ".ninja_log").read_text().splitlines()[1:]:
        start, end, _, name, _ = line.split("\t")
        steps[name] = (int(end) - int(start)) / 1000
    return sorted(steps.items(), key=lambda step: -step[1])


if __name__ == "__main__":
    main()
