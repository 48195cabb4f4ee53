"""The CLI's output contract: deterministic bytes, `--check`, atomic writes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dualgen.tools import write
from dualgen.tools.cli import generate_files, main

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "derivatives.yaml"
TINY = Path(__file__).parent / "golden" / "spec.yaml"


def _generate(out: Path, hash_seed: str) -> dict[str, bytes]:
    env = dict(os.environ, PYTHONHASHSEED=hash_seed)
    cmd = [
        sys.executable,
        "-m",
        "dualgen.tools.cli",
        "generate",
        "--spec",
        str(SPEC),
        "--out",
        str(out),
    ]
    subprocess.run(cmd, check=True, env=env, capture_output=True, cwd=ROOT)
    return {p.name: p.read_bytes() for p in sorted(out.iterdir())}


def test_two_runs_with_different_hash_seeds_give_identical_bytes(tmp_path):
    first = _generate(tmp_path / "a", "0")
    second = _generate(tmp_path / "b", "4242")
    assert first == second
    assert set(first) == {"__init__.py", "jvp.py", "vjp.py", "registry.py"}


def test_committed_generated_directory_is_current():
    files = generate_files(SPEC).files
    assert write.stale_diff(ROOT / "generated", files) == ""


def test_check_passes_on_fresh_output_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "gen"
    assert main(["generate", "--spec", str(TINY), "--out", str(out)]) == 0
    before = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    assert main(["generate", "--spec", str(TINY), "--out", str(out), "--check"]) == 0
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == before
    assert "up to date" in capsys.readouterr().out


def test_check_fails_with_a_diff_when_stale_and_changes_nothing(tmp_path, capsys):
    out = tmp_path / "gen"
    assert main(["generate", "--spec", str(TINY), "--out", str(out)]) == 0
    jvp = out / "jvp.py"
    jvp.write_text(jvp.read_text().replace("self_t * other_p", "self_t * other_p * 2"))
    stale = jvp.read_text()
    capsys.readouterr()
    assert main(["generate", "--spec", str(TINY), "--out", str(out), "--check"]) == 1
    captured = capsys.readouterr()
    assert "-        return self_t * other_p * 2 + other_t * self_p" in captured.out
    assert "+        return self_t * other_p + other_t * self_p" in captured.out
    assert "is stale" in captured.err
    assert jvp.read_text() == stale


def test_check_reports_missing_output_directory(tmp_path):
    assert (
        main(
            [
                "generate",
                "--spec",
                str(TINY),
                "--out",
                str(tmp_path / "none"),
                "--check",
            ]
        )
        == 1
    )
    assert not (tmp_path / "none").exists()


def test_unchanged_output_is_not_rewritten(tmp_path):
    out = tmp_path / "gen"
    files = generate_files(TINY).files
    assert write.write_atomically(out, files) is True
    before = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    assert write.write_atomically(out, files) is False
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == before


def test_stray_files_are_removed_on_write(tmp_path):
    out = tmp_path / "gen"
    out.mkdir()
    (out / "old_kernels.py").write_text("# stale\n")
    write.write_atomically(out, generate_files(TINY).files)
    assert sorted(p.name for p in out.iterdir()) == [
        "__init__.py",
        "jvp.py",
        "registry.py",
        "vjp.py",
    ]


def test_interrupted_swap_leaves_the_old_output_whole(tmp_path, monkeypatch):
    out = tmp_path / "gen"
    out.mkdir()
    (out / "jvp.py").write_text("old\n")
    real_rename = os.rename
    calls = []

    def flaky_rename(src, dst):
        calls.append((src, dst))
        if len(calls) == 2:  # the staging directory moving into place
            raise KeyboardInterrupt
        real_rename(src, dst)

    monkeypatch.setattr(write.os, "rename", flaky_rename)
    with pytest.raises(KeyboardInterrupt):
        write.write_atomically(out, {"jvp.py": "new\n", "vjp.py": "new\n"})
    assert sorted(p.name for p in out.iterdir()) == ["jvp.py"]
    assert (out / "jvp.py").read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["gen"]  # no staging left behind


def test_interrupted_render_leaves_the_output_untouched(tmp_path, monkeypatch):
    out = tmp_path / "gen"
    assert main(["generate", "--spec", str(TINY), "--out", str(out)]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def interrupted(files):
        raise KeyboardInterrupt

    monkeypatch.setattr(write, "format_python", interrupted)
    assert main(["generate", "--spec", str(TINY), "--out", str(out)]) == 130
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
