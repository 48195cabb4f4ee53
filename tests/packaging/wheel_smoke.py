"""What a user's first minutes with an installed dualgen do, run by
check_wheel.py from a directory outside the checkout, in a fresh environment
holding only the wheel and its dependencies. Exits non-zero at the first thing
that does not work; prints one line per check.

    python wheel_smoke.py [--expect-kernels cpp|python]
"""

from __future__ import annotations

import argparse
import importlib
import os
import subprocess
import sys
from pathlib import Path

PUBLIC_MODULES = (
    "dualgen",
    "dualgen.forward_ad",
    "dualgen.func",
    "dualgen.functional",
    "dualgen.fx",
    "dualgen.distributed",
    "dualgen.operators",
    "dualgen.taylor",
    "dualgen.collectives",
    "dualgen.harness",
    "dualgen.formulas",
    "dualgen.generated",
    "dualgen.tools.cli",
)


def snapshot(root: Path) -> dict[str, float]:
    """Every file under the installed package, with its modification time."""
    return {str(p): p.stat().st_mtime for p in root.rglob("*") if p.is_file()}


def check_imports() -> None:
    for name in PUBLIC_MODULES:
        importlib.import_module(name)
    import dualgen

    here = Path(dualgen.__file__).resolve()
    assert "site-packages" in here.parts, f"dualgen imported from {here}"
    print(f"ok: {len(PUBLIC_MODULES)} public modules import, from {here.parent}")


def check_first_order() -> None:
    import torch
    import torch.autograd.forward_ad as native

    import dualgen.forward_ad as fwAD

    x, t = torch.randn(4, 3, dtype=torch.float64), torch.randn(
        4, 3, dtype=torch.float64
    )

    def f(a):
        return (a.sin() * a).softmax(-1) @ a.T

    tangents = []
    for module in (fwAD, native):
        with module.dual_level():
            tangents.append(module.unpack_dual(f(module.make_dual(x, t))).tangent)
    torch.testing.assert_close(tangents[0], tangents[1])
    print("ok: a first-order JVP equals native's")


def check_nested() -> None:
    import torch

    import dualgen.forward_ad as fwAD

    x = torch.randn(5, dtype=torch.float64)
    u, v = torch.randn(5, dtype=torch.float64), torch.randn(5, dtype=torch.float64)

    def f(a):
        return torch.nn.functional.layer_norm(a, (5,)).sin()

    def inner(a):
        return torch.func.jvp(f, (a,), (u,))[1]

    expected = torch.func.jvp(inner, (x,), (v,))[1]
    with fwAD.dual_level():
        outer = fwAD.make_dual(x, v)
        with fwAD.dual_level():
            y = f(fwAD.make_dual(outer, u))
            inner_t = fwAD.unpack_dual(y).tangent
        got = fwAD.unpack_dual(inner_t).tangent
    # (torch.func's second order of layer_norm is wrong: compare differences.)
    h = 1e-6

    def first(a):
        return torch.func.jvp(f, (a,), (u,))[1]

    differences = (first(x + h * v) - first(x - h * v)) / (2 * h)
    torch.testing.assert_close(got, differences, rtol=1e-6, atol=1e-6)
    assert got.shape == expected.shape
    print("ok: a nested (second-order) JVP equals finite differences")


def check_custom_function() -> None:
    import torch

    import dualgen.forward_ad as fwAD

    class Cube(torch.autograd.Function):
        @staticmethod
        def forward(x):
            return x**3

        @staticmethod
        def setup_context(ctx, inputs, output):
            (ctx.x,) = inputs

        @staticmethod
        def backward(ctx, g):
            return 3 * ctx.x**2 * g

        @staticmethod
        def jvp(ctx, t):
            return 3 * ctx.x**2 * t

    x, t = torch.randn(3, dtype=torch.float64), torch.randn(3, dtype=torch.float64)
    with fwAD.dual_level():
        tangent = fwAD.unpack_dual(Cube.apply(fwAD.make_dual(x, t))).tangent
    assert tangent is not None, "a custom Function's jvp was ignored"
    torch.testing.assert_close(tangent, 3 * x**2 * t)
    print("ok: a custom Function's jvp gives the tangent")


def check_taylor() -> None:
    """Taylor mode from the wheel: the generated Taylor table is installed (a
    collapsed Laplacian needs it) and the series agree with written-out math."""
    import torch

    import dualgen
    import dualgen.operators

    x, v = torch.randn(5, dtype=torch.float64), torch.randn(5, dtype=torch.float64)
    _, (d1, d2) = dualgen.jet(torch.sin, (x,), ([v, None],))
    torch.testing.assert_close(d1, x.cos() * v)
    torch.testing.assert_close(d2, -x.sin() * v * v)
    w = torch.randn(5, 3, dtype=torch.float64)

    def f(y):
        return torch.tanh(y @ w).sum()

    _, laplacian = dualgen.operators.laplacian(f)(x)
    torch.testing.assert_close(laplacian, torch.func.hessian(f)(x).trace())
    print("ok: dualgen.jet and a collapsed Laplacian give the written-out values")


def check_collective_rule() -> None:
    import torch

    from dualgen.collectives.table import collective

    op = torch.ops._c10d_functional.all_reduce.default
    assert collective(op) is not None, "no rule for _c10d_functional.all_reduce"
    print("ok: a collective's rule is found")


def check_validate() -> None:
    command = [sys.executable, "-m", "dualgen", "validate", "--no-progress"]
    command += ["--ops", "mul.Tensor", "sin"]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    print(f"ok: dualgen validate --ops mul.Tensor sin: {done.stdout.strip()}")


def check_kernels(expected: str | None) -> None:
    import dualgen

    backend = dualgen.kernel_backend()
    assert expected is None or backend == expected, f"kernels: {backend}"
    print(f"ok: the {backend} kernels are in use")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--expect-kernels", choices=("cpp", "python"))
    args = parser.parse_args()
    assert not (Path.cwd() / "runtime").exists(), "run this outside the checkout"
    import dualgen

    installed = Path(dualgen.__file__).resolve().parent
    before = snapshot(installed.parent)
    check_imports()
    check_kernels(args.expect_kernels)
    check_first_order()
    check_nested()
    check_custom_function()
    check_taylor()
    check_collective_rule()
    check_validate()
    after = snapshot(installed.parent)
    written = sorted(set(after) - set(before)) + sorted(
        p for p in before if p in after and after[p] != before[p]
    )
    written = [p for p in written if "__pycache__" not in p]
    assert not written, f"written into site-packages at run time: {written[:5]}"
    print("ok: nothing written into site-packages")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "default")
    sys.exit(main())
