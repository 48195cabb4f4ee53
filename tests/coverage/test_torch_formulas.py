"""dualgen covers PyTorch's own forward formulas: at least 98% of the overloads that
torch's derivatives.yaml gives a forward formula and that run on CPU have a generated
kernel, and every one left is listed in torch_formulas.KNOWN_LEFT with its reason
(`python -m tests.coverage.torch_formulas` prints the figure and the list)."""

from __future__ import annotations

import torch
from torch_formulas import (
    KNOWN_LEFT,
    coverage,
    forward_formula_overloads,
    runs_on_cpu,
)

MIN_RATIO = 0.98


def test_torch_formulas_are_found():
    # A change in torch's file layout must not shrink the denominator silently.
    names = forward_formula_overloads()
    assert len(names) > 400
    for name in (
        "mul.Tensor",
        "sin",
        "cat",
        "_foreach_norm.Scalar",
        "cudnn_batch_norm",
    ):
        assert name in names
    assert "_thnn_fused_lstm_cell" not in names  # backward formulas only


def test_cpu_denominator():
    assert runs_on_cpu("mul.Tensor") and runs_on_cpu("_foreach_norm.Scalar")
    assert not runs_on_cpu("cudnn_batch_norm") and not runs_on_cpu("miopen_batch_norm")


def test_coverage_ratio():
    c = coverage()
    assert c.ratio >= MIN_RATIO, (
        f"dualgen covers {len(c.covered)}/{len(c.on_cpu)} ({c.ratio:.3f}) of torch's "
        f"CPU forward formulas; uncovered: {', '.join(c.uncovered)}"
    )


def test_every_uncovered_cpu_overload_is_known():
    unexplained = sorted(set(coverage().uncovered) - set(KNOWN_LEFT))
    assert not unexplained, (
        "no dualgen kernel for these overloads that torch gives a forward formula "
        f"and runs on CPU: {unexplained}; write their spec entries or add them to "
        "KNOWN_LEFT with the reason"
    )


def test_known_left_lists_only_uncovered_cpu_overloads():
    c = coverage()
    stale = sorted(set(KNOWN_LEFT) - set(c.uncovered))
    assert not stale, (
        f"take these off KNOWN_LEFT: covered now, or not a CPU overload with a "
        f"forward formula in torch {torch.__version__}: {stale}"
    )
    assert all(reason.strip() for reason in KNOWN_LEFT.values())
