"""Benchmark: building the C++ extension (`dualgen build`), cold and after an edit.

In a fresh build directory: a cold build of everything (the hand-written runtime
and formula twins, and the eight generated kernel shards), a rebuild with nothing
changed, and a rebuild after one generated shard changed (as adding or editing one
spec entry changes one shard). The sources are copied to a temporary tree first,
so the checkout is never touched (and its build directory is not reused).
Compiles use every core (ninja).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

from dualgen import cpp


def timed(label: str) -> float:
    start = time.perf_counter()
    cpp.build()
    seconds = time.perf_counter() - start
    print(f"| {label} | {seconds:.1f} s |")
    return seconds


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="dualgen-build-") as root:
        root = Path(root)
        csrc, generated = root / "csrc", root / "generated"
        shutil.copytree(cpp.CSRC, csrc)
        shutil.copytree(cpp.generated_dir(), generated)
        os.environ["DUALGEN_BUILD_DIR"] = str(root / "build")
        cpp.CSRC = csrc
        cpp.generated_dir = lambda: generated
        print(f"{os.cpu_count()} cores\n")
        print("| build | time |")
        print("|---|---|")
        timed("cold (everything)")
        timed("nothing changed")
        shard = generated / "jvp_3.cpp"
        shard.write_text(shard.read_text() + "// an edit\n")
        timed("one shard changed")


if __name__ == "__main__":
    main()
