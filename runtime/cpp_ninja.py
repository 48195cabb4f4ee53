"""The C++ extension's build graph, written as a ninja file.

Reads the list of sources (cpp.sources()) and the torch installed; produces
build.ninja in the build directory, with the small generated files it names
(a precompiled-header stub, the unity sources). What makes a cold build fast on
two cores (measured: docs/benchmarks.md#c-build, `python bench/cpp_build.py`):

- **One precompiled header for ATen** (`<ATen/ATen.h>`, about 8 s of every
  translation unit that includes it): the generated kernel shards and the
  formula helpers compile against it, so a shard edited by one spec entry
  recompiles in seconds.
- **Unity translation units for the hand-written sources**: the files that
  include torch's Python bindings (pybind11 and torch's Python headers: about
  20 s of headers each) compile as one unit rather than twenty, those that need
  only ATen as one. A source's unit follows from what it includes (its own `#include`s
  and those of dualgen's headers it includes), not from a list.

The flags are torch's for a CPU extension (`torch.utils.cpp_extension`, whose
include paths and library names this reads), so the library matches the torch it
loads into; CXX chooses the compiler as it does for torch.
"""

from __future__ import annotations

import os
import re
import shlex
import sysconfig
from dataclasses import dataclass
from functools import cache
from pathlib import Path

NAME = "dualgen_cpp"
PCH = "aten_pch.h"
PCH_HEADERS = ("ATen/ATen.h", "ATen/core/ivalue.h")
PYTHON_UNITS = 1  # one core compiles them while the other does everything else
# The hot path (the Python-facing units) is optimised fully; the kernels and
# formula helpers are glue between ATen calls, where -O1 runs as fast and halves
# the compile time of the largest kernels (one RNN kernel is 570 lines).
HOT_PATH_OPTIMIZATION = "-O2"
KERNEL_OPTIMIZATION = "-O1"
_PYTHON_FACING = re.compile(r"^(torch/|pybind11/|Python\.h)|Python|PyInterpreter")
_INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.MULTILINE)


@dataclass(frozen=True)
class Unit:
    """One translation unit: an object file built from one or more sources."""

    name: str
    sources: tuple[Path, ...]
    precompiled: bool  # compiled against the ATen precompiled header


def python_facing(source: Path, include_root: Path) -> bool:
    """Whether a source includes (itself or through dualgen's own headers under
    include_root) a header of torch's Python bindings or pybind11."""
    return any(_PYTHON_FACING.search(name) for name in _includes(source, include_root))


def _includes(source: Path, include_root: Path) -> frozenset[str]:
    seen: set[str] = set()
    pending = [source]
    while pending:
        for name in _INCLUDE.findall(pending.pop().read_text()):
            if name in seen:
                continue
            seen.add(name)
            local = include_root / name
            if name.startswith("dualgen/") and local.exists():
                pending.append(local)
    return frozenset(seen)


def units(sources: list[Path], generated: list[Path], include_root: Path) -> list[Unit]:
    """The translation units, the slowest first (ninja starts them in order).
    Generated shards stay one unit each (a spec edit recompiles one shard);
    hand-written sources are grouped by what they include."""
    shards = [s for s in sources if s in generated]
    hand_written = [s for s in sources if s not in generated]
    facing = [s for s in hand_written if python_facing(s, include_root)]
    aten_only = [s for s in hand_written if s not in facing]
    groups = _balanced(facing, PYTHON_UNITS)
    result = [Unit(f"python_{i}", tuple(g), False) for i, g in enumerate(groups) if g]
    if aten_only:
        result.append(Unit("aten", tuple(aten_only), True))
    result += [Unit(s.stem, (s,), True) for s in shards]
    # a header read by one unit only costs its own compile
    if sum(unit.precompiled for unit in result) < 2:
        result = [Unit(unit.name, unit.sources, False) for unit in result]
    return result


def _balanced(sources: list[Path], count: int) -> list[list[Path]]:
    """Sources in `count` groups of about equal size (largest first, each to the
    smallest group so far); sorted within a group, so the grouping is stable."""
    groups: list[list[Path]] = [[] for _ in range(count)]
    sizes = [0] * count
    for source in sorted(sources, key=lambda s: (-s.stat().st_size, str(s))):
        smallest = sizes.index(min(sizes))
        groups[smallest].append(source)
        sizes[smallest] += source.stat().st_size
    return [sorted(group) for group in groups]


