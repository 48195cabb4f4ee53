"""Generated code diffs and merges locally.

Two contributors add an entry each, one at the top of the spec and one at the
bottom, on two branches, and regenerate: git merges the branches without a
conflict, and the merge is exactly what regenerating the merged spec gives. This
holds because nothing generated depends on where other entries sit in the spec
(kernels name their entry, not its line) and the output follows the spec's order.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from dualgen.tools.cli import generate_files

REPO = Path(__file__).resolve().parents[2]

TOP_ENTRY = """\
- name: special_spherical_bessel_j0(Tensor x) -> Tensor
  sample: x=nonzero
  x: grad * ((x * x.cos() - x.sin()) / (x * x)).conj()
  result: auto_element_wise

"""

BOTTOM_ENTRY = """
- name: special_zeta(Tensor self, Tensor other) -> Tensor
  sample: self=above_one, other=positive
  non_differentiable: [self]
  other: unbroadcast(grad * -self * torch.special.zeta(self + 1, other), other)
  result: -self_p * torch.special.zeta(self_p + 1, other_p) * other_t
"""


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=repo,
        check=False,  # the callers read returncode
        capture_output=True,
        text=True,
        timeout=60,
    )


def _regenerate(repo: Path) -> None:
    out = repo / "generated"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    for name, text in generate_files(repo / "derivatives.yaml").files.items():
        (out / name).parent.mkdir(exist_ok=True)
        (out / name).write_text(text, encoding="utf-8")


def _edit_spec(repo: Path, edit) -> None:
    spec = repo / "derivatives.yaml"
    spec.write_text(edit(spec.read_text(encoding="utf-8")), encoding="utf-8")


def _at_top(text: str) -> str:
    first = text.index("\n- name: ") + 1  # before the first entry
    return text[:first] + TOP_ENTRY + text[first:]


def _at_bottom(text: str) -> str:
    return text.rstrip("\n") + "\n" + BOTTOM_ENTRY


def _generated(repo: Path) -> dict[str, str]:
    root = repo / "generated"
    return {
        p.relative_to(root).as_posix(): p.read_text()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_entries_added_on_two_branches_merge_without_conflict(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    shutil.copy(REPO / "derivatives.yaml", repo / "derivatives.yaml")
    shutil.copytree(REPO / "helpers", repo / "helpers")
    _regenerate(repo)
    assert _git(repo, "init", "-q", "-b", "main").returncode == 0
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "base")

    for branch, edit in (("top", _at_top), ("bottom", _at_bottom)):
        _git(repo, "checkout", "-q", "-b", branch, "main")
        _edit_spec(repo, edit)
        _regenerate(repo)
        _git(repo, "add", "-A")
        assert _git(repo, "commit", "-q", "-m", branch).returncode == 0

    merge = _git(repo, "merge", "-q", "--no-edit", "top")
    assert merge.returncode == 0, f"merge conflict:\n{merge.stdout}{merge.stderr}"

    merged = _generated(repo)
    _regenerate(repo)
    assert _generated(repo) == merged, "the merge differs from regenerating it"
    spec = (repo / "derivatives.yaml").read_text()
    assert "special_spherical_bessel_j0" in spec and "special_zeta" in spec
    assert "special_spherical_bessel_j0" in merged["registry.py"]
    assert "special_zeta" in merged["registry.py"]


def test_one_new_entry_changes_only_its_own_kernels(tmp_path):
    """Adding an entry at the top changes no line of generated/ that was there:
    every change is an insertion of the new entry's kernels and imports."""
    import difflib

    before = generate_files(REPO / "derivatives.yaml").files
    spec = tmp_path / "derivatives.yaml"
    spec.write_text(_at_top((REPO / "derivatives.yaml").read_text()))
    shutil.copytree(REPO / "helpers", tmp_path / "helpers")
    after = generate_files(spec).files
    for name in before:
        old, new = before[name].splitlines(), after[name].splitlines()
        removed = [
            line
            for line in difflib.unified_diff(old, new, lineterm="", n=0)
            if line.startswith("-") and not line.startswith("---")
        ]
        assert not removed, f"{name}: lines changed, not only added: {removed[:5]}"
