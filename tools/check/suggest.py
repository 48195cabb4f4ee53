"""`did you mean ...?`: the known name closest to a misspelt one."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def closest(
    name: str, choices: Iterable[str], cutoff: float = 0.7, any_edits: bool = False
) -> str | None:
    """The choice `name` most likely misspells, or None where none is close: within
    difflib's `cutoff` and, unless `any_edits`, a typo's few edits away.

    difflib's ratio alone favours long shared runs: for `coss` it ranks `cross`
    (0.89) above `cos` (0.86). A typo is mostly one keystroke, rarely at the start
    of a name: among difflib's candidates, the fewest edits wins, then the longest
    prefix shared with `name`, then the ratio (`sinn`: `sin` before `sinh`), then
    the order of `choices` (a spec's entries: the first of `mul`'s overloads).
    """
    order = {choice: i for i, choice in reversed(list(enumerate(choices)))}
    candidates = [
        choice
        for choice in difflib.get_close_matches(name, list(order), n=20, cutoff=cutoff)
        if any_edits or _edits(name, choice) <= _typo_edits(name)
    ]
    if not candidates:
        return None
    return min(candidates, key=lambda choice: (*_rank(name, choice), order[choice]))


def closest_op_name(name: str, known: Iterable[str]) -> str | None:
    """The kernel or entry name (`mul.Tensor`) closest to `name`: first the closest
    base before the dot, then the closest name with that base, so `mull` suggests
    `mul.Tensor` and `mul.Tensr` never `mul_.Tensor`. Without an overload typed,
    the base's first name in `known`: edits to `mull` would favour `mul.Scalar`
    over `mul.Tensor` for the `l` they share."""
    known = list(known)
    base = closest(name.split(".")[0], [k.split(".")[0] for k in known], cutoff=0.6)
    if base is None:
        return closest(name, known, cutoff=0.6)
    same_base = [k for k in known if k.split(".")[0] == base]
    if "." not in name:
        return same_base[0]
    return closest(name, same_base, cutoff=0.0, any_edits=True)


def did_you_mean(choice: str | None) -> str:
    """The hint to append to an error message ('' without a suggestion)."""
    return f"; did you mean '{choice}'?" if choice else ""


def _typo_edits(name: str) -> int:
    """The most edits a typo of `name` takes: one per three letters. `nosuch` is no
    typo of `cosh` (3 edits), though difflib's ratio (0.6) lets it through."""
    return max(1, len(name) // 3)


def _rank(name: str, choice: str) -> tuple:
    ratio = difflib.SequenceMatcher(None, name, choice).ratio()
    return (_edits(name, choice), -_shared_prefix(name, choice), -ratio)


def _shared_prefix(a: str, b: str) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def _edits(a: str, b: str) -> int:
    """Edit distance counting a swap of neighbours as one edit (optimal string
    alignment): `lgmama` is one typo of `lgamma`."""
    rows = [list(range(len(b) + 1))]
    for i, ca in enumerate(a, 1):
        row = [i]
        for j, cb in enumerate(b, 1):
            cost = min(rows[-1][j] + 1, row[j - 1] + 1, rows[-1][j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                cost = min(cost, rows[-2][j - 2] + 1)
            row.append(cost)
        rows.append(row)
    return rows[-1][-1]
