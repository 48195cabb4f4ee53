"""dualgen's C++ extension (`dualgen_cpp`): its sources, its build, loading it.

The extension holds the generated C++ kernels (generated/cpp/), the C++ twins of
the formulas helpers and the per-op hot path (runtime/csrc/). `build()` compiles
it with ninja (the graph cpp_ninja writes: changed sources only, both cores); it
records a fingerprint of every source, header, compiler flag and the torch
version beside the library, and `extension()` loads the library only while that
fingerprint still matches. `make install`, `make generate` and `make test` build
it (`dualgen build`); an installed package builds into a per-user cache, one
directory per torch release (docs/cpp_build.md), never into site-packages.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import os
import re
import subprocess
import sys
from functools import cache
from pathlib import Path

import torch

from dualgen import cpp_ninja

NAME = cpp_ninja.NAME
PACKAGE = Path(__file__).resolve().parent
CSRC = PACKAGE / "csrc"
FLAGS = ("-std=c++20", "-Wno-unused-variable", "-Wno-unused-but-set-variable")


class BuildError(RuntimeError):
    """The extension did not build: the compiler's first error, and where."""


class StaleExtension(RuntimeError):
    """The built extension is older than its sources."""


def generated_dir() -> Path:
    import dualgen.generated

    return Path(dualgen.generated.__file__).resolve().parent / "cpp"


def in_checkout() -> bool:
    """Whether dualgen runs from a checkout (the package is the `runtime/`
    folder beside pyproject.toml), not from an installed package."""
    return PACKAGE.name == "runtime" and (PACKAGE.parent / "pyproject.toml").exists()


def build_dir() -> Path:
    """Where objects and the library go: DUALGEN_BUILD_DIR; in a checkout,
    build/cpp at its root; installed, a per-user cache directory per torch
    release ($XDG_CACHE_HOME or ~/.cache, then dualgen/cpp/torch-<version>), which
    outlives upgrades of dualgen (the fingerprint decides whether a library there
    is current) and never serves a library built for another torch."""
    configured = os.environ.get("DUALGEN_BUILD_DIR")
    if configured:
        return Path(configured)
    if in_checkout():
        return PACKAGE.parent / "build" / "cpp"
    cache_home = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache_home) / "dualgen" / "cpp" / f"torch-{torch.__version__}"


def sources() -> list[Path]:
    return sorted(CSRC.rglob("*.cpp")) + _generated_sources()


def _generated_sources() -> list[Path]:
    return sorted(generated_dir().glob("*.cpp"))


def _headers() -> list[Path]:
    return sorted(CSRC.rglob("*.h")) + sorted(generated_dir().glob("*.h"))


def fingerprint() -> str:
    """What the library was built from: every source and header, the flags,
    and the torch it links against."""
    digest = hashlib.sha256()
    digest.update(
        f"{torch.__version__}\n{cpp_ninja.compiler()} {' '.join(FLAGS)}\n".encode()
    )
    for path in sources() + _headers():
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _library() -> Path:
    return build_dir() / f"{NAME}.so"


def _stamp() -> Path:
    return build_dir() / "fingerprint"


def state() -> str:
    """'built', 'stale' (sources changed since) or 'missing'."""
    if not _library().exists() or not _stamp().exists():
        return "missing"
    return "built" if _stamp().read_text() == fingerprint() else "stale"


def build(verbose: bool = False, progress: bool = False) -> None:
    """Compile what changed (ninja, the graph of cpp_ninja) into build_dir();
    raise BuildError with the compiler's first error. `progress`: a progress bar
    of the compile steps on stderr; `verbose`: ninja's commands and output. The
    library is loaded by `extension()`, not here: one process may build more than
    once."""
    directory = build_dir()
    directory.mkdir(parents=True, exist_ok=True)
    expected = fingerprint()
    _stamp().unlink(missing_ok=True)  # until this build succeeds, nothing is built
    all_units = cpp_ninja.units(sources(), _generated_sources(), CSRC)
    # The generated headers (the twins' declarations) sit beside the kernels.
    flags = FLAGS + (f"-I{generated_dir()}",)
    cpp_ninja.write(directory, all_units, cpp_ninja.cflags(CSRC, flags))
    try:
        _run_ninja(directory, verbose=verbose, progress=progress and not verbose)
    except (OSError, subprocess.CalledProcessError) as exc:
        raise BuildError(_first_error(exc)) from None
    _stamp().write_text(expected)


_NINJA_STEP = re.compile(r"^\[(\d+)/(\d+)\]")


def _run_ninja(directory: Path, verbose: bool, progress: bool) -> None:
    """ninja in `directory` on every core; its `[done/total]` steps as a progress
    bar when asked; its output kept for the error of a failed build."""
    command = ["ninja", "-j", str(os.cpu_count() or 1)] + (["-v"] if verbose else [])
    env = {**os.environ, "NINJA_STATUS": "[%f/%t] "}
    lines, bar = [], None  # (no bar when there is nothing to compile)
    with subprocess.Popen(
        command,
        cwd=directory,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    ) as ninja:
        for line in ninja.stdout:
            lines.append(line)
            if verbose:
                sys.stderr.write(line)
            step = _NINJA_STEP.match(line)
            if step and progress:
                if bar is None:
                    from tqdm import tqdm

                    bar = tqdm(
                        desc=f"building {NAME}",
                        total=int(step.group(2)),
                        unit="step",
                        file=sys.stderr,
                    )
                bar.update(int(step.group(1)) - bar.n)
    if bar is not None:
        bar.close()
    if ninja.returncode != 0:
        raise subprocess.CalledProcessError(
            ninja.returncode, command, output="".join(lines)
        )


def _first_error(exc: Exception) -> str:
    """The first compiler error line (with its file and line) of a failed build."""
    text = str(exc)
    output = getattr(exc, "output", None) or ""
    for line in (output + "\n" + text).splitlines():
        if ": error:" in line or "fatal error" in line:
            return f"building {NAME} failed: {line.strip()}"
    return f"building {NAME} failed: {text.strip().splitlines()[-1] if text.strip() else exc!r}"


@cache
def extension():
    """The built extension module; StaleExtension if its sources changed since
    the build, FileNotFoundError if it was never built."""
    status = state()
    if status == "missing":
        raise FileNotFoundError(
            f"dualgen's C++ extension is not built for torch {torch.__version__}: "
            "run `dualgen build`"
        )
    if status == "stale":
        raise StaleExtension(
            "dualgen's C++ extension is older than its sources: run `dualgen build`"
        )
    if NAME in sys.modules:
        return sys.modules[NAME]
    loader = importlib.machinery.ExtensionFileLoader(NAME, str(_library()))
    spec = importlib.util.spec_from_file_location(NAME, _library(), loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    sys.modules[NAME] = module
    return module
