"""op -> Taylor rule: the generated table (generated/taylor.py), with loaded
kernel packages' tables; an op it does not list, and a user rule, is evaluated
by its formula."""

from __future__ import annotations

from ..rules.table import has_user_rule
from .rules import ByFormula, TaylorRule

_BY_FORMULA = ByFormula()
_TABLE: dict | None = None


def _table() -> dict:
    global _TABLE
    if _TABLE is None:
        from dualgen.generated.taylor import TAYLOR

        _TABLE = TAYLOR
    return _TABLE


def taylor_rule(op) -> TaylorRule:
    if has_user_rule(op):
        return _BY_FORMULA
    return _table().get(op, _BY_FORMULA)
