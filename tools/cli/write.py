"""Stage 5, write: format with black, compare, swap the output directory atomically.

The whole output is rendered in memory first. Writing builds a staging directory
beside the target and renames it into place, so an interrupted run leaves either
the old `generated/` or the new one, never a mix. Nothing is touched when nothing
changed.

Formatting reuses the previous output (what is in the output directory) as a cache,
chunk by chunk, so black only sees the top-level statements that changed; see
`FormatCache` for why that gives black's output.
"""

from __future__ import annotations

import ast
import difflib
import io
import os
import shutil
import tempfile
import tokenize
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

# The templates separate top-level statements by exactly two blank lines and put
# none inside a statement, so a file splits there into independent chunks.
_TOP_LEVEL = "\n\n\n"

# Set to 0 to ignore the previous output and send every chunk through black.
CACHE_VARIABLE = "DUALGEN_FORMAT_CACHE"

# Unformatted chunk -> black's output (no trailing newline), for every chunk black
# formatted in this process: repeated runs in one process (the tests) pay once.
_MEMO: dict[str, str] = {}


@dataclass(frozen=True)
class Formatted:
    files: dict[str, str]
    chunks: int
    blacked: int  # chunks that went through black; the others were reused


@dataclass(frozen=True)
class ChunkKey:
    """What black keeps of a chunk: its syntax tree (black checks that its output
    parses to the same one) and its comments in order, each with whether it stands
    on a line of its own."""

    tree: str
    comments: tuple[tuple[str, bool], ...]


