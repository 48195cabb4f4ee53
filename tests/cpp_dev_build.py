"""Build the C++ twins of some formulas modules alone, for working on them
before the whole extension builds: `DUALGEN_TWINS_DEV=nn,elementwise pytest
tests/cpp/test_twins_nn.py` (elementwise is always included: others use it)."""

from __future__ import annotations

import os
from pathlib import Path

from torch.utils import cpp_extension

ROOT = Path(__file__).resolve().parents[1]
CSRC = ROOT / "runtime" / "csrc"
FORMULAS = CSRC / "dualgen" / "formulas"


def build(modules: list[str]):
    modules = sorted(set(modules) | {"elementwise"})
    name = "dualgen_twins_" + "_".join(modules)
    build_dir = Path("/tmp") / name
    build_dir.mkdir(parents=True, exist_ok=True)
    main = build_dir / "main.cpp"
    calls = "\n".join(f"  dualgen::formulas::bind_{m}(f);" for m in modules)
    text = (
        '#include "dualgen/formulas/bindings.h"\n'
        "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {\n"
        '  auto f = m.def_submodule("formulas");\n'
        f"{calls}\n}}\n"
    )
    if not main.exists() or main.read_text() != text:
        main.write_text(text)
    sources = [str(main)]
    for m in modules:
        sources += [str(FORMULAS / f"{m}.cpp"), str(FORMULAS / f"{m}_bindings.cpp")]
    return cpp_extension.load(
        name=name,
        sources=sources,
        extra_include_paths=[str(CSRC)],
        extra_cflags=["-O1"],
        build_directory=str(build_dir),
        verbose=False,
    ).formulas


def dev_modules() -> list[str] | None:
    value = os.environ.get("DUALGEN_TWINS_DEV")
    return value.split(",") if value else None
