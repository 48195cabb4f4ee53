"""Print the zoo's Markdown table (for the README): each case's verdicts.

    python -m tests.zoo.table            # every case
    python -m tests.zoo.table lstm gru   # some
    python -m tests.zoo.table --summary  # by family, and the cases native fails

Columns: native (torch.autograd.forward_ad; torch.func.jvp where it differs) and
dualgen.forward_ad, in float32 and float64; a totals line at the end.
"""

from __future__ import annotations

import re
import sys
import warnings

import torch

from .cases import CASES
from .run import run_case, run_fd
from .test_zoo import expected_failure, pending_ops

DTYPES = (torch.float32, torch.float64)


def _short(err: str) -> str:
    m = re.search(r"forward AD with (\w+) that does not support", err)
    if m:
        return f"no rule: `{m.group(1)}`"
    if "attempted to call in-place operation" in err:
        return "refuses an in-place update of a captured tensor"
    err = err.replace("|", "\\|")
    return err if len(err) <= 70 else err[:67] + "..."


def native_cell(v) -> str:
    if v.native == "ok" and v.func_jvp == "ok":
        return "ok"
    if v.native == "ok":
        return f"ok (func.jvp: {_short(v.func_jvp)})"
    if v.func_jvp == "ok":
        return f"{_short(v.native)} (func.jvp ok)"
    return _short(v.native)


def dualgen_cell(v, name, dtype) -> str:
    if v.dualgen_ok:
        refs = v.reference
        if "forward_ad" in refs or "func.jvp" in refs:
            return "ok"
        return "ok (vs finite differences)"
    m = re.search(r"forward AD with (\w+) that", v.dualgen)
    if m and m.group(1) in pending_ops(name, dtype):
        return f"pending: `{m.group(1)}`"
    if expected_failure(name, dtype):
        return f"xfail: {_short(v.dualgen)}"
    return f"**FAIL**: {_short(v.dualgen)}"


def rows(names):
    """(case, native cells, dualgen cells, per dtype: native ok, dualgen ok, pending)
    for each of `names`."""
    for name in names:
        case = CASES[name]
        fd = None if case.no_fd else run_fd(case)
        nat, dg, oks = [], [], []
        for dtype in DTYPES:
            if dtype not in case.dtypes:
                nat.append("-")
                dg.append("-")
                oks.append(None)
                continue
            v = run_case(case, dtype, fd)
            pending = (not v.dualgen_ok) and bool(pending_ops(name, dtype))
            oks.append((v.native == "ok", v.dualgen_ok, pending))
            nat.append(native_cell(v))
            dg.append(dualgen_cell(v, name, dtype))
        yield case, name, nat, dg, oks


def print_table(results) -> None:
    print("| family | case | native f32 | native f64 | dualgen f32 | dualgen f64 |")
    print("|---|---|---|---|---|---|")
    for case, name, nat, dg, _ in results:
        print(f"| {case.family} | `{name}` | {' | '.join(nat)} | {' | '.join(dg)} |")
    print(_totals("**total**", f"{len(results)} cases", results))


def print_summary(results) -> None:
    """One line per family, then the cases native cannot run."""
    print("| family | cases | native f32 | native f64 | dualgen f32 | dualgen f64 |")
    print("|---|---|---|---|---|---|")
    families = list(dict.fromkeys(r[0].family for r in results))
    for family in families:
        mine = [r for r in results if r[0].family == family]
        print(_totals(family, str(len(mine)), mine))
    print(_totals("**total**", str(len(results)), results))
    print()
    print("| case | native | dualgen f32 | dualgen f64 |")
    print("|---|---|---|---|")
    for case, name, nat, dg, oks in results:
        if any(ok is not None and not ok[0] for ok in oks):
            where = nat[0] if oks[0] is not None and not oks[0][0] else nat[1]
            print(f"| `{name}` | {where} | {dg[0]} | {dg[1]} |")


def _totals(label: str, cases: str, results) -> str:
    cells = []
    for who in (0, 1):  # native, dualgen
        for i in range(len(DTYPES)):
            counted = [r[4][i] for r in results if r[4][i] is not None]
            cells.append(f"{sum(ok[who] for ok in counted)}/{len(counted)}")
    pending = sum(ok[2] for r in results for ok in r[4] if ok is not None)
    tail = f" ({pending} pending)" if pending else ""
    return f"| {label} | {cases} | {' | '.join(cells)}{tail} |"


def main(argv) -> None:
    warnings.filterwarnings("ignore")
    summary = "--summary" in argv
    argv = [a for a in argv if a != "--summary"]
    families = list(dict.fromkeys(c.family for c in CASES.values()))
    names = sorted(argv or CASES, key=lambda n: families.index(CASES[n].family))
    results = list(rows(names))
    (print_summary if summary else print_table)(results)


if __name__ == "__main__":
    main(sys.argv[1:])
