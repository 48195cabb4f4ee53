"""The helpers of dualgen.formulas.cudnn_rnn (cuDNN's whole recurrent stack): the
tangents against native forward AD through torch's CPU ops for the same stack, and
the gradients (through the tests' reference of cuDNN's backward kernel) against
autograd of those ops; float64."""

from __future__ import annotations

import pytest
import torch
import torch.autograd.forward_ad as fwAD
from formula_checks import close
from rnn_stacks import HIDDEN, Stack, cpu_call, cudnn_call, draw, tangent_args

from dualgen import formulas as F

STACKS = [
    Stack(0, layers=2),
    Stack(1, bidirectional=True, packed=True),
    Stack(2, layers=2, bidirectional=True, batch_first=True),
    Stack(2, proj=2, packed=True, bias=False),
    Stack(3, layers=2, packed=True),
]


@pytest.mark.parametrize("stack", STACKS, ids=str)
def test_tangents_match_the_cpu_ops(stack):
    primals, tangents = draw(stack, seed=1)
    (x, weights, hx, cx), (dx, dweights, dhx, dcx) = primals, tangents
    with fwAD.dual_level():
        dual = [fwAD.make_dual(p, t) for p, t in zip((x, hx), (dx, dhx))]
        cell = None if cx is None else fwAD.make_dual(cx, dcx)
        ws = [fwAD.make_dual(w, t) for w, t in zip(weights, dweights)]
        outs = cpu_call(stack, dual[0], ws, dual[1], cell)
        want = [fwAD.unpack_dual(o).tangent for o in outs if o is not None]
    got = F.cudnn_rnn_tangents(*tangent_args(stack, primals, tangents))
    for g, w in zip(got, want):
        close(g, w)
    if cx is None:
        assert got[2].shape == (0,)


@pytest.mark.parametrize("stack", STACKS, ids=str)
def test_grads_match_autograd_of_the_cpu_ops(stack):
    (x, weights, hx, cx), _ = draw(stack, seed=2)
    output, hy, cy, reserve, weight_buf = cudnn_call(stack, x, weights, hx, cx)
    g_out, g_hy = torch.randn_like(output), torch.randn_like(hy)
    g_cy = None if cx is None else torch.randn_like(cy)
    leaves = [t.detach().requires_grad_() for t in (x, *weights, hx)]
    cell = None if cx is None else cx.detach().requires_grad_()
    outs = cpu_call(stack, leaves[0], leaves[1:-1], leaves[-1], cell)
    pairs = [(o, g) for o, g in zip(outs, (g_out, g_hy, g_cy)) if g is not None]
    wrt = leaves + ([] if cell is None else [cell])
    want = torch.autograd.grad([o for o, _ in pairs], wrt, [g for _, g in pairs])
    got = F.cudnn_rnn_grads(
        g_out,
        g_hy,
        g_cy,
        x,
        weights,
        stack.stride,
        weight_buf,
        hx,
        cx,
        output,
        stack.mode,
        HIDDEN,
        stack.proj,
        stack.layers,
        stack.batch_first,
        0.0,
        True,
        stack.bidirectional,
        stack.sizes if stack.packed else [],
        None,
        reserve,
    )
    close(got[0], want[0])
    for g, w in zip(got[1], want[1 : 1 + len(weights)]):
        close(g, w)
    close(got[2], want[1 + len(weights)])
    if cx is None:
        assert got[3] is None
    else:
        close(got[3], want[-1])


def test_dropout_between_layers_in_training_is_refused():
    stack = Stack(2, layers=2, dropout=0.3)
    with pytest.raises(ValueError, match="dropout between layers"):
        F.cudnn_rnn_tangents(*tangent_args(stack, *draw(stack, seed=1)))
