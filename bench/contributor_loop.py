"""Benchmark: the contributor's loop, each step a fresh `dualgen` process.

In a temporary copy of derivatives.yaml and generated/: (a) generate with nothing
changed, (b) generate after inserting one entry, (c) validate that entry, (d)
generate --check, (e) generate into an empty directory (black on every chunk), and
(f) torchgen regenerating PyTorch's autograd code from the derivatives.yaml packaged
in the installed torch wheel, for scale. Wall time per step, median of 3 runs.

python bench/contributor_loop.py [--repeats N]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DUALGEN = [sys.executable, "-m", "dualgen.tools.cli"]

ENTRY_NAME = "special_spherical_bessel_j0"
ENTRY = """- name: special_spherical_bessel_j0(Tensor x) -> Tensor
  x: grad * ((x * x.cos() - x.sin()) / (x * x))
  result: auto_element_wise

"""
# The new entry goes in the middle of the spec, before this one.
BEFORE = "- name: special_entr(Tensor self) -> Tensor\n"

# What PyTorch's build runs (tools/setup_helpers/generate_code.py): the C++ autograd
# code, then its Python bindings, from the yaml files packaged with torchgen.
TORCHGEN = """
import sys
from pathlib import Path

import torchgen
from torchgen.packaged.autograd.gen_autograd import gen_autograd, gen_autograd_python
from torchgen.selective_build.selector import SelectiveBuilder

packaged = Path(torchgen.__file__).parent / "packaged"
native = str(packaged / "ATen/native/native_functions.yaml")
tags = str(packaged / "ATen/native/tags.yaml")
autograd = str(packaged / "autograd")
gen_autograd(native, tags, sys.argv[1], autograd, SelectiveBuilder.get_nop_selector())
gen_autograd_python(native, tags, sys.argv[1], autograd)
"""


@dataclass(frozen=True)
class Step:
    label: str
    command: str  # as a contributor types it
    seconds: tuple[float, ...]
    note: str = ""

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)


@dataclass(frozen=True)
class Workspace:
    """A spec and its output in a temporary directory; `reset` puts back the state
    each timed run starts from."""

    root: Path

    @property
    def spec(self) -> Path:
        return self.root / "derivatives.yaml"

    @property
    def out(self) -> Path:
        return self.root / "generated"

    def reset(self, spec: str, output: Path) -> None:
        self.spec.write_text(spec)
        shutil.rmtree(self.out, ignore_errors=True)
        shutil.copytree(output, self.out)


def run(args: list[str], cwd: Path) -> tuple[float, subprocess.CompletedProcess]:
    """Wall time of one process, start to exit."""
    start = time.perf_counter()
    done = subprocess.run(args, check=False, cwd=cwd, capture_output=True, text=True)
    return time.perf_counter() - start, done


def timed(
    args: list[str], cwd: Path, repeats: int, before=None
) -> tuple[tuple[float, ...], subprocess.CompletedProcess]:
    """Wall times of `repeats` runs, `before()` (untimed) ahead of each, and the last
    run; a failing run stops the benchmark with its output."""
    seconds = []
    for _ in range(repeats):
        if before is not None:
            before()
        elapsed, done = run(args, cwd)
        if done.returncode not in (0, 1) or "Traceback" in done.stderr:
            sys.exit(f"{' '.join(args)} failed:\n{done.stdout}{done.stderr}")
        seconds.append(elapsed)
    return tuple(seconds), done


def generate(ws: Workspace, *extra: str) -> list[str]:
    return [*DUALGEN, "generate", "--spec", str(ws.spec), "--out", str(ws.out), *extra]


def dualgen_steps(ws: Workspace, repeats: int) -> list[Step]:
    spec = (ROOT / "derivatives.yaml").read_text()
    assert BEFORE in spec and ENTRY_NAME not in spec
    edited = spec.replace(BEFORE, ENTRY + BEFORE, 1)
    committed = ROOT / "generated"
    checkout, first = timed(
        generate(ws, "-v"), ws.root, repeats, lambda: ws.reset(spec, committed)
    )
    steady = ws.root / "steady"  # the output for `spec`, as generate leaves it
    shutil.copytree(ws.out, steady)
    unchanged, _ = timed(generate(ws), ws.root, repeats)
    inserted, _ = timed(
        generate(ws), ws.root, repeats, lambda: ws.reset(edited, steady)
    )
    with_entry = {p.name: p.read_bytes() for p in ws.out.iterdir()}
    validate = [*DUALGEN, "validate", "--spec", str(ws.spec), "--ops", ENTRY_NAME]
    validated, verdict = timed([*validate, "--no-progress"], ws.root, repeats)
    checked, _ = timed(generate(ws, "--check"), ws.root, repeats)
    fresh = ws.root / "fresh"
    scratch, _ = timed(
        [*DUALGEN, "generate", "--spec", str(ws.spec), "--out", str(fresh)],
        ws.root,
        repeats,
        lambda: shutil.rmtree(fresh, ignore_errors=True),
    )
    same = with_entry == {p.name: p.read_bytes() for p in fresh.iterdir()}
    return [
        Step(
            "(0) first run in a checkout (generated/ as committed)",
            "dualgen generate",
            checkout,
            _blacked(first),
        ),
        Step("(a) nothing changed", "dualgen generate", unchanged),
        Step(f"(b) one entry inserted ({ENTRY_NAME})", "dualgen generate", inserted),
        Step(
            "(c) validate the new entry",
            f"dualgen validate --ops {ENTRY_NAME}",
            validated,
            (verdict.stdout.strip().splitlines() or [""])[-1],
        ),
        Step("(d) check", "dualgen generate --check", checked),
        Step(
            "(e) from scratch (empty output directory)",
            "dualgen generate --out EMPTY",
            scratch,
            "byte-identical to (b)" if same else "DIFFERS from (b)'s output",
        ),
    ]


def _blacked(done: subprocess.CompletedProcess) -> str:
    """`black ran on N of M chunks`, from generate -v (N is 0 when the committed
    output is current)."""
    lines = done.stderr.strip().splitlines()
    return lines[-1].split("; ")[-1] if lines and "black ran on" in lines[-1] else ""


def torchgen_step(root: Path, repeats: int) -> Step:
    """torchgen's run, or a row saying why it could not run (never a made-up time)."""
    out = root / "torchgen"
    seconds = []
    for _ in range(repeats):
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir()
        elapsed, done = run([sys.executable, "-c", TORCHGEN, str(out)], root)
        if done.returncode != 0:
            why = (done.stderr.strip().splitlines() or ["no output"])[-1]
            return Step("(f) torchgen, PyTorch's autograd code", "-", (), why)
        seconds.append(elapsed)
    files = sum(1 for p in out.iterdir())
    return Step(
        "(f) torchgen, PyTorch's autograd code",
        "gen_autograd + gen_autograd_python",
        tuple(seconds),
        f"{files} files from torchgen/packaged",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dualgen-loop-") as tmp:
        steps = dualgen_steps(Workspace(Path(tmp)), args.repeats)
        steps.append(torchgen_step(Path(tmp), args.repeats))
    print(f"median of {args.repeats} runs, wall time, a fresh process each\n")
    print("| step | command | median (s) | runs (s) | note |")
    print("|---|---|---|---|---|")
    for s in steps:
        median = f"{s.median:.2f}" if s.seconds else "did not run"
        runs = ", ".join(f"{x:.2f}" for x in s.seconds)
        print(f"| {s.label} | `{s.command}` | {median} | {runs} | {s.note} |")


if __name__ == "__main__":
    main()
