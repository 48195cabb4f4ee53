"""The helpers of dualgen.formulas.recurrent (mkldnn_rnn_layer, one LSTM layer over
time, and its backward), in float64 against torch.func on a reference LSTM layer
written with plain ops (torch runs mkldnn_rnn_layer itself in float32 only, so
`dualgen validate` cannot check these entries); and the reference against the op
and its native backward in float32."""

from __future__ import annotations

import itertools

import pytest
import torch
from formula_checks import R, close, jvp

from dualgen import formulas as F

T, B, I, H = 4, 2, 3, 5
CASES = list(itertools.product([True, False], [False, True], [(B, H), (1, B, H)]))


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def reference(x, w0, w1, b0, b1, hx, cx, reverse, has_biases):
    """What mkldnn_rnn_layer computes (time-major input; biases read only when
    has_biases; hy, cy shaped like hx, cx)."""
    h, c = hx.reshape(-1, H), cx.reshape(-1, H)
    outs = [None] * x.shape[0]
    for t in reversed(range(x.shape[0])) if reverse else range(x.shape[0]):
        a = x[t] @ w0.t() + h @ w1.t()
        if has_biases:
            a = a + b0 + b1
        i, f, g, o = a.chunk(4, -1)
        c = f.sigmoid() * c + i.sigmoid() * g.tanh()
        h = o.sigmoid() * c.tanh()
        outs[t] = h
    return torch.stack(outs), h.reshape(hx.shape), c.reshape(cx.shape)


def layer(has_biases, hx_shape, dtype=R):
    x = torch.randn(T, B, I, dtype=dtype)
    w0 = torch.randn(4 * H, I, dtype=dtype) * 0.5
    w1 = torch.randn(4 * H, H, dtype=dtype) * 0.5
    # Without biases torch passes zeros shaped like the weights.
    b0 = torch.randn(4 * H, dtype=dtype) if has_biases else torch.zeros_like(w0)
    b1 = torch.randn(4 * H, dtype=dtype) if has_biases else torch.zeros_like(w1)
    return [
        x,
        w0,
        w1,
        b0,
        b1,
        torch.randn(hx_shape, dtype=dtype),
        torch.randn(hx_shape, dtype=dtype),
    ]


def gradient_of_layer(reverse):
    """mkldnn_rnn_layer_backward as a function of the layer's inputs (a bias at zero
    when not has_biases: the op returns the summed gate gradients either way) and
    of the outputs' gradients."""

    def backward(x, w0, w1, b0, b1, hx, cx, *grads):
        _, pull = torch.func.vjp(
            lambda *q: reference(*q, reverse, True), x, w0, w1, b0, b1, hx, cx
        )
        return pull(tuple(grads))

    return backward


def layer_and_grads(has_biases, reverse, hx_shape):
    """A layer's inputs, its outputs, and random gradients of the outputs."""
    primals = layer(has_biases, hx_shape)
    outputs = reference(*primals, reverse, has_biases)
    return primals, outputs, [torch.randn_like(o) for o in outputs]


def close_each(got, expected):
    for a, b in zip(got, expected):
        close(a, b)


def derivative(kind, along, primals, output, reverse, has_biases, grads=(None,) * 3):
    """F.lstm_layer_derivative of mode 2 (LSTM), unpacked input; `grads`: the
    backward op's output gradients (None: the layer's own kinds)."""
    return F.lstm_layer_derivative(
        kind, along, *primals, output, *grads, reverse, 2, has_biases, []
    )


@pytest.mark.parametrize("has_biases, reverse, hx_shape", CASES)
def test_lstm_layer_tangents(has_biases, reverse, hx_shape):
    primals = layer(has_biases, hx_shape)
    tangents = [torch.randn_like(p) for p in primals]
    output = reference(*primals, reverse, has_biases)[0]
    expected = jvp(lambda *p: reference(*p, reverse, has_biases), primals, tangents)
    got = derivative("tangents", tangents, primals, output, reverse, has_biases)
    close_each(got, expected)
    # Absent tangents are zeros.
    some = [t if k in (0, 5) else None for k, t in enumerate(tangents)]
    zeros = [t if k in (0, 5) else torch.zeros_like(t) for k, t in enumerate(tangents)]
    expected = jvp(lambda *p: reference(*p, reverse, has_biases), primals, zeros)
    got = derivative("tangents", some, primals, output, reverse, has_biases)
    close_each(got, expected)


