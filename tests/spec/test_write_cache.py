"""The formatter's cache: chunks whose formatting is already on disk skip black,
and the result is byte for byte what black alone gives."""

from __future__ import annotations

import tokenize
from pathlib import Path

import black
import pytest

from dualgen.tools.analyse import analyse
from dualgen.tools.cli import checked_spec, main, write
from dualgen.tools.emit_python import Emitter

TINY = Path(__file__).parent / "golden" / "spec.yaml"

SIN = """- name: sin(Tensor self) -> Tensor
  self: grad * self.cos().conj()
  result: auto_element_wise
"""
COS = """- name: cos(Tensor self) -> Tensor
  self: grad * -self.sin().conj()
  result: auto_element_wise

"""


@pytest.fixture
def black_calls(monkeypatch) -> list[str]:
    """Every chunk black formats from here on (the in-process memo starts empty)."""
    calls: list[str] = []
    real = black.format_str

    def counting(source, *, mode):
        calls.append(source)
        return real(source, mode=mode)

    monkeypatch.setattr(write, "_MEMO", {})
    monkeypatch.setattr(black, "format_str", counting)
    return calls


def _rendered(spec: Path) -> dict[str, str]:
    parsed, ops = checked_spec(spec)
    return Emitter(spec.name).render_all(analyse(parsed, ops))


def _full_black(files: dict[str, str]) -> dict[str, str]:
    return write.format_files(files).files  # no previous output: every chunk


def _spec(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return path


def test_unchanged_chunks_are_reused_without_black(black_calls):
    rendered = _rendered(TINY)
    previous = _full_black(rendered)
    black_calls.clear()
    write._MEMO.clear()
    result = write.format_files(rendered, previous)
    assert result.files == previous
    assert black_calls == []
    assert result.blacked == 0 and result.chunks > 10


def test_an_inserted_entry_is_the_only_thing_black_formats(tmp_path, black_calls):
    spec = TINY.read_text()
    assert SIN in spec
    previous = _full_black(_rendered(TINY))
    black_calls.clear()
    write._MEMO.clear()
    # cos goes in before sin: matching is by content, so nothing after it shifts
    rendered = _rendered(_spec(tmp_path, spec.replace(SIN, COS + SIN)))
    result = write.format_files(rendered, previous)
    assert all("cos" in chunk for chunk in black_calls)
    # cos and cos_: jvp, vjp, registry row; cos: Taylor row
    assert len(black_calls) == result.blacked == 7
    write._MEMO.clear()
    assert result.files == _full_black(rendered)


def test_a_changed_formula_is_formatted_again(tmp_path, black_calls):
    previous = _full_black(_rendered(TINY))
    black_calls.clear()
    write._MEMO.clear()
    changed = TINY.read_text().replace("grad * self.cos().conj()", "self.cos() * grad")
    rendered = _rendered(_spec(tmp_path, changed))
    result = write.format_files(rendered, previous)
    assert black_calls and all("self.cos() * grad" in c for c in black_calls)
    write._MEMO.clear()
    assert result.files == _full_black(rendered)


def test_a_changed_comment_alone_is_formatted_again(black_calls):
    rendered = _rendered(TINY)
    previous = _full_black(rendered)
    renamed = {
        name: text.replace("# functional, spec.yaml", "# functional, other.yaml")
        for name, text in rendered.items()
    }
    assert renamed != rendered
    write._MEMO.clear()
    result = write.format_files(renamed, previous)
    assert result.blacked > 0
    assert "other.yaml" in result.files["jvp.py"]
    write._MEMO.clear()
    assert result.files == _full_black(renamed)


def test_a_key_two_old_chunks_share_is_not_used(black_calls):
    # Same tree and comments, two layouts on disk: neither is trusted.
    previous = {"a.py": "x = [1, 2]\n\n\ny = 1\n", "b.py": "x = [\n    1,\n    2,\n]\n"}
    result = write.format_files({"a.py": "x = [1,2]\n"}, previous)
    assert result.blacked == 1
    assert result.files == {"a.py": "x = [1, 2]\n"}


def test_the_environment_variable_turns_the_cache_off(monkeypatch, black_calls):
    rendered = _rendered(TINY)
    previous = _full_black(rendered)
    black_calls.clear()
    write._MEMO.clear()
    monkeypatch.setenv(write.CACHE_VARIABLE, "0")
    assert write.format_files(rendered, previous).blacked == len(black_calls) > 0


def test_generate_and_check_reuse_the_output_on_disk(tmp_path, black_calls, capsys):
    out = tmp_path / "gen"
    assert main(["generate", "--spec", str(TINY), "--out", str(out)]) == 0
    black_calls.clear()
    write._MEMO.clear()
    assert main(["generate", "--spec", str(TINY), "--out", str(out), "--check"]) == 0
    assert main(["generate", "--spec", str(TINY), "--out", str(out), "-v"]) == 0
    assert black_calls == []
    assert "black ran on 0 of" in capsys.readouterr().err


@pytest.mark.parametrize(
    "source",
    [
        "x = 1  # trailing\n# own line\n",
        'x = "#"  # after a string\n',
        's = """\n# inside a string\n"""\n',
        'def f():\n    """doc"""\n    # note\n    return f(a,  # mid\n        b)\n',
        "y = '''a\n#b'''  # c\n",
        "x = 1 + \\\n    2  # c\n",
        "x = 1  # c\r\ny = 2\r\n",
    ],
)
def test_comments_read_from_lines_match_tokenize(source):
    tokens = tokenize.generate_tokens(iter(source.splitlines(keepends=True)).__next__)
    expected = tuple(
        (t.string, not t.line[: t.start[1]].strip())
        for t in tokens
        if t.type == tokenize.COMMENT
    )
    assert write._comments(source) == expected
