"""Golden tests per feature, as CPython's Lib/test/test_generated_cases.py: each
directory of golden_cases/ is one feature of the spec, a tiny `spec.yaml` (its first
line says which feature) and the exact text it generates.

A case stores only what the feature changes: the generated files that differ from
an empty spec's (`<file>.golden`; for C++ the shard its kernels fall in), and
`absent.golden`, the files an empty spec writes that the case does not (a custom
op's spec has no C++), where there are some.
A `.py` module beside the spec is imported first and named to the generator
(`dualgen generate --import`), as a custom op's library is.

After an intended change to the output, refresh with
`UPDATE_GOLDEN=1 python -m pytest tests/spec/test_golden_cases.py` and review the
diff: it shows what each feature now generates.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path

import pytest

from dualgen.tools.cli import generate_files

CASES = Path(__file__).parent / "golden_cases"
NAMES = sorted(p.name for p in CASES.iterdir() if p.is_dir() and p.name[0] != "_")
# The features a reviewer finds here; a case may be added, none silently lost.
FEATURES = {
    "explicit_jvp",
    "auto_element_wise",
    "auto_linear",
    "backward_op_derived_forward",
    "multi_output",
    "inplace_derived",
    "inplace_written",
    "view",
    "zero_tangents",
    "tensor_list",
    "torch_releases",
    "custom_op",
    "collective",
    "shared_call",
}
ABSENT = "absent"  # stored as absent.golden


@pytest.fixture(scope="module")
def empty(tmp_path_factory) -> dict[str, str]:
    """What an empty spec of the same name generates: what no case stores."""
    spec = tmp_path_factory.mktemp("empty") / "spec.yaml"
    spec.write_text("[]\n", encoding="utf-8")
    return generate_files(spec).files


def _generate(case: Path, monkeypatch) -> dict[str, str]:
    modules = tuple(sorted(p.stem for p in case.glob("*.py")))
    if modules:
        monkeypatch.syspath_prepend(str(case))
        for module in modules:
            importlib.import_module(module)
    return generate_files(case / "spec.yaml", modules).files


def _stored(files: dict[str, str], empty: dict[str, str]) -> dict[str, str]:
    """What a case stores of its output: the files differing from the empty
    spec's, and those of the empty spec's it does not write."""
    stored = {name: text for name, text in files.items() if empty.get(name) != text}
    absent = _folded(set(empty) - set(files), set(empty))
    if absent:
        stored[ABSENT] = "".join(f"{name}\n" for name in absent)
    return stored


def _folded(absent: set[str], every: set[str]) -> list[str]:
    """`absent`, a folder none of whose files is written as `folder/`."""

    def folder(name: str) -> str | None:
        return name.split("/")[0] if "/" in name else None

    whole = {folder(n) for n in absent} - {folder(n) for n in every - absent}
    return sorted(
        {f"{folder(n)}/" if folder(n) in whole - {None} else n for n in absent}
    )


def _expected(case: Path) -> dict[str, str]:
    return {
        p.relative_to(case).as_posix().removesuffix(".golden"): p.read_text("utf-8")
        for p in case.rglob("*.golden")
    }


def _write(case: Path, stored: dict[str, str]) -> None:
    for path in case.rglob("*.golden"):
        path.unlink()
    for name, text in stored.items():
        path = case / f"{name}.golden"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    for folder in sorted(case.rglob("*"), reverse=True):
        if folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()


def _compare(expected: dict[str, str], stored: dict[str, str]) -> None:
    assert sorted(stored) == sorted(expected)
    for name in sorted(stored):
        assert stored[name] == expected[name], name


@pytest.mark.parametrize("name", NAMES)
def test_case_generates_exactly_its_golden_files(name, empty, monkeypatch):
    case = CASES / name
    stored = _stored(_generate(case, monkeypatch), empty)
    if os.environ.get("UPDATE_GOLDEN"):
        _write(case, stored)
    _compare(_expected(case), stored)


def test_every_feature_has_a_case_with_a_spec_and_its_output():
    assert FEATURES <= set(NAMES)
    for name in NAMES:
        case = CASES / name
        spec = (case / "spec.yaml").read_text(encoding="utf-8")
        assert spec.startswith("# ") and "\n- name: " in spec, name
        assert set(_expected(case)) - {ABSENT}, f"{name}: no expected output"


def test_a_changed_golden_file_fails_the_comparison(empty, monkeypatch):
    """The comparison is exact: one changed character, or a file less, fails it."""
    case = CASES / "zero_tangents"
    stored = _stored(_generate(case, monkeypatch), empty)
    expected = _expected(case)
    _compare(expected, stored)
    changed = dict(expected, **{"jvp.py": expected["jvp.py"].replace("elif", "if", 1)})
    with pytest.raises(AssertionError):
        _compare(changed, stored)
    with pytest.raises(AssertionError):
        _compare({k: v for k, v in expected.items() if k != "vjp.py"}, stored)
