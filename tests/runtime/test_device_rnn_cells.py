"""The rules for the CUDA RNN cells (`_thnn_fused_lstm_cell`, `_thnn_fused_gru_cell`:
what torch.lstm_cell / torch.gru_cell, nn.LSTMCell and nn.GRUCell reach on CUDA),
device kernels with no CPU kernel, proved on CPU through the tests' references
(tests/device_references/): one step's tangents against native forward AD through
torch.lstm_cell / torch.gru_cell on CPU (the same mathematics, unfused) and against
central differences in float64; a recurrence over time built from the fused cells,
as ATen runs nn.LSTMCell / nn.GRUCell on CUDA, against nn.LSTM / nn.GRU on CPU; and
forward over reverse (the cells' backward) against central differences of the
gradient."""

from __future__ import annotations

import pytest
import torch
import torch.autograd.forward_ad as native_fwAD

import dualgen.forward_ad as fwAD

aten = torch.ops.aten
# Proved on the CPU through its references, whatever the suite's device.
pytestmark = pytest.mark.usefixtures("on_the_cpu")
HIDDEN, FEATURES, BATCH = 3, 4, 2
CELLS = {  # gates per hidden unit, fused op, torch's unfused cell
    "lstm": (4, aten._thnn_fused_lstm_cell, torch.lstm_cell),
    "gru": (3, aten._thnn_fused_gru_cell, torch.gru_cell),
}


def _rand(*shape, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64)


def _parameters(gates, with_bias, seed):
    """(w_ih, w_hh, b_ih, b_hh) of a cell and tangents for each."""
    shapes = [(gates * HIDDEN, FEATURES), (gates * HIDDEN, HIDDEN)]
    if with_bias:
        shapes += [(gates * HIDDEN,), (gates * HIDDEN,)]
    primals = [_rand(*s, seed=seed + i) for i, s in enumerate(shapes)]
    tangents = [_rand(*s, seed=seed + 10 + i) for i, s in enumerate(shapes)]
    if not with_bias:
        primals += [None, None]
        tangents += [None, None]
    return primals, tangents


def _fused_step(kind, x, state, w_ih, w_hh, b_ih, b_hh):
    """One step as ATen runs the cell on CUDA: the gate pre-activations by matmul,
    then the fused kernel; the new state ((hy, cy) for LSTM, hy for GRU)."""
    _, fused, _ = CELLS[kind]
    h = state[0] if kind == "lstm" else state
    input_gates, hidden_gates = x @ w_ih.T, h @ w_hh.T
    if kind == "lstm":
        hy, cy, _ = fused(input_gates, hidden_gates, state[1], b_ih, b_hh)
        return hy, cy
    return fused(input_gates, hidden_gates, state, b_ih, b_hh)[0]


def _state(kind, seed):
    if kind == "lstm":
        return (_rand(BATCH, HIDDEN, seed=seed), _rand(BATCH, HIDDEN, seed=seed + 1))
    return _rand(BATCH, HIDDEN, seed=seed)


def _flat(state):
    return list(state) if isinstance(state, tuple) else [state]


def _dual(api, primal, tangent):
    return primal if tangent is None else api.make_dual(primal, tangent)


def _dual_state(api, state, tangent):
    if isinstance(state, tuple):
        return tuple(_dual(api, p, t) for p, t in zip(state, tangent))
    return _dual(api, state, tangent)


def _tangents(api, outputs):
    return [api.unpack_dual(o).tangent for o in _flat(outputs)]


@pytest.mark.parametrize("with_bias", [True, False], ids=["bias", "no-bias"])
@pytest.mark.parametrize("kind", list(CELLS))
def test_fused_cell_step_tangent(backend, kind, with_bias):
    gates, _, unfused = CELLS[kind]
    params, params_t = _parameters(gates, with_bias, seed=1)
    x, x_t = _rand(BATCH, FEATURES, seed=30), _rand(BATCH, FEATURES, seed=31)
    state, state_t = _state(kind, seed=40), _state(kind, seed=50)

    with fwAD.dual_level():
        out = _fused_step(
            kind,
            fwAD.make_dual(x, x_t),
            _dual_state(fwAD, state, state_t),
            *(_dual(fwAD, p, t) for p, t in zip(params, params_t)),
        )
        primal = [fwAD.unpack_dual(o).primal for o in _flat(out)]
        tangent = _tangents(fwAD, out)
    plain = _flat(_fused_step(kind, x, state, *params))
    torch.testing.assert_close(primal, plain)

    with native_fwAD.dual_level():
        native = unfused(
            native_fwAD.make_dual(x, x_t),
            _dual_state(native_fwAD, state, state_t),
            *(_dual(native_fwAD, p, t) for p, t in zip(params, params_t)),
        )
        torch.testing.assert_close(tangent, _tangents(native_fwAD, native))

    def moved(eps):
        shift = lambda p, t: None if p is None else p + eps * t
        moved_state = (
            tuple(shift(p, t) for p, t in zip(state, state_t))
            if kind == "lstm"
            else shift(state, state_t)
        )
        moved_params = [shift(p, t) for p, t in zip(params, params_t)]
        return _flat(_fused_step(kind, shift(x, x_t), moved_state, *moved_params))

    eps = 1e-6
    fd = [(a - b) / (2 * eps) for a, b in zip(moved(eps), moved(-eps))]
    torch.testing.assert_close(tangent, fd)