@cache
def compiler() -> str:
    return os.environ.get("CXX", "c++")


def cflags(include_root: Path, extra: tuple[str, ...]) -> list[str]:
    """torch's compile flags for a CPU extension named NAME, then ours."""
    from torch.utils import cpp_extension

    system = list(cpp_extension.include_paths("cpu"))
    python_include = sysconfig.get_path("include", scheme="posix_prefix")
    if python_include:
        system.append(python_include)
    return [
        f"-DTORCH_EXTENSION_NAME={NAME}",
        "-DTORCH_API_INCLUDE_EXTENSION_H",
        f"-I{shlex.quote(str(include_root))}",
        *(f"-isystem {shlex.quote(path)}" for path in system),
        "-fPIC",
        *extra,
    ]


def ldflags() -> list[str]:
    """torch's link flags for a CPU extension."""
    from torch.utils import cpp_extension

    library_dir = shlex.quote(cpp_extension.TORCH_LIB_PATH)
    return [
        "-shared",
        f"-L{library_dir}",
        "-lc10",
        "-ltorch_cpu",
        "-ltorch",
        "-ltorch_python",
    ]


def write(directory: Path, all_units: list[Unit], flags: list[str]) -> Path:
    """build.ninja (and the files it compiles that are not sources) in
    `directory`; files are rewritten only when their text changes, so ninja
    rebuilds only what changed."""
    pch_header = directory / "pch" / PCH
    _write_if_changed(pch_header, "".join(f"#include <{h}>\n" for h in PCH_HEADERS))
    lines = [
        "ninja_required_version = 1.3",
        f"cxx = {compiler()}",
        f"cflags = {' '.join(flags)}",
        f"ldflags = {' '.join(ldflags())}",
        "",
        "rule pch",
        f"  command = $cxx -MMD -MF $out.d $cflags {KERNEL_OPTIMIZATION} -x c++-header -c $in -o $out",
        "  depfile = $out.d",
        "  deps = gcc",
        "rule compile",
        "  command = $cxx -MMD -MF $out.d $cflags $unit_flags -c $in -o $out",
        "  depfile = $out.d",
        "  deps = gcc",
        "rule link",
        "  command = $cxx $in $ldflags -o $out",
        "",
    ]
    if any(unit.precompiled for unit in all_units):
        lines.append(f"build pch/{PCH}.gch: pch {_ninja_path(pch_header)}")
    objects = []
    for unit in all_units:
        source = _unit_source(directory, unit)
        line = f"build {unit.name}.o: compile {_ninja_path(source)}"
        if unit.precompiled:
            line += f" | pch/{PCH}.gch\n  unit_flags = {KERNEL_OPTIMIZATION} "
            line += f"-include {shlex.quote(str(pch_header))} -Winvalid-pch"
        else:
            line += f"\n  unit_flags = {HOT_PATH_OPTIMIZATION}"
        lines.append(line)
        objects.append(f"{unit.name}.o")
    lines += [f"build {NAME}.so: link {' '.join(objects)}", f"default {NAME}.so", ""]
    ninja_file = directory / "build.ninja"
    _write_if_changed(ninja_file, "\n".join(lines))
    return ninja_file


def _unit_source(directory: Path, unit: Unit) -> Path:
    """The file a unit compiles: its one source, or a unity file including each."""
    if len(unit.sources) == 1:
        return unit.sources[0]
    unity = directory / "unity" / f"{unit.name}.cpp"
    text = (
        "// Generated by dualgen.cpp_ninja: one translation unit of several sources.\n"
    )
    text += "".join(f'#include "{source}"\n' for source in unit.sources)
    _write_if_changed(unity, text)
    return unity


def _ninja_path(path: Path) -> str:
    return str(path).replace("$", "$$").replace(" ", "$ ").replace(":", "$:")


def _write_if_changed(path: Path, text: str) -> None:
    if path.exists() and path.read_text() == text:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(text)
    temporary.replace(path)