@pytest.mark.parametrize("has_biases, reverse, hx_shape", CASES)
def test_lstm_layer_grads(has_biases, reverse, hx_shape):
    primals, outputs, grads = layer_and_grads(has_biases, reverse, hx_shape)
    _, pull = torch.func.vjp(lambda *p: reference(*p, reverse, has_biases), *primals)
    expected = list(pull(tuple(grads)))
    got = derivative("grads", grads, primals, outputs[0], reverse, has_biases)
    close_each(got, expected)
    # A missing output gradient is zero.
    some = [None, grads[1], None]
    got = derivative("grads", some, primals, outputs[0], reverse, has_biases)
    expected = pull((torch.zeros_like(grads[0]), grads[1], torch.zeros_like(grads[2])))
    close_each(got, expected)


def _bias_at_zero(primals, has_biases):
    if has_biases:
        return primals
    zero = torch.zeros(4 * H, dtype=primals[0].dtype)
    return primals[:3] + [zero, zero] + primals[5:]


@pytest.mark.parametrize("has_biases, reverse, hx_shape", CASES)
def test_lstm_layer_backward_tangents(has_biases, reverse, hx_shape):
    primals, outputs, grads = layer_and_grads(has_biases, reverse, hx_shape)
    tangents = [torch.randn_like(p) for p in primals]
    grad_tangents = [torch.randn_like(g) for g in grads]
    # Without biases the op ignores the bias arguments: their tangents do not count.
    ref_tangents = _bias_at_zero(tangents, has_biases)
    expected = jvp(
        gradient_of_layer(reverse),
        _bias_at_zero(primals, has_biases) + grads,
        ref_tangents + grad_tangents,
    )
    along = tangents + grad_tangents
    kind = "backward_tangents"
    got = derivative(kind, along, primals, outputs[0], reverse, has_biases, grads)
    close_each(got, expected)


@pytest.mark.parametrize("has_biases, reverse, hx_shape", CASES)
def test_lstm_layer_backward_grads(has_biases, reverse, hx_shape):
    primals, outputs, grads = layer_and_grads(has_biases, reverse, hx_shape)
    results, pull = torch.func.vjp(
        gradient_of_layer(reverse), *_bias_at_zero(primals, has_biases), *grads
    )
    cotangents = [torch.randn_like(r) for r in results]
    expected = list(pull(tuple(cotangents)))
    if not has_biases:  # the op does not read its bias arguments
        expected[3:5] = [torch.zeros_like(primals[3]), torch.zeros_like(primals[4])]
    kind = "backward_grads"
    got = derivative(kind, cotangents, primals, outputs[0], reverse, has_biases, grads)
    assert len(got) == len(expected) == 10
    close_each(got, expected)


@pytest.mark.parametrize("has_biases, reverse, hx_shape", CASES)
def test_reference_is_the_op_and_its_backward_in_float32(has_biases, reverse, hx_shape):
    primals = layer(has_biases, hx_shape, dtype=torch.float32)
    out = torch.ops.aten.mkldnn_rnn_layer(
        *primals, reverse, [], 2, H, 1, has_biases, False, False, True
    )
    ref = reference(*primals, reverse, has_biases)
    for a, b in zip(out[:3], ref):
        close(a, b, rtol=1e-5, atol=1e-5)
    grads = [torch.randn_like(o) for o in ref]
    native = torch.ops.aten.mkldnn_rnn_layer_backward(
        *primals,
        *out[:3],
        *grads,
        reverse,
        2,
        H,
        1,
        has_biases,
        True,
        False,
        [],
        False,
        out[3],
    )
    mine = derivative("grads", grads, primals, out[0], reverse, has_biases)
    # The op's bias gradients are the summed gate gradients, has_biases or not.
    for k, (a, b) in enumerate(zip(native, mine)):
        if has_biases or k not in (3, 4):
            close(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode, batch_sizes", [(3, []), (2, [2, 2])])
def test_only_unpacked_lstm_layers(mode, batch_sizes):
    primals = layer(True, (B, H))
    output = reference(*primals, False, True)[0]
    grads = [None] * 3
    args = ("tangents", primals, *primals, output, *grads, False, mode, True)
    with pytest.raises(ValueError, match="mkldnn_rnn_layer"):
        F.lstm_layer_derivative(*args, batch_sizes)
