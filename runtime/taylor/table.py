"""op -> Taylor rule: the `taylor` module generated beside the op's kernels
(generated/taylor.py for the installed ones; a loaded package's, or a spec's
under test, for theirs). An op its package does not list, a package generated
before Taylor rules, and a user rule: evaluated by formula."""

from __future__ import annotations

import importlib

from ..rules.table import generated_kernels, has_user_rule
from .rules import ByFormula, TaylorRule

_BY_FORMULA = ByFormula()
_TABLES: dict[str, dict] = {}  # kernel package -> its TAYLOR table


def taylor_rule(op) -> TaylorRule:
    if has_user_rule(op):
        return _BY_FORMULA
    info = generated_kernels().get(op)
    if info is None:
        return _BY_FORMULA
    return _table(info.jvp.__module__.rpartition(".")[0]).get(op, _BY_FORMULA)


def _table(package: str = "dualgen.generated") -> dict:
    table = _TABLES.get(package)
    if table is None:
        try:
            table = importlib.import_module(f"{package}.taylor").TAYLOR
        except ModuleNotFoundError:
            table = {}
        _TABLES[package] = table
    return table
