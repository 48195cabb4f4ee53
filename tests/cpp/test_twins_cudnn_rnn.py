"""The C++ twin of dualgen.formulas.cudnn_rnn held to its Python helper."""

from __future__ import annotations

import pytest
import torch
from rnn_stacks import Stack, draw, tangent_args

from dualgen.formulas import cudnn_rnn as py

STACKS = [
    Stack(0, layers=2, bidirectional=True),
    Stack(1, packed=True, bias=False),
    Stack(2, layers=2, batch_first=True),
    Stack(2, bidirectional=True, proj=2, packed=True),
    Stack(3, layers=2, bidirectional=True, packed=True),
]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("stack", STACKS, ids=str)
def test_tangents(cpp_formulas, stack, dtype):
    args = tangent_args(stack, *draw(stack, seed=4, dtype=dtype))
    cpp, ref = cpp_formulas.cudnn_rnn_tangents(*args), py.cudnn_rnn_tangents(*args)
    assert len(cpp) == len(ref) == 3
    tol = 1e-12 if dtype == torch.float64 else 1e-5
    for c, r in zip(cpp, ref):
        assert c.dtype == r.dtype and c.shape == r.shape
        torch.testing.assert_close(c, r, rtol=tol, atol=tol)


def test_dropout_between_layers_in_training_is_refused(cpp_formulas):
    stack = Stack(2, layers=2, dropout=0.3)
    with pytest.raises(ValueError, match="dropout between layers"):
        cpp_formulas.cudnn_rnn_tangents(*tangent_args(stack, *draw(stack, seed=4)))