@pytest.mark.parametrize("kind", list(CELLS))
def test_recurrence_of_fused_cells_matches_the_cpu_layer(backend, kind):
    """Five steps of the fused cell (nn.LSTMCell / nn.GRUCell over time, as on
    CUDA), tangents on the input sequence, the initial state and every weight,
    against nn.LSTM / nn.GRU's one layer on CPU under native forward AD."""
    layer_class = torch.nn.LSTM if kind == "lstm" else torch.nn.GRU
    layer = layer_class(FEATURES, HIDDEN).double()
    params = [p.detach() for p in layer.parameters()]  # w_ih, w_hh, b_ih, b_hh
    params_t = [_rand(*p.shape, seed=60 + i) for i, p in enumerate(params)]
    xs, xs_t = _rand(5, BATCH, FEATURES, seed=70), _rand(5, BATCH, FEATURES, seed=71)
    state, state_t = _state(kind, seed=80), _state(kind, seed=90)

    with fwAD.dual_level():
        weights = [fwAD.make_dual(p, t) for p, t in zip(params, params_t)]
        s = _dual_state(fwAD, state, state_t)
        outputs = []
        for x in fwAD.make_dual(xs, xs_t).unbind(0):
            s = _fused_step(kind, x, s, *weights)
            outputs.append(s[0] if kind == "lstm" else s)
        tangent = fwAD.unpack_dual(torch.stack(outputs)).tangent

    names = [name for name, _ in layer.named_parameters()]
    with native_fwAD.dual_level():
        duals = {
            n: native_fwAD.make_dual(p, t) for n, p, t in zip(names, params, params_t)
        }
        s = _dual_state(native_fwAD, state, state_t)
        s = tuple(t.unsqueeze(0) for t in s) if kind == "lstm" else s.unsqueeze(0)
        native = torch.func.functional_call(
            layer, duals, (native_fwAD.make_dual(xs, xs_t), s)
        )[0]
        torch.testing.assert_close(tangent, native_fwAD.unpack_dual(native).tangent)


@pytest.mark.parametrize("kind", list(CELLS))
def test_forward_over_reverse_through_a_fused_cell(backend, kind):
    """The tangent of the cell's gradient (its backward, torch's differentiable
    cell backward) against central differences of that gradient."""
    gates, _, _ = CELLS[kind]
    params, params_t = _parameters(gates, True, seed=100)
    x, x_t = _rand(BATCH, FEATURES, seed=130), _rand(BATCH, FEATURES, seed=131)
    state, state_t = _state(kind, seed=140), _state(kind, seed=150)
    cotangents = [_rand(BATCH, HIDDEN, seed=160 + i) for i in range(len(_flat(state)))]

    primals = [x, *_flat(state), *params]
    tangents = [x_t, *_flat(state_t), *params_t]

    def gradient(primals, tangents=None):
        """The gradient in every input, as duals of `tangents` where given."""
        leaves = [p.clone().requires_grad_() for p in primals]
        inputs = leaves
        if tangents is not None:
            inputs = [fwAD.make_dual(p, t) for p, t in zip(leaves, tangents)]
        x, *rest = inputs
        state = tuple(rest[:2]) if kind == "lstm" else rest[0]
        out = _flat(_fused_step(kind, x, state, *rest[-4:]))
        return torch.autograd.grad(out, leaves, cotangents)

    with fwAD.dual_level():
        grads = gradient(primals, tangents)
        tangent = [fwAD.unpack_dual(g).tangent for g in grads]

    def moved(eps):
        return gradient([p + eps * t for p, t in zip(primals, tangents)])

    eps = 1e-6
    fd = [(a - b) / (2 * eps) for a, b in zip(moved(eps), moved(-eps))]
    torch.testing.assert_close(tangent, fd)
