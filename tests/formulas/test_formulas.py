"""The package dualgen.formulas as a whole: its `__all__` (the union of its
modules', one per family of ops), a docstring on every helper, and a test for
each (the helpers themselves are tested in test_formulas_<module>.py)."""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

from dualgen import formulas as F


def test_every_public_helper_has_a_docstring():
    for name in F.__all__:
        assert getattr(F, name).__doc__, name


def test_every_public_helper_is_referenced_by_a_test():
    here = Path(__file__).parent
    text = "".join(p.read_text() for p in sorted(here.glob("test_formulas*.py")))
    missing = [n for n in F.__all__ if not re.search(rf"\bF\.{n}\b", text)]
    assert not missing, f"helpers without a test: {missing}"


def test_all_is_the_sorted_union_of_the_modules_and_names_only_their_helpers():
    # The families, and the one-source helpers (dualgen.generated.helpers);
    # basics holds utilities of helpers, not formula vocabulary.
    modules = [
        importlib.import_module(f"{F.__name__}.{info.name}")
        for info in pkgutil.iter_modules(F.__path__)
        if not info.name.startswith("_") and info.name != "basics"
    ] + [importlib.import_module("dualgen.generated.helpers")]
    names = [n for module in modules for n in module.__all__]
    assert F.__all__ == sorted(names) and len(set(names)) == len(names)
    for module in modules:
        public = {
            n
            for n, v in vars(module).items()
            if callable(v)
            and not n.startswith("_")
            and getattr(v, "__module__", None) == module.__name__
        }
        if module.__name__ == "dualgen.generated.helpers":
            # (its internal helpers are building blocks, not exported)
            assert set(module.__all__) <= public, module.__name__
        else:
            assert set(module.__all__) == public, module.__name__
        for n in module.__all__:
            assert getattr(F, n) is getattr(module, n)
