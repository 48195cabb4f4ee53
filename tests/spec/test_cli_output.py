"""The CLI's output contract: deterministic bytes, `--check`, atomic writes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dualgen.tools.cli import companion_files, generate_files, main, write
from dualgen.tools.emit_cpp import SHARDS

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "derivatives.yaml"
TINY = Path(__file__).parent / "golden" / "spec.yaml"


def _paths(out: Path) -> dict:
    """Every file under `out`, by its path relative to it (cpp/ included)."""
    return {
        p.relative_to(out).as_posix(): p for p in sorted(out.rglob("*")) if p.is_file()
    }


def _files(out: Path) -> dict:
    return {name: p.read_bytes() for name, p in _paths(out).items()}


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
    return _files(out)


def test_two_runs_with_different_hash_seeds_give_identical_bytes(tmp_path):
    first = _generate(tmp_path / "a", "0")
    second = _generate(tmp_path / "b", "4242")
    assert first == second
    python = {"__init__.py", "jvp.py", "vjp.py", "registry.py", "collectives.py"}
    python.add("taylor.py")
    python.add("helpers.py")
    # the companion spec's package (specs/torch_custom_ops.yaml)
    python |= {
        f"torch_custom_ops/{name}"
        for name in ("__init__.py", "jvp.py", "vjp.py", "registry.py", "taylor.py")
    }
    cpp = {f"cpp/jvp_{i}.cpp" for i in range(SHARDS)} | {
        "cpp/registry.cpp",
        "cpp/formulas.h",
        "cpp/formulas_bindings.cpp",
    }
    cpp |= {f"cpp/helpers_{p.stem}.cpp" for p in (ROOT / "helpers").glob("*.yaml")}
    assert set(first) == python | cpp


def test_committed_generated_directory_is_current():
    files = {**generate_files(SPEC).files, **companion_files(SPEC)}
    assert write.stale_diff(ROOT / "generated", files) == ""


def test_check_passes_on_fresh_output_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "gen"
    assert main(["generate", "--spec", str(TINY), "--out", str(out)]) == 0
    before = {n: p.stat().st_mtime_ns for n, p in _paths(out).items()}
    assert main(["generate", "--spec", str(TINY), "--out", str(out), "--check"]) == 0
    assert {n: p.stat().st_mtime_ns for n, p in _paths(out).items()} == before
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
    before = {n: p.stat().st_mtime_ns for n, p in _paths(out).items()}
    assert write.write_atomically(out, files) is False
    assert {n: p.stat().st_mtime_ns for n, p in _paths(out).items()} == before


def test_stray_files_are_removed_on_write(tmp_path):
    out = tmp_path / "gen"
    out.mkdir()
    (out / "old_kernels.py").write_text("# stale\n")
    write.write_atomically(out, generate_files(TINY).files)
    assert sorted(p.name for p in out.iterdir()) == [
        "__init__.py",
        "cpp",
        "jvp.py",
        "registry.py",
        "taylor.py",
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
    before = _files(out)

    def interrupted(files, previous=None):
        raise KeyboardInterrupt

    monkeypatch.setattr(write, "format_files", interrupted)
    assert main(["generate", "--spec", str(TINY), "--out", str(out)]) == 130
    assert _files(out) == before


# ---------------------------------------------------------------- the contributor's loop


def _project(root: Path, marker: str | None = "pyproject") -> Path:
    """A dualgen project at `root` (the tiny spec as derivatives.yaml), marked as
    such by a pyproject.toml naming dualgen, a generated/ directory, or nothing."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "derivatives.yaml").write_bytes(TINY.read_bytes())
    if marker == "pyproject":
        (root / "pyproject.toml").write_text('[project]\nname = "dualgen"\n')
    elif marker == "generated":
        (root / "generated").mkdir()
    return root


def test_version_comes_from_the_package_metadata(capsys):
    from importlib.metadata import version

    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.splitlines()[0] == f"dualgen {version('dualgen')}"


def test_python_m_dualgen_is_the_same_command(tmp_path):
    out = tmp_path / "gen"
    cmd = [sys.executable, "-m", "dualgen", "generate", "--spec", str(TINY)]
    done = subprocess.run(
        [*cmd, "--out", str(out)],
        check=False,
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    outcome = generate_files(TINY)
    assert done.stdout == (
        f"{out}: written ({outcome.entries} entries, {outcome.kernels} kernels)\n"
    )
    assert write.read_existing(out) == outcome.files


@pytest.mark.parametrize("marker", ["pyproject", "generated"])
def test_commands_run_from_a_subdirectory_of_the_project(
    tmp_path, monkeypatch, capsys, marker
):
    root = _project(tmp_path / "proj", marker)
    (root / "docs" / "deep").mkdir(parents=True)
    monkeypatch.chdir(root / "docs" / "deep")
    assert main(["generate"]) == 0
    assert capsys.readouterr().out.startswith("../../generated: written")
    files = generate_files(root / "derivatives.yaml").files
    assert write.read_existing(root / "generated") == files
    assert main(["generate", "--check"]) == 0
    assert capsys.readouterr().out.startswith("../../generated is up to date")


def test_explicit_paths_stay_relative_to_the_working_directory(tmp_path, monkeypatch):
    root = _project(tmp_path / "proj")
    (root / "sub").mkdir()
    (root / "sub" / "other.yaml").write_bytes(TINY.read_bytes())
    monkeypatch.chdir(root / "sub")
    assert main(["generate", "--spec", "other.yaml", "--out", "out"]) == 0
    assert (root / "sub" / "out" / "jvp.py").is_file()
    # --spec alone: the output still goes to the project's generated/.
    assert main(["generate", "--spec", "other.yaml"]) == 0
    assert (root / "generated" / "jvp.py").is_file()


def test_outside_a_project_is_a_one_line_error(tmp_path, monkeypatch, capsys):
    # A derivatives.yaml above the working directory, with no mark of a dualgen
    # project beside it, is not taken for the spec.
    _project(tmp_path, marker=None)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    for command in (["generate"], ["generate", "--check"], ["validate"]):
        assert main(command) == 2
        captured = capsys.readouterr()
        assert captured.out == ""
        assert captured.err == (
            f"dualgen: error: not inside a dualgen project (no derivatives.yaml in "
            f"{tmp_path.resolve() / 'elsewhere'} or its parents); pass --spec\n"
        )
    assert not (tmp_path / "elsewhere" / "generated").exists()


def test_outside_a_project_a_given_spec_writes_beside_itself(tmp_path, monkeypatch):
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "mine.yaml").write_bytes(TINY.read_bytes())
    monkeypatch.chdir(tmp_path)
    assert main(["generate", "--spec", "specs/mine.yaml"]) == 0
    assert (tmp_path / "specs" / "generated" / "jvp.py").is_file()


def test_check_labels_the_diff_and_says_what_to_run(tmp_path, monkeypatch, capsys):
    root = _project(tmp_path)
    monkeypatch.chdir(root)
    assert main(["generate"]) == 0
    jvp = root / "generated" / "jvp.py"
    jvp.write_text(jvp.read_text() + "# edited by hand\n")
    capsys.readouterr()
    assert main(["generate", "--check"]) == 1
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    headers = [line for line in lines if line.startswith(("--- ", "+++ "))]
    assert headers == [
        "--- generated/jvp.py (committed)",
        "+++ generated/jvp.py (from derivatives.yaml)",
    ]
    assert captured.err.splitlines()[-1] == (
        "generated is stale: run `make generate` (or dualgen generate) "
        "to update generated/"
    )
