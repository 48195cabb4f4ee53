"""Benchmark: what `import dualgen` and the first dual op cost beyond `import torch`.

Each run is a fresh interpreter that imports torch, then times importing
dualgen.forward_ad and one `sin` on a dual tensor inside a level, then a second op.
Median of N runs (default 5), wall time.

python bench/startup.py [--repeats N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys

PROBE = """
import time
import torch
start = time.perf_counter()
import dualgen.forward_ad as fwAD
imported = time.perf_counter()
x = torch.randn(3)
with fwAD.dual_level():
    y = fwAD.make_dual(x, torch.ones(3)).sin()
    first = time.perf_counter()
    y.cos()
    second = time.perf_counter()
print(imported - start, first - start, second - first)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    repeats = parser.parse_args().repeats
    runs = []
    for _ in range(repeats):
        out = subprocess.run(
            [sys.executable, "-c", PROBE],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        ).stdout
        runs.append([float(v) for v in out.split()])
    labels = (
        "import dualgen.forward_ad",
        "import + first dual op (sin)",
        "second op (cos), same level",
    )
    print(f"beyond `import torch`, median of {repeats} fresh processes\n")
    print("| what | median |\n|---|---|")
    for i, label in enumerate(labels):
        value = statistics.median(r[i] for r in runs)
        shown = f"{value * 1e3:.2f} ms" if value < 0.01 else f"{value:.3f} s"
        print(f"| {label} | {shown} |")


if __name__ == "__main__":
    main()
