"""Benchmark: `dualgen generate` wall time over the real spec and synthetic specs
of growing size (up to ~700 entries), to show the generator stays near-linear.

Synthetic entries use real aten overloads (so the torch schema checks run for
real): functional overloads returning one Tensor whose first argument is
`Tensor self`, each with a trivial backward and forward formula.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REPEATS = 3


def synthetic_entries() -> list[str]:
    import torch

    from dualgen.tools.spec.model import OpKind, TypeKind
    from dualgen.tools.spec.schema import SchemaSyntaxError, parse_schema

    entries = []
    for s in sorted(torch._C._jit_get_all_schemas(), key=str):
        text = str(s)
        if not text.startswith("aten::"):
            continue
        try:
            schema = parse_schema(text)
        except SchemaSyntaxError:
            continue
        args = schema.arguments
        if (
            schema.kind is not OpKind.FUNCTIONAL
            or len(schema.returns) != 1
            or schema.returns[0].type.kind is not TypeKind.TENSOR
            or not args
            or args[0].name != "self"
            or args[0].kind is not TypeKind.TENSOR
            or any(
                a.kind.is_tensor_like and a.kind is not TypeKind.TENSOR for a in args
            )
        ):
            continue
        others = [a.name for a in args[1:] if a.kind.is_tensor_like]
        lines = [f"- name: {schema}", "  self: grad * 2", "  result: self_t * 2"]
        if others:
            lines.append(f"  non_differentiable: [{', '.join(others)}]")
        entries.append("\n".join(lines))
    return entries


def time_generate(spec: Path) -> tuple[float, str]:
    best, summary = float("inf"), ""
    for _ in range(REPEATS):
        with tempfile.TemporaryDirectory() as out:
            start = time.perf_counter()
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "dualgen.tools.cli",
                    "generate",
                    "--spec",
                    str(spec),
                    "--out",
                    out,
                ],
                capture_output=True,
                text=True,
                check=True,
            )
            best = min(best, time.perf_counter() - start)
            summary = done.stdout.strip().split("(", 1)[-1].rstrip(")")
    return best, summary


def main() -> None:
    entries = synthetic_entries()
    print(f"{len(entries)} candidate synthetic entries; best of {REPEATS} runs each\n")
    print("| spec | entries, kernels | wall time (s) | ms per entry above baseline |")
    print("|---|---|---|---|")
    seconds, summary = time_generate(ROOT / "derivatives.yaml")
    print(f"| derivatives.yaml | {summary} | {seconds:.2f} | |")
    baseline = None
    with tempfile.TemporaryDirectory() as tmp:
        for count in (50, 175, 350, 700):
            if count > len(entries):
                break
            spec = Path(tmp) / f"synthetic_{count}.yaml"
            spec.write_text("\n\n".join(entries[:count]) + "\n")
            seconds, summary = time_generate(spec)
            if baseline is None:
                baseline = (count, seconds)
                per = ""
            else:
                per = f"{(seconds - baseline[1]) / (count - baseline[0]) * 1000:.1f}"
            print(f"| synthetic {count} | {summary} | {seconds:.2f} | {per} |")


if __name__ == "__main__":
    main()
