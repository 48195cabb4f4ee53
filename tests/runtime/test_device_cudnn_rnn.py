"""The rule for `_cudnn_rnn`, cuDNN's whole recurrent stack (what nn.RNN, nn.LSTM and
nn.GRU reach on CUDA): a device kernel with no CPU kernel, proved on CPU through the
tests' reference (tests/device_references/recurrent.py). Its tangents, on both
backends, against native forward AD through torch's CPU ops for the same stack
(`torch._VF.lstm` and kin: the same mathematics, another implementation), for every
mode, several layers, both directions, packed and batch-first input, projections
and any subset of tangents; against central differences in float64; and its
refusal of dropout between layers in training."""

from __future__ import annotations

import pytest
import torch
import torch.autograd.forward_ad as native_fwAD
from rnn_stacks import Stack, cpu_call, cudnn_call, draw

import dualgen.forward_ad as fwAD

pytestmark = pytest.mark.usefixtures("on_the_cpu")

STACKS = (
    [Stack(mode) for mode in range(4)]
    + [
        Stack(mode, layers=2, bidirectional=True, bias=False, batch_first=True)
        for mode in range(4)
    ]
    + [Stack(mode, layers=2, packed=True) for mode in range(4)]
    + [
        Stack(2, proj=2),
        Stack(2, layers=2, bidirectional=True, proj=2, packed=True),
        Stack(3, bidirectional=True, packed=True, bias=False),
    ]
)


def _jvp(api, call, stack, primals, tangents):
    """The tangents of (output, hy, cy) of `call` under `api`'s forward AD (cy's None
    where the stack has no cell state)."""
    x, weights, hx, cx = primals
    dx, dweights, dhx, dcx = tangents

    def dual(p, t):
        return p if t is None or p is None else api.make_dual(p, t)

    with api.dual_level():
        outputs = call(
            stack,
            dual(x, dx),
            [dual(w, t) for w, t in zip(weights, dweights)],
            dual(hx, dhx),
            dual(cx, dcx),
        )
        return [
            None if o is None or o.numel() == 0 else api.unpack_dual(o).tangent
            for o in outputs[:3]
        ]


def _same(got, want):
    for g, w in zip(got, want):
        if w is None:
            assert g is None or g.numel() == 0
            continue
        assert g is not None
        torch.testing.assert_close(g, w)


@pytest.mark.parametrize("stack", STACKS, ids=str)
def test_tangents_match_the_cpu_ops(backend, stack):
    primals, tangents = draw(stack, seed=3)
    got = _jvp(fwAD, cudnn_call, stack, primals, tangents)
    _same(got, _jvp(native_fwAD, cpu_call, stack, primals, tangents))


# Which of (input, weights, hx, cx) carry a tangent: each alone, and pairs, so every
# branch of the generated kernel (an absent list of weight tangents included) runs.
SUBSETS = [(0,), (1,), (2,), (3,), (0, 2), (1, 3)]
SUBSET_CASES = [
    (stack, present)
    for stack in (Stack(2, layers=2), Stack(3, bidirectional=True, packed=True))
    for present in SUBSETS
    if stack.mode == 2 or 3 not in present  # cx: the LSTM's only
]


@pytest.mark.parametrize(
    "stack, present",
    SUBSET_CASES,
    ids=[f"{s}-{'+'.join(map(str, p))}" for s, p in SUBSET_CASES],
)
def test_any_subset_of_tangents(backend, stack, present):
    primals, tangents = draw(stack, seed=5)
    dx, dweights, dhx, dcx = (
        t if i in present else None for i, t in enumerate(tangents)
    )
    chosen = (dx, dweights or [None] * len(primals[1]), dhx, dcx)
    got = _jvp(fwAD, cudnn_call, stack, primals, chosen)
    _same(got, _jvp(native_fwAD, cpu_call, stack, primals, chosen))


@pytest.mark.parametrize(
    "stack",
    [
        Stack(2, layers=2, bidirectional=True),
        Stack(3, packed=True, proj=0),
        Stack(2, proj=2, packed=True),
    ],
    ids=str,
)
def test_tangents_match_central_differences(backend, stack):
    primals, tangents = draw(stack, seed=11)
    got = _jvp(fwAD, cudnn_call, stack, primals, tangents)
    eps = 1e-6

    def at(sign):
        x, weights, hx, cx = primals
        dx, dweights, dhx, dcx = tangents
        moved = (
            x + sign * eps * dx,
            [w + sign * eps * t for w, t in zip(weights, dweights)],
            hx + sign * eps * dhx,
            None if cx is None else cx + sign * eps * dcx,
        )
        return cudnn_call(stack, *moved)[:3]

    for g, plus, minus in zip(got, at(1), at(-1)):
        if plus.numel() == 0:
            continue
        torch.testing.assert_close(g, (plus - minus) / (2 * eps), rtol=1e-6, atol=1e-7)


def test_one_layer_ignores_dropout(backend):
    """cuDNN drops between layers only: one layer's tangent is dropout's free."""
    stack = Stack(2, dropout=0.5)
    primals, tangents = draw(stack, seed=7)
    got = _jvp(fwAD, cudnn_call, stack, primals, tangents)
    _same(got, _jvp(native_fwAD, cpu_call, stack, primals, tangents))


def test_dropout_between_layers_in_training_is_refused(backend):
    stack = Stack(3, layers=2, dropout=0.5, train=True)
    primals, tangents = draw(stack, seed=7)
    with pytest.raises(Exception, match="dropout between layers"):
        _jvp(fwAD, cudnn_call, stack, primals, tangents)


def test_dropout_in_eval_is_no_dropout(backend):
    stack = Stack(1, layers=2, dropout=0.5, train=False)
    primals, tangents = draw(stack, seed=7)
    got = _jvp(fwAD, cudnn_call, stack, primals, tangents)
    _same(got, _jvp(native_fwAD, cpu_call, stack, primals, tangents))
