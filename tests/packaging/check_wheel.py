"""`make check-wheel`: build dualgen's wheel, install it into a fresh virtual
environment (with the pinned torch of constraints.txt), and run
wheel_smoke.py there from a directory outside the checkout.

    python tests/packaging/check_wheel.py [--build-cpp] [--keep DIR]

The C++ kernels: by default the checkout's build is handed to the installed
package through DUALGEN_BUILD_DIR (the same sources give the same fingerprint, so
it loads only if the wheel ships exactly those sources); `--build-cpp` runs
`dualgen build` in the new environment instead, as a user would (a cold build).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SMOKE = Path(__file__).resolve().parent / "wheel_smoke.py"


def run(command: list[str], **kwargs) -> None:
    print("+", " ".join(str(c) for c in command), flush=True)
    subprocess.run(command, check=True, **kwargs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build-cpp", action="store_true")
    parser.add_argument("--keep", type=Path, help="work in DIR and keep it")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="dualgen-wheel-"))
    work.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    try:
        wheels = work / "wheels"
        # setuptools stages the package in build/lib and never deletes from it:
        # a file removed from the checkout would still ride in the wheel.
        for staged in ("lib", "bdist.linux-x86_64"):
            shutil.rmtree(ROOT / "build" / staged, ignore_errors=True)
        run(
            [
                sys.executable,
                "-m",
                "pip",
                "wheel",
                "-q",
                "--no-deps",
                "-w",
                wheels,
                ROOT,
            ]
        )
        (wheel,) = sorted(wheels.glob("dualgen-*.whl"))
        venv = work / "venv"
        run([sys.executable, "-m", "venv", venv])
        python = venv / "bin" / "python"
        run(
            [
                python,
                "-m",
                "pip",
                "install",
                "-qq",
                "-c",
                ROOT / "constraints.txt",
                wheel,
            ]
        )
        env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(work / "home")}
        env["XDG_CACHE_HOME"] = str(work / "cache")
        expect = "python"
        if args.build_cpp:
            run([venv / "bin" / "dualgen", "build"], env=env, cwd=work)
            expect = "cpp"
        elif (ROOT / "build" / "cpp" / "fingerprint").exists():
            env["DUALGEN_BUILD_DIR"] = str(ROOT / "build" / "cpp")
            expect = "cpp"
        outside = work / "elsewhere"
        outside.mkdir(exist_ok=True)
        shutil.copy(SMOKE, outside / SMOKE.name)
        command = [python, SMOKE.name, "--expect-kernels", expect]
        run(command, env=env, cwd=outside)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    print(f"check-wheel: ok in {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
