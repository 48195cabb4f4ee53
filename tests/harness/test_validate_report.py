"""The validate report's table when kernels were checked in different dtypes."""

from __future__ import annotations

from dualgen.tools.validate import CHECKS, KernelReport, Verdict
from dualgen.tools.validate.report import html_page, markdown


def _report(kernel: str, verdicts: dict[str, str]) -> KernelReport:
    report = KernelReport(
        kernel=kernel, entry=kernel, kind="functional", formulas="", spec_line=1
    )
    for dtype, status in verdicts.items():
        report.cases[dtype] = 1 if status == "pass" else 0
        for check in CHECKS:
            report.verdicts[(dtype, check)] = Verdict(status, "refused")
    return report


def test_a_float32_column_for_one_kernel_leaves_the_others_blank():
    reports = [
        _report("sin", {"float64": "pass", "complex128": "pass"}),
        _report("lstm", {"float64": "n/a", "complex128": "n/a", "float32": "pass"}),
    ]
    table = markdown(reports)
    header, _, sin, lstm = table.splitlines()[4:8]
    assert header.count("float32") == len(CHECKS)
    n = len(CHECKS)

    def cells(*values):  # the row's last cells: the dtypes' checks, then the error
        return "| " + " | ".join([*values, ""]) + " |"

    assert sin.endswith(cells(*["pass"] * 2 * n, *[""] * n))
    assert lstm.endswith(cells(*["n/a"] * 2 * n, *["pass"] * n))
    assert "2 kernels: 2 pass, 0 fail" in table
    assert html_page(reports).count("not checked in this dtype") == len(CHECKS)