def format_python(
    files: Mapping[str, str], previous: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Black each file one top-level statement at a time: the result is the same as
    for the whole file, and black's cost stays linear in the number of statements."""
    return format_files(files, previous).files


def format_files(
    files: Mapping[str, str], previous: Mapping[str, str] | None = None
) -> Formatted:
    """Format `files` as `format_python` does, reusing the chunks of `previous` (the
    formatted files on disk) that black would produce again; say how many it ran."""
    if os.environ.get(CACHE_VARIABLE, "1") == "0":
        previous = None
    # The C++ files have their layout already (emit_cpp's fixed layout).
    as_printed = {n: t for n, t in files.items() if not n.endswith(".py")}
    files = {n: t for n, t in files.items() if n.endswith(".py")}
    previous = {n: t for n, t in (previous or {}).items() if n.endswith(".py")}
    chunks = {name: split_chunks(text) for name, text in sorted(files.items())}
    reused = FormatCache(previous or {}).reuse(
        {c for cs in chunks.values() for c in cs}
    )
    _black_many({c for cs in chunks.values() for c in cs} - reused.keys())
    formatted = {
        name: _TOP_LEVEL.join(reused[c] if c in reused else _black(c) for c in pieces)
        + "\n"
        for name, pieces in chunks.items()
    }
    formatted.update(as_printed)
    chunk_count = sum(map(len, chunks.values()))
    blacked = sum(c not in reused for pieces in chunks.values() for c in pieces)
    return Formatted(formatted, chunk_count, blacked)


def split_chunks(text: str) -> list[str]:
    return [c for c in text.split(_TOP_LEVEL) if c.strip()]


# Below this many chunks to format, worker processes cost more than they save.
_PARALLEL_FROM = 200


def _black_many(chunks: set[str]) -> None:
    """Black the chunks no cache holds into `_MEMO`, on every core when there are
    many (a first run with no previous output: ~1,700 chunks, ~6 s on one core).
    Workers are forked, so they start with black and torch already imported."""
    pending = sorted(c for c in chunks if c not in _MEMO)
    workers = min(os.cpu_count() or 1, 8)
    if len(pending) < _PARALLEL_FROM or workers < 2:
        return  # `_black` formats them one by one
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    import black  # noqa: F401 - imported once here, inherited by the workers

    if "fork" not in multiprocessing.get_all_start_methods():
        return
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(workers, mp_context=context) as pool:
        chunksize = max(1, len(pending) // (workers * 4))
        for chunk, piece in zip(
            pending, pool.map(_black_text, pending, chunksize=chunksize)
        ):
            _MEMO[chunk] = piece


def _black_text(chunk: str) -> str:
    import black

    return black.format_str(chunk, mode=black.Mode()).rstrip("\n")


def _black(chunk: str) -> str:
    """Black's output for one chunk, without its final newline. Imported here: the
    import costs 0.1 s, and a run where nothing changed needs no black at all."""
    piece = _MEMO.get(chunk)
    if piece is None:
        piece = _MEMO[chunk] = _black_text(chunk)
    return piece


@dataclass(frozen=True)
class FormatCache:
    """Black's output for chunks, where this process or the previous output holds it.

    `previous` was written by `format_files`, so each of its chunks is black's output
    for some rendered chunk. A new chunk gets an old one back when
    - they are the same text: black leaves its own output as it is, or
    - they have the same `ChunkKey`. Black keeps the syntax tree and the comments;
      what else it reads (magic trailing commas, optional parentheses, where a
      comment sits, blank lines) is fixed by the templates and by `ast.unparse`,
      which print one tree one way, so one key renders to one text and black gives
      one output. A key two old chunks share (among those no new chunk matched as
      text) is not used.
    Chunks with `# fmt:` comments (black keeps their layout) are never matched by
    key. A template change that alters only such layout, with the same trees and
    comments, is not seen: run once with DUALGEN_FORMAT_CACHE=0 (the test that
    compares `generated/` with a full black run catches a stale layout).
    Matching is by content, never by position, so an inserted entry shifts nothing;
    keys, which cost a parse and a tokenize, are computed only for what text
    matching left over.
    """

    previous: Mapping[str, str]

    def reuse(self, chunks: set[str]) -> dict[str, str]:
        """Chunk -> its formatted text, for those of `chunks` that need no black."""
        found = {}
        for chunk in chunks:
            text = _MEMO.get(chunk, chunk.rstrip("\n"))
            if text in self._texts or chunk in _MEMO:
                found[chunk] = text
        rest = chunks - found.keys()
        if rest and self._texts:
            index = _key_index(self._texts - set(found.values()))
            for chunk in rest:
                old = index.get(chunk_key(chunk))
                if old is not None:
                    found[chunk] = old
        return found

    @cached_property
    def _texts(self) -> frozenset[str]:
        return frozenset(
            piece.rstrip("\n")
            for text in self.previous.values()
            for piece in split_chunks(text)
        )


def _key_index(texts: set[str] | frozenset[str]) -> dict[ChunkKey | None, str | None]:
    """Key -> formatted chunk; None where two chunks share a key."""
    index: dict[ChunkKey | None, str | None] = {}
    for text in sorted(texts):
        key = chunk_key(text)
        if key is not None:
            index[key] = text if index.get(key, text) == text else None
    return index


def chunk_key(source: str) -> ChunkKey | None:
    """The chunk's `ChunkKey`; None if it does not parse or has `# fmt:` comments."""
    try:
        tree = ast.dump(ast.parse(source))
        comments = tuple(_comments(source))
    except (SyntaxError, ValueError, tokenize.TokenError):
        return None
    if any(text.startswith(("# fmt:", "#fmt:")) for text, _ in comments):
        return None
    return ChunkKey(tree, comments)


def _comments(source: str) -> tuple[tuple[str, bool], ...]:
    """Each comment, and whether it has a line of its own, as tokenize finds them.

    tokenize is pure Python and was most of a key's cost; where no string can span
    lines and no quote comes before a '#', each line's first '#' starts its comment,
    so the lines are read directly."""
    lines = source.split("\n")
    if "\r" in source or not all(map(_plain_line, lines)):
        return tuple(_tokenized_comments(source))
    found = []
    for line in lines:
        at = line.find("#")
        if at >= 0:
            found.append((line[at:], not line[:at].strip()))
    return tuple(found)


def _plain_line(line: str) -> bool:
    """Every string on `line` ends on it and a '#' on it begins a comment: no
    backslash continuation, triple quotes only as a one-line docstring, no quote
    before the first '#'."""
    if line.endswith("\\") or "'''" in line:
        return False
    if '"""' in line:
        text = line.strip()
        if not (
            text.startswith('"""') and text.endswith('"""') and text.count('"""') == 2
        ):
            return False
    head = line.split("#", 1)[0]
    return "#" not in line or not ('"' in head or "'" in head)


def _tokenized_comments(source: str):
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            own_line = not token.line[: token.start[1]].strip()
            yield token.string, own_line


# What `generate` writes: Python modules, and C++ sources in cpp/.
_GENERATED_SUFFIXES = (".py", ".cpp", ".h")


def read_existing(out_dir: Path) -> dict[str, str]:
    """The generated files under `out_dir`, by path relative to it."""
    if not out_dir.is_dir():
        return {}
    return {
        p.relative_to(out_dir).as_posix(): p.read_text(encoding="utf-8")
        for p in sorted(out_dir.rglob("*"))
        if p.is_file()
        and p.suffix in _GENERATED_SUFFIXES
        and "__pycache__" not in p.parts
    }


def stale_diff(
    out_dir: Path, files: dict[str, str], source: str = "derivatives.yaml"
) -> str:
    """A unified diff from what is on disk to what would be written from the spec
    `source` ('' if current); each side's label says which it is."""
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
                        f"{out_dir.name}/{name} (committed)"
                        if name in existing
                        else "/dev/null"
                    ),
                    tofile=(
                        f"{out_dir.name}/{name} (from {source})"
                        if name in files
                        else "/dev/null"
                    ),
                )
            )
    return "".join(chunks)


def write_atomically(out_dir: Path, files: dict[str, str]) -> bool:
    """Replace `out_dir` with exactly `files`; return whether anything changed."""
    if read_existing(out_dir) == files and _only_generated(out_dir):
        return False
    out_dir = out_dir.resolve()
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.new-", dir=out_dir.parent))
    try:
        for name, text in files.items():
            (staging / name).parent.mkdir(parents=True, exist_ok=True)
            (staging / name).write_text(text, encoding="utf-8")
            os.chmod(staging / name, 0o644)
            os.chmod((staging / name).parent, 0o755)
        os.chmod(staging, 0o755)
        _swap(staging, out_dir)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return True


def _only_generated(out_dir: Path) -> bool:
    """Nothing but generated files (and caches) under `out_dir`."""
    return all(
        p.suffix in _GENERATED_SUFFIXES
        for p in out_dir.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
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
