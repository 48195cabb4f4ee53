"""The contributor's walkthrough of docs/spec.md ("Adding an op"), played word for
word on a scratch copy of the spec: the entry the page shows, its drafts with
mistakes, every command it runs and every output it prints. When the spec, the
CLI or an error message changes, this test says which line of the page is stale.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from doc_pages import assert_missing_rule_as_shown, block, blur

from dualgen.tools.cli import generate_files, main
from dualgen.tools.validate import load_kernels

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "spec.md"
OP = "special_zeta"


def _walkthrough() -> str:
    text = PAGE.read_text(encoding="utf-8")
    start = text.index("## Adding an op: a walkthrough")
    end = text.find("\n## ", start + 1)
    return text[start:] if end < 0 else text[start:end]


def _block(language: str, marker: str) -> str:
    return block(_walkthrough(), language, marker)


class Scratch:
    """The page's /tmp/x.yaml, /tmp/out and /tmp/val, in a temporary directory."""

    def __init__(self, root: Path):
        self.root = root
        self.spec = root / "x.yaml"

    def local(self, text: str) -> str:
        """The page's text with its paths moved here and timings blurred."""
        for name in ("x.yaml", "out", "val"):
            text = text.replace(f"/tmp/{name}", str(self.root / name))
        return blur(text)

    def write(self, entry: str) -> int:
        """The spec with `entry` where the page puts it; returns its line."""
        text = (REPO / "derivatives.yaml").read_text(encoding="utf-8")
        at = text.index("- name: mvlgamma(")
        self.spec.write_text(text[:at] + entry + "\n" + text[at:], encoding="utf-8")
        return text[:at].count("\n") + 1


def _run(capsys, scratch: Scratch, command: str) -> str:
    argv = command.removeprefix("$ dualgen ").split()
    main([scratch.local(a) for a in argv])
    out, err = capsys.readouterr()
    return blur(out + err)


def _expected(scratch: Scratch, block: str) -> str:
    """A block's output lines (no `$` lines), localised."""
    return scratch.local("".join(f"{l}\n" for l in block.splitlines() if l[:2] != "$ "))


@pytest.fixture
def scratch(tmp_path) -> Scratch:
    return Scratch(tmp_path)


@pytest.fixture(scope="module")
def entry() -> str:
    return _block("yaml", f"- name: {OP}(")


def test_the_entry_goes_where_the_page_says(scratch, entry):
    line = scratch.write(entry)
    claimed = re.search(r"line (\d+) of the copy", _walkthrough())
    assert claimed and int(claimed.group(1)) == line, f"the entry is at line {line}"


def test_a_missing_rule_prints_the_stub_the_page_shows(tmp_path):
    example = tmp_path / "example.py"
    example.write_text(_block("python", "import dualgen.forward_ad"))
    assert_missing_rule_as_shown(example, _block("", "NotImplementedError"))


def test_drafts_with_mistakes_give_the_errors_the_page_shows(capsys, scratch, entry):
    forgot = entry.replace("  non_differentiable: [self]\n", "")
    result = next(l for l in forgot.splitlines() if l.startswith("  result:"))
    forgot = forgot.replace(result, result.replace("self_p", "self"))
    scratch.write(forgot)
    block = _block("", "has no backward formula")
    command = block.splitlines()[0]
    assert _run(capsys, scratch, command) == _expected(scratch, block)

    scratch.write(
        entry.replace("(Tensor self, Tensor other)", "(Tensor x, Tensor q)", 1)
    )
    block = _block("", "schema does not match torch")
    assert _run(capsys, scratch, command) == _expected(scratch, block)


def test_generate_validate_and_check_print_what_the_page_shows(capsys, scratch, entry):
    scratch.write(entry)
    for marker in ("written (", "kernels: 1 pass"):
        block = _block("", marker)
        commands = [l for l in block.splitlines() if l.startswith("$ ")]
        got = "".join(_run(capsys, scratch, c) for c in commands)
        assert got == _expected(scratch, block), marker
    kernel = _block("python", f"def {OP}_default(")
    generated = (scratch.root / "out" / "jvp.py").read_text()
    assert scratch.local(kernel) in generated


def test_the_wrong_sign_fails_as_the_page_shows(capsys, scratch, entry):
    result = next(l for l in entry.splitlines() if l.startswith("  result:"))
    wrong = result.replace("-self_p", "self_p")
    assert wrong != result
    scratch.write(entry.replace(result, wrong))
    block = _block("", f"FAIL {OP} [float64 slow]")
    command = f"$ dualgen validate --spec /tmp/x.yaml --ops {OP}"
    assert _run(capsys, scratch, command) == _expected(scratch, block)


def test_the_new_kernel_runs_the_example_with_the_right_tangent(scratch, entry):
    """Step 5: with the scratch kernels in place of the installed ones, the
    example of step 1 runs, and its tangent is the derivative (finite
    differences; native forward AD has no rule to compare with)."""
    import dualgen.forward_ad as fwAD
    from dualgen.rules import using_kernels

    scratch.write(entry)
    kernels = load_kernels(generate_files(scratch.spec).files)
    s = torch.rand(3, 4, dtype=torch.float64) + 1.5
    q = torch.rand(3, 4, dtype=torch.float64) + 0.5
    v = torch.randn(3, 4, dtype=torch.float64)
    with using_kernels(kernels), fwAD.dual_level():
        z = torch.special.zeta(s, fwAD.make_dual(q, v))
        tangent = fwAD.unpack_dual(z).tangent
    h = 1e-6
    zeta = torch.special.zeta
    finite = (zeta(s, q + h * v) - zeta(s, q - h * v)) / (2 * h)
    torch.testing.assert_close(tangent, finite, rtol=1e-6, atol=1e-8)
