"""The working-directory guard of `dualgen validate` (tools/validate/sandbox_dir.py):
`empty_cwd` names what its body writes, passes when nothing is written, and
restores the working directory on exceptions; validate runs each kernel in a
fresh empty directory and fails a kernel that writes into it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from validate_checks import (
    CHECKS,
    DTYPES,
    HARNESS,
    REPO,
    SIN,
    SIN_BW,
    entry,
    failures,
    line_of,
    validate,
)

from dualgen.tools.validate.sandbox_dir import FilesWritten, empty_cwd

# ---------------------------------------------------------------- the cwd guard


def test_guard_names_what_the_body_writes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FilesWritten) as caught, empty_cwd() as inside:
        assert Path.cwd() == inside and inside != tmp_path
        Path("leak.txt").write_text("x")
        Path("sub").mkdir()
        Path("sub/deep.bin").write_bytes(b"x")
    assert caught.value.names == ["leak.txt", "sub", str(Path("sub/deep.bin"))]
    assert "leak.txt" in str(caught.value) and "deep.bin" in str(caught.value)
    assert Path.cwd() == tmp_path
    assert not inside.exists()  # removed, whatever was in it
    assert list(tmp_path.iterdir()) == []


def test_guard_passes_when_nothing_is_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with empty_cwd() as inside:
        assert Path.cwd() == inside
        torch.rand(3).sin()
    assert Path.cwd() == tmp_path
    assert not inside.exists()


def test_guard_restores_the_cwd_on_exceptions(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(KeyError), empty_cwd():
        raise KeyError("boom")
    assert Path.cwd() == tmp_path
    # A body that moves elsewhere and raises: the old directory still comes back.
    with pytest.raises(ValueError), empty_cwd():
        os.chdir(REPO)
        raise ValueError
    assert Path.cwd() == tmp_path
    # Writing and raising: the write is reported, the exception chained.
    with pytest.raises(FilesWritten) as caught, empty_cwd():
        Path("partial").write_text("x")
        raise RuntimeError("and then it crashed")
    assert caught.value.names == ["partial"]
    assert isinstance(caught.value.__context__, RuntimeError)
    assert Path.cwd() == tmp_path


def test_validate_runs_kernels_in_an_empty_cwd_and_writes_nothing(
    tmp_path, monkeypatch, capsys
):
    from dualgen.tools import validate as validate_module

    seen = []
    original = validate_module.validate_kernel

    def recording(*args):
        seen.append(Path.cwd())
        assert list(Path.cwd().iterdir()) == []
        return original(*args)

    monkeypatch.setattr(validate_module, "validate_kernel", recording)
    spec = HARNESS + entry(SIN, SIN_BW, "result: auto_element_wise")
    rc = validate(tmp_path, monkeypatch, spec, "--ops", "sin", "sin_")
    out, err = capsys.readouterr()
    assert rc == 0, out + err
    assert "FAIL" not in out
    assert len(seen) == 2 and len(set(seen)) == 2  # a fresh directory per kernel
    assert all(d != tmp_path and not d.exists() for d in seen)
    assert Path.cwd() == tmp_path
    assert [p.name for p in tmp_path.iterdir()] == ["derivatives.yaml"]


def test_validate_fails_a_kernel_that_writes_into_its_cwd(
    tmp_path, monkeypatch, capsys
):
    from dualgen.tools import validate as validate_module

    original = validate_module.validate_kernel

    def writing(entry, op, info, samples):
        report = original(entry, op, info, samples)
        if info.name == "sin_":
            Path("stolen.txt").write_text("x")  # what a formula must never do
        return report

    monkeypatch.setattr(validate_module, "validate_kernel", writing)
    spec = HARNESS + entry(SIN, SIN_BW, "result: auto_element_wise")
    rc = validate(tmp_path, monkeypatch, spec, "--ops", "sin", "sin_")
    out, _ = capsys.readouterr()
    assert rc == 1
    found = failures(out)
    assert set(found) == {("sin_", d, c) for d in DTYPES for c in CHECKS}
    for spec_line, detail in found.values():
        assert spec_line == line_of(spec, SIN)
        assert detail == "wrote into its working directory: stolen.txt"
    assert "2 kernels: 1 pass, 1 fail" in out
    assert [p.name for p in tmp_path.iterdir()] == ["derivatives.yaml"]
