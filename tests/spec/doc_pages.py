"""What the tests that play a page of docs/ word for word share (the contributor's
walkthrough of docs/spec.md, docs/custom_ops.md): the page's fenced blocks, its
timings blurred, and the error its example with a missing rule prints."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

import pytest


def block(text: str, language: str, marker: str) -> str:
    """The one ```language block of `text` that holds `marker`."""
    fence = re.compile(r"```(\w*)\n(.*?)```", re.DOTALL)
    blocks = [m.group(2) for m in fence.finditer(text) if m.group(1) == language]
    (found,) = [b for b in blocks if marker in b]
    return found


def blur(text: str) -> str:
    """Timings ("in 1.23s") as "in Ns": they change from run to run."""
    return re.sub(r"in \d+\.\d+s", "in Ns", text)


def assert_missing_rule_as_shown(example: Path, shown: str) -> None:
    """Running `example` raises NotImplementedError with the text the page shows
    (`shown`), the call site it names aside."""
    with pytest.raises(NotImplementedError) as raised:
        runpy.run_path(str(example))
    called_at = re.compile(r"called at \S+:\d+")
    expected = called_at.sub("called at X", shown)
    got = called_at.sub("called at X", f"NotImplementedError: {raised.value}\n")
    assert got == expected
