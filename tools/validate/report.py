"""The `dualgen validate --report` page: a Markdown table and a standalone HTML page,
one row per kernel."""

from __future__ import annotations

import html
from pathlib import Path

from . import CHECKS, KernelReport, Verdict

_MARK = {
    "pass": "pass",
    "fail": "FAIL",
    "known": "known",
    "n/a": "n/a",
    "device": "device",
    "-": "",
}
# A column other kernels have (float32: single-precision-only ops) this one lacks.
_NOT_CHECKED = Verdict("-", "not checked in this dtype: its doubles run")


def _verdict(report: KernelReport, key: tuple[str, str]) -> Verdict:
    return report.verdicts.get(key, _NOT_CHECKED)


def _columns(reports: list[KernelReport]) -> list[tuple[str, str]]:
    dtypes = []
    for r in reports:
        for dtype, _ in r.verdicts:
            if dtype not in dtypes:
                dtypes.append(dtype)
    return [(d, c) for d in dtypes for c in CHECKS]


def _first_failure(report: KernelReport) -> str:
    for (dtype, check), verdict in report.verdicts.items():
        if verdict.status == "fail":
            return f"{dtype} {check}: {verdict.detail}"
    return ""


def summary(reports: list[KernelReport]) -> str:
    failed = sum(r.failed for r in reports)
    unchecked = sum(
        all(v.status == "n/a" for v in r.verdicts.values()) for r in reports
    )
    device_only = sum(
        all(v.status == "device" for v in r.verdicts.values()) for r in reports
    )
    passed = len(reports) - failed - unchecked - device_only
    text = (
        f"{len(reports)} kernels: {passed} pass, {failed} fail, {unchecked} have no "
        f"derivatives to check"
    )
    if device_only:
        text += f", {device_only} run on devices only (no CPU kernel here)"
    known = sum(any(v.status == "known" for v in r.verdicts.values()) for r in reports)
    if known:
        text += f"; {known} of those passing have a known failure (tools/validate/reverse.py)"
    return text


def markdown(reports: list[KernelReport]) -> str:
    columns = _columns(reports)
    header = ["kernel", "kind", "formulas", "line"] + [f"{d} {c}" for d, c in columns]
    lines = [
        "# dualgen validate",
        "",
        summary(reports),
        "",
        "| " + " | ".join(header + ["error"]) + " |",
        "|" + "---|" * (len(header) + 1),
    ]
    for r in reports:
        cells = [f"`{r.kernel}`", r.kind, r.formulas, str(r.spec_line)]
        cells += [_MARK[_verdict(r, key).status] for key in columns]
        error = _first_failure(r).splitlines()
        cells.append(error[0].replace("|", "\\|") if error else "")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def html_page(reports: list[KernelReport]) -> str:
    columns = _columns(reports)
    head = "".join(
        f"<th>{html.escape(h)}</th>"
        for h in ["kernel", "kind", "formulas", "line"]
        + [f"{d} {c}" for d, c in columns]
        + ["error"]
    )
    rows = []
    for r in reports:
        cells = [
            f"<td><code>{html.escape(r.kernel)}</code></td>",
            f"<td>{r.kind}</td>",
            f"<td>{html.escape(r.formulas)}</td>",
            f"<td>{r.spec_line}</td>",
        ]
        for key in columns:
            verdict = _verdict(r, key)
            title = html.escape(verdict.detail, quote=True)
            cells.append(
                f'<td class="{verdict.status.replace("/", "")}" title="{title}">'
                f"{_MARK[verdict.status]}</td>"
            )
        error = _first_failure(r)
        cells.append(
            f"<td><pre>{html.escape(error)}</pre></td>" if error else "<td></td>"
        )
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>dualgen validate</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em; }}
table {{ border-collapse: collapse; font-size: 13px; }}
th, td {{ border: 1px solid #ccc; padding: 3px 6px; text-align: left; vertical-align: top; }}
th {{ background: #f0f0f0; position: sticky; top: 0; }}
td.pass {{ background: #dff5df; }} td.fail {{ background: #f8d0d0; font-weight: bold; }}
td.na {{ color: #999; }} pre {{ margin: 0; white-space: pre-wrap; max-width: 60em; }}
</style></head><body>
<h1>dualgen validate</h1>
<p>{html.escape(summary(reports))}. Hover a cell for details.</p>
<table><thead><tr>{head}</tr></thead><tbody>
{chr(10).join(rows)}
</tbody></table></body></html>
"""


def write_reports(path: Path, reports: list[KernelReport]) -> tuple[Path, Path]:
    """PATH with .md gets the Markdown table, with .html the page."""
    path.parent.mkdir(parents=True, exist_ok=True)
    table, page = path.with_suffix(".md"), path.with_suffix(".html")
    table.write_text(markdown(reports))
    page.write_text(html_page(reports))
    return table, page
