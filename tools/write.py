"""Stage 5, write: format with black, compare, swap the output directory atomically.

The whole output is rendered in memory first. Writing builds a staging directory
beside the target and renames it into place, so an interrupted run leaves either
the old `generated/` or the new one, never a mix. Nothing is touched when nothing
changed.
"""

from __future__ import annotations

import difflib
import os
import shutil
import tempfile
from pathlib import Path

import black

# The templates separate top-level statements by exactly two blank lines and put
# none inside a statement, so a file splits there into independent chunks.
_TOP_LEVEL = "\n\n\n"


def format_python(files: dict[str, str]) -> dict[str, str]:
    """Black each file one top-level statement at a time: the result is the same as
    for the whole file, and black's cost stays linear in the number of statements."""
    mode = black.Mode()
    formatted = {}
    for name, text in sorted(files.items()):
        chunks = [c for c in text.split(_TOP_LEVEL) if c.strip()]
        pieces = [black.format_str(c, mode=mode).rstrip("\n") for c in chunks]
        formatted[name] = _TOP_LEVEL.join(pieces) + "\n"
    return formatted


def read_existing(out_dir: Path) -> dict[str, str]:
    if not out_dir.is_dir():
        return {}
    return {
        p.name: p.read_text(encoding="utf-8")
        for p in sorted(out_dir.iterdir())
        if p.is_file() and p.suffix == ".py"
    }


def stale_diff(out_dir: Path, files: dict[str, str]) -> str:
    """A unified diff from what is on disk to what would be written ('' if current)."""
    existing = read_existing(out_dir)
    chunks = []
    for name in sorted(set(existing) | set(files)):
        old, new = existing.get(name, ""), files.get(name, "")
        if old != new:
            chunks.extend(
                difflib.unified_diff(
                    old.splitlines(keepends=True),
                    new.splitlines(keepends=True),
                    fromfile=(
                        f"{out_dir.name}/{name}" if name in existing else "/dev/null"
                    ),
                    tofile=f"{out_dir.name}/{name}" if name in files else "/dev/null",
                )
            )
    return "".join(chunks)


def write_atomically(out_dir: Path, files: dict[str, str]) -> bool:
    """Replace `out_dir` with exactly `files`; return whether anything changed."""
    if read_existing(out_dir) == files and _only_python(out_dir):
        return False
    out_dir = out_dir.resolve()
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.new-", dir=out_dir.parent))
    try:
        for name, text in files.items():
            (staging / name).write_text(text, encoding="utf-8")
            os.chmod(staging / name, 0o644)
        os.chmod(staging, 0o755)
        _swap(staging, out_dir)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return True


def _only_python(out_dir: Path) -> bool:
    return all(
        p.suffix == ".py"
        for p in out_dir.iterdir()
        if p.is_file() or p.is_dir() and p.name != "__pycache__"
    )


def _swap(staging: Path, out_dir: Path) -> None:
    if not out_dir.exists():
        os.rename(staging, out_dir)
        return
    retired = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.old-", dir=out_dir.parent))
    os.rmdir(retired)
    os.rename(out_dir, retired)
    try:
        os.rename(staging, out_dir)
    except BaseException:
        os.rename(retired, out_dir)
        raise
    shutil.rmtree(retired, ignore_errors=True)
