"""The C++ twins of dualgen.formulas.recurrent held to their Python helpers."""

from __future__ import annotations

import pytest
import torch

from dualgen.formulas import recurrent as py

F64, F32 = torch.float64, torch.float32
T, B, I, H = 4, 2, 3, 5


def same(cpp, ref):
    assert len(cpp) == len(ref)
    for c, r in zip(cpp, ref):
        assert c.dtype == r.dtype and c.shape == r.shape
        tol = 1e-12 if r.dtype == F64 else 1e-5
        torch.testing.assert_close(c, r, rtol=tol, atol=tol)


def layer(dtype, has_biases, hx_shape, reverse, seed=0):
    """Primal inputs of mkldnn_rnn_layer and the output they give (computed by
    the Python helpers' own recurrence: the states are read from it)."""
    g = torch.Generator().manual_seed(seed)

    def r(*shape, scale=1.0):
        return (torch.randn(*shape, dtype=F64, generator=g) * scale).to(dtype)

    x, w0, w1 = r(T, B, I), r(4 * H, I, scale=0.5), r(4 * H, H, scale=0.5)
    b0 = r(4 * H) if has_biases else torch.zeros(4 * H, I, dtype=dtype)
    b1 = r(4 * H) if has_biases else torch.zeros(4 * H, H, dtype=dtype)
    hx, cx = r(*hx_shape), r(*hx_shape)
    # The output from a tangent-free run: h_t = o * tanh(c_t) step by step.
    h, c, outs = hx.reshape(B, H), cx.reshape(B, H), [None] * T
    for t in reversed(range(T)) if reverse else range(T):
        a = x[t] @ w0.t() + h @ w1.t() + ((b0 + b1) if has_biases else 0)
        i, f, gg, o = a.chunk(4, -1)
        c = f.sigmoid() * c + i.sigmoid() * gg.tanh()
        h = o.sigmoid() * c.tanh()
        outs[t] = h
    primals = [x, w0, w1, b0, b1, hx, cx, torch.stack(outs)]
    tangents = [r(*p.shape) for p in primals[:7]]
    grads = [r(T, B, H), r(*hx_shape), r(*hx_shape)]
    grad_tangents = [r(T, B, H), r(*hx_shape), r(*hx_shape)]
    return primals, tangents, grads, grad_tangents


CASES = [
    (F64, True, (B, H), False),
    (F64, True, (1, B, H), True),
    (F64, False, (B, H), True),
    (F32, True, (B, H), False),
]


@pytest.mark.parametrize("dtype, has_biases, hx_shape, reverse", CASES)
@pytest.mark.parametrize("absent", [(), (0, 3, 4), (1, 2, 5, 6)])
def test_lstm_layer_tangents(
    cpp_formulas, dtype, has_biases, hx_shape, reverse, absent
):
    primals, tangents, _, _ = layer(dtype, has_biases, hx_shape, reverse)
    tangents = [None if k in absent else t for k, t in enumerate(tangents)]
    args = (*tangents, *primals, reverse, 2, has_biases, [])
    same(cpp_formulas.lstm_layer_tangents(*args), py.lstm_layer_tangents(*args))


@pytest.mark.parametrize("dtype, has_biases, hx_shape, reverse", CASES)
@pytest.mark.parametrize("absent", [(), (0,), (1, 2)])
def test_lstm_layer_grads(cpp_formulas, dtype, has_biases, hx_shape, reverse, absent):
    primals, _, grads, _ = layer(dtype, has_biases, hx_shape, reverse)
    grads = [None if k in absent else t for k, t in enumerate(grads)]
    args = (*grads, *primals, reverse, 2, has_biases, [])
    same(cpp_formulas.lstm_layer_grads(*args), py.lstm_layer_grads(*args))


@pytest.mark.parametrize("dtype, has_biases, hx_shape, reverse", CASES)
@pytest.mark.parametrize("absent", [(), (0, 1, 7), (2, 3, 4, 5, 6, 8, 9)])
def test_lstm_layer_backward_tangents(
    cpp_formulas, dtype, has_biases, hx_shape, reverse, absent
):
    primals, tangents, grads, grad_tangents = layer(
        dtype, has_biases, hx_shape, reverse
    )
    tangents = [
        None if k in absent else t for k, t in enumerate(tangents + grad_tangents)
    ]
    args = (*tangents, *primals, *grads, reverse, 2, has_biases, [])
    same(
        cpp_formulas.lstm_layer_backward_tangents(*args),
        py.lstm_layer_backward_tangents(*args),
    )


@pytest.mark.parametrize("dtype, has_biases, hx_shape, reverse", CASES)
@pytest.mark.parametrize("absent", [(), (0, 5), (1, 2, 3, 4, 6)])
def test_lstm_layer_backward_grads(
    cpp_formulas, dtype, has_biases, hx_shape, reverse, absent
):
    primals, _, grads, _ = layer(dtype, has_biases, hx_shape, reverse)
    out_grads = list(py.lstm_layer_grads(*grads, *primals, reverse, 2, has_biases, []))
    out_grads = [None if k in absent else g.clone() for k, g in enumerate(out_grads)]
    if not has_biases:  # the op's bias gradients are [4H] either way
        out_grads[3:5] = [
            None if g is None else torch.randn(4 * H, dtype=dtype)
            for g in out_grads[3:5]
        ]
    args = (*out_grads, *primals, *grads, reverse, 2, has_biases, [])
    same(
        cpp_formulas.lstm_layer_backward_grads(*args),
        py.lstm_layer_backward_grads(*args),
    )


@pytest.mark.parametrize(
    "mode, batch_sizes, message",
    [(3, [], r"mode 2 \(LSTM\) only"), (2, [2, 2], "unpacked input only")],
)
def test_unsupported_layers_raise_alike(cpp_formulas, mode, batch_sizes, message):
    primals, tangents, _, _ = layer(F64, True, (B, H), False)
    args = (*tangents, *primals, False, mode, True, batch_sizes)
    with pytest.raises(ValueError, match=message):
        py.lstm_layer_tangents(*args)
    with pytest.raises(ValueError, match=message):
        cpp_formulas.lstm_layer_tangents(*args)
