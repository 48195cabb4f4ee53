"""The C++ twins of dualgen.formulas.recurrent held to their Python helpers."""

from __future__ import annotations

import pytest
import torch
from devices import DEVICE

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
    g = torch.Generator(DEVICE).manual_seed(seed)

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


def same_derivative(cpp_formulas, kind, along, primals, grads, reverse, has_biases):
    """lstm_layer_derivative in C++ and Python alike; `grads`: the backward op's
    output gradients (None: the layer's own kinds)."""
    args = (kind, along, *primals, *grads, reverse, 2, has_biases, [])
    same(cpp_formulas.lstm_layer_derivative(*args), py.lstm_layer_derivative(*args))


# The kinds whose `along` are `layer`'s random values, and the positions of those
# left absent (None) in each run.
ABSENT = {
    "tangents": [(), (0, 3, 4), (1, 2, 5, 6)],
    "grads": [(), (0,), (1, 2)],
    "backward_tangents": [(), (0, 1, 7), (2, 3, 4, 5, 6, 8, 9)],
}


@pytest.mark.parametrize("dtype, has_biases, hx_shape, reverse", CASES)
@pytest.mark.parametrize(
    "kind, absent", [(kind, a) for kind, runs in ABSENT.items() for a in runs]
)
def test_derivative(cpp_formulas, kind, absent, dtype, has_biases, hx_shape, reverse):
    primals, tangents, grads, grad_tangents = layer(
        dtype, has_biases, hx_shape, reverse
    )
    along = {
        "tangents": tangents,
        "grads": grads,
        "backward_tangents": tangents + grad_tangents,
    }[kind]
    along = [None if k in absent else t for k, t in enumerate(along)]
    read = grads if kind.startswith("backward") else [None] * 3
    same_derivative(cpp_formulas, kind, along, primals, read, reverse, has_biases)


@pytest.mark.parametrize("dtype, has_biases, hx_shape, reverse", CASES)
@pytest.mark.parametrize("absent", [(), (0, 5), (1, 2, 3, 4, 6)])
def test_backward_grads(cpp_formulas, dtype, has_biases, hx_shape, reverse, absent):
    primals, _, grads, _ = layer(dtype, has_biases, hx_shape, reverse)
    args = ("grads", grads, *primals, None, None, None, reverse, 2, has_biases, [])
    out_grads = list(py.lstm_layer_derivative(*args))
    along = [None if k in absent else g.clone() for k, g in enumerate(out_grads)]
    if not has_biases:  # the op's bias gradients are [4H] either way
        along[3:5] = [
            None if g is None else torch.randn(4 * H, dtype=dtype) for g in along[3:5]
        ]
    kind = "backward_grads"
    same_derivative(cpp_formulas, kind, along, primals, grads, reverse, has_biases)


@pytest.mark.parametrize(
    "kind, count, mode, batch_sizes, message",
    [
        ("tangents", 7, 3, [], r"mode 2 \(LSTM\) only"),
        ("tangents", 7, 2, [2, 2], "unpacked input only"),
        ("tangent", 7, 2, [], "kind is one of tangents, grads, backward_tangents, "),
        ("grads", 7, 2, [], "'grads' reads 3 tensors along, got 7"),
        ("backward_tangents", 7, 2, [], "'backward_tangents' reads 10 tensors along"),
    ],
)
def test_unsupported_calls_raise_alike(
    cpp_formulas, kind, count, mode, batch_sizes, message
):
    primals, tangents, grads, _ = layer(F64, True, (B, H), False)
    along = (tangents * 2)[:count]
    args = (kind, along, *primals, *grads, False, mode, True, batch_sizes)
    with pytest.raises(ValueError, match=message):
        py.lstm_layer_derivative(*args)
    with pytest.raises(ValueError, match=message):
        cpp_formulas.lstm_layer_derivative(*args)
