"""Programs as the fuzzers print them, shared by the tests that replay them: the
dtype keywords their literals take, and a program the shapes fuzzer found that is
both a case of the nested judge's own test (test_fuzz_shapes.py) and a regression
(test_regressions.py)."""

from __future__ import annotations

F64 = "dtype=torch.float64"
F32 = "dtype=torch.float32"
C128 = "dtype=torch.complex128"

# x0 dual at the outer level only: the base x2 gets entries at that level alone,
# and the write through its conj view (at the inner level) adds the inner one.
WRITE_THROUGH_CONJ_VIEW_OF_A_BASE_DUAL_AT_ONE_LEVEL = f"""
        x0 = input(torch.tensor([[0.5, -1.0j, 1.0], [1.5, 0.25, 2.0j]], {C128}), v=torch.tensor([[1.0j, 0.5, 1.0], [-0.5, 1.0, 0.5j]], {C128}), u=None)
        x1 = input(torch.tensor([0.5, 1.0, -1.5], {F64}), v=torch.tensor([1.0, -2.0, 0.5], {F64}), u=torch.tensor([0.25, 1.0, 1.0], {F64}))
        x2 = x0 * x0
        x3 = x2.conj()
        x3[0:1:2].copy_(torch.log(x1.square() + 1).sum())
        """
