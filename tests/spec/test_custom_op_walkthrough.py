"""docs/custom_ops.md played word for word: the example library's code and spec
are the ones in examples/mylib, and every command the page runs (in a copy of
examples/mylib) prints what the page shows. When the CLI, an error message or the
example changes, this test says which block of the page is stale.
"""

from __future__ import annotations

import runpy
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from doc_pages import assert_missing_rule_as_shown, block, blur

import dualgen
from dualgen.tools.cli import main

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "custom_ops.md"
EXAMPLES = REPO / "examples"
PACKAGE = "mylib._derivatives"


def _block(language: str, marker: str) -> str:
    return block(PAGE.read_text(encoding="utf-8"), language, marker)


def _expected(block: str) -> str:
    return blur("".join(f"{l}\n" for l in block.splitlines() if l[:2] != "$ "))


def _commands(block: str) -> list[list[str]]:
    return [l[len("$ dualgen ") :].split() for l in block.splitlines() if l[:2] == "$ "]


@pytest.fixture
def examples_path(monkeypatch):
    """examples/ importable (mylib), sys.path restored afterwards; the example's
    kernels unloaded before and after."""
    monkeypatch.setattr(sys, "path", [str(EXAMPLES), *sys.path])
    dualgen.unload_kernels(PACKAGE)
    yield
    dualgen.unload_kernels(PACKAGE)


@pytest.fixture
def copy(tmp_path, monkeypatch, examples_path) -> Path:
    """A copy of examples/mylib without its generated package, as the working
    directory: the page's commands run there."""
    shutil.copytree(
        EXAMPLES / "mylib",
        tmp_path / "mylib",
        ignore=shutil.ignore_patterns("__pycache__", "_derivatives"),
    )
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _run(capsys, argv: list[str]) -> str:
    main(argv)
    out, err = capsys.readouterr()
    return blur(out + err)


def test_the_pages_code_and_spec_are_the_examples():
    ops = (EXAMPLES / "mylib" / "ops.py").read_text()
    assert _block("python", '@torch.library.custom_op("mylib::softclip"') in ops
    spec = (EXAMPLES / "mylib" / "derivatives.yaml").read_text()
    assert _block("yaml", "- name: mylib::softclip(") in spec
    registry = (EXAMPLES / "mylib" / "_derivatives" / "registry.py").read_text()
    assert _block("python", "KERNELS[torch.ops.mylib.softclip.default]") in registry


def test_the_missing_rule_prints_the_stub_the_page_shows(tmp_path, examples_path):
    example = tmp_path / "ex_missing.py"
    example.write_text(_block("python", "fwAD.make_dual(x, torch.ones(3, 4))"))
    assert_missing_rule_as_shown(example, _block("", "NotImplementedError"))


def test_without_import_the_op_is_unknown(copy):
    """In a fresh process: in this one, mylib is registered already."""
    block = _block("", "nothing registers operators")
    (argv,) = _commands(block)
    done = subprocess.run(
        [sys.executable, "-m", "dualgen.tools.cli", *argv],
        capture_output=True,
        text=True,
        cwd=copy,
        check=False,
    )
    assert done.returncode == 1
    assert done.stdout + done.stderr == _expected(block)


def test_a_schema_that_differs_gives_the_error_the_page_shows(copy, capsys):
    spec = copy / "mylib" / "derivatives.yaml"
    spec.write_text(spec.read_text().replace("limit=1.)", "limit=1.0)", 1))
    block = _block("", "schema does not match torch")
    (argv,) = _commands(block)
    assert _run(capsys, argv) == _expected(block)


def test_generate_check_and_validate_print_what_the_page_shows(copy, capsys):
    for marker in ("written (", "kernels: 1 pass"):
        block = _block("", marker)
        got = "".join(_run(capsys, argv) for argv in _commands(block))
        assert got == _expected(block), marker
    assert not (copy / "mylib" / "_derivatives" / "cpp").exists()


def test_loading_and_using_prints_what_the_page_shows(tmp_path, capsys, examples_path):
    example = tmp_path / "ex_use.py"
    example.write_text(_block("python", 'dualgen.load_kernels("mylib._derivatives")'))
    torch.manual_seed(0)
    runpy.run_path(str(example))
    assert capsys.readouterr().out == "True\nTrue\n"
    assert _block("", "True") == "True\nTrue\n"
