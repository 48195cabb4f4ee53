"""Helpers for fused recurrent layers: mkldnn_rnn_layer (an LSTM layer over time) and
its backward, through the recurrence the kernel computes.

`aten::mkldnn_rnn_layer` (what `nn.LSTM` reaches in float32 on CPU, one call per
layer and direction) runs one LSTM layer over a time-major input [T, B, I]:

    a_t = x_t W0^T + h_prev W1^T (+ b0 + b1 when has_biases)   gates i, f, g, o
    c_t = sigmoid(f) c_prev + sigmoid(i) tanh(g),   h_t = sigmoid(o) tanh(c_t)

over t = 0 .. T-1, or T-1 .. 0 when `reverse` (h_prev, c_prev: the previous step
processed, hx / cx before the first). It returns (output [T, B, H] with h_t at t,
hy, cy shaped like hx, cx, workspace). The kernel reads neither `batch_first`
(its caller transposes the input first) nor `bidirectional`, `num_layers` or
`train` (dropout is applied between layers by the caller); with `has_biases`
false the bias arguments are ignored. Only mode 2 (LSTM) and unpacked input
(`batch_sizes` empty) are supported, which is all that torch sends it.

Helpers take tangents that may be None (zero). Everything is computed in time
order, the recurrence being the only loop: gate pre-activations of all steps come
from one matmul, using the layer's output for h_prev.

One public helper, `lstm_layer_derivative`, takes the op's arguments flat, as
derivatives.yaml passes them, once for the four derivatives it computes (its
`kind`); inside, they travel bundled: the layer's primals (`_Layer`), tangents or
cotangents of its seven inputs (`_InputTangents`) and the gradients of its three
outputs or their tangents (`_OutputGrads`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["lstm_layer_derivative"]

# What lstm_layer_derivative computes, by kind, and how many tensors it reads along:
# the tangents of the layer's seven inputs (input, weight0 .. weight3, hx, cx), the
# gradients of its three outputs (output, hy, cy), or the backward op's own.
_ALONG = {"tangents": 7, "grads": 3, "backward_tangents": 10, "backward_grads": 7}


def _check_layer(mode: int, batch_sizes) -> None:
    if mode != 2:
        raise ValueError(
            f"mkldnn_rnn_layer: dualgen's rules cover mode 2 (LSTM) only, got mode {mode}"
        )
    if len(batch_sizes) != 0:
        raise ValueError(
            "mkldnn_rnn_layer: dualgen's rules cover unpacked input only (batch_sizes must be empty)"
        )


def _steps(T: int, reverse: bool) -> list:
    """The time indices in the order the layer processes them."""
    return list(range(T - 1, -1, -1)) if reverse else list(range(T))


def _shift(seq: torch.Tensor, first: torch.Tensor, reverse: bool) -> torch.Tensor:
    """For each time t, the value at the step processed before t: `first` ([B, H])
    for the first step processed, else seq at t - 1 (t + 1 when `reverse`)."""
    first = first.unsqueeze(0)
    if reverse:
        return torch.cat([seq[1:], first], 0)
    return torch.cat([first, seq[:-1]], 0)


def _or_zeros(t, like: torch.Tensor) -> torch.Tensor:
    return torch.zeros_like(like) if t is None else t


def _flat(t: torch.Tensor) -> torch.Tensor:
    return t.reshape(-1, t.shape[-1])


@dataclass(frozen=True)
class _Layer:
    """The primal arguments of one mkldnn_rnn_layer call that its recurrence reads
    (weight2, weight3: the biases; `output`: the layer's output)."""

    input: torch.Tensor
    weight0: torch.Tensor
    weight1: torch.Tensor
    weight2: torch.Tensor
    weight3: torch.Tensor
    hx: torch.Tensor
    cx: torch.Tensor
    output: torch.Tensor
    reverse: bool
    has_biases: bool

    @property
    def last(self) -> int:
        """The time index of the last step processed (that of hy, cy)."""
        return 0 if self.reverse else self.input.shape[0] - 1

    def state(self, t, like: torch.Tensor) -> torch.Tensor:
        """An hx- or cx-shaped value `t` (None: zero, like `like`) as [B, H]."""
        return _or_zeros(t, like).reshape(-1, self.hx.shape[-1])

    def states_shaped(self, h: torch.Tensor, c: torch.Tensor) -> tuple:
        """[B, H] values of hx and cx back in their shapes."""
        return h.reshape(self.hx.shape), c.reshape(self.cx.shape)

    def bias_grads(self, summed: torch.Tensor) -> tuple:
        """The two bias gradients from the summed gate gradients: zero when the
        op reads no bias argument."""
        if self.has_biases:
            return summed, summed
        return torch.zeros_like(self.weight2), torch.zeros_like(self.weight3)


@dataclass(frozen=True)
class _InputTangents:
    """Tangents (or cotangents) of the layer's inputs input, weight0 .. weight3,
    hx, cx; None: zero."""

    input: torch.Tensor | None
    weight0: torch.Tensor | None
    weight1: torch.Tensor | None
    weight2: torch.Tensor | None
    weight3: torch.Tensor | None
    hx: torch.Tensor | None
    cx: torch.Tensor | None


@dataclass(frozen=True)
class _OutputGrads:
    """Gradients of the layer's (output, hy, cy), or their tangents; None: zero."""

    output: torch.Tensor | None
    hy: torch.Tensor | None
    cy: torch.Tensor | None


def _lstm_states(layer: _Layer):
    """The layer's forward values, in time order: gate activations i, f, g, o
    ([T, B, H] each), cell states c, the previous cell state c_prev and the previous
    hidden state h_prev of every step."""
    h0, c0 = layer.state(layer.hx, layer.hx), layer.state(layer.cx, layer.cx)
    T = layer.input.shape[0]
    h_prev = _shift(layer.output, h0, layer.reverse)
    pre = torch.matmul(layer.input, layer.weight0.t()) + torch.matmul(
        h_prev, layer.weight1.t()
    )
    if layer.has_biases:
        pre = pre + (layer.weight2 + layer.weight3)
    a_i, a_f, a_g, a_o = pre.chunk(4, -1)
    i, f, g, o = a_i.sigmoid(), a_f.sigmoid(), a_g.tanh(), a_o.sigmoid()
    cells = [c0] * T
    c = c0
    for t in _steps(T, layer.reverse):
        c = f[t] * c + i[t] * g[t]
        cells[t] = c
    c_all = torch.stack(cells, 0)
    return i, f, g, o, c_all, _shift(c_all, c0, layer.reverse), h_prev


def _lstm_tangents(layer: _Layer, states, tangents: _InputTangents, bias_t: bool):
    """Tangents of the forward values, in time order: those of the gate
    activations di, df, dg, do, of the cells dc, previous cells dc_prev, hidden
    states dh (the output's tangent) and previous hidden states dh_prev. The bias
    tangents ([4H]) count only when `bias_t`."""
    i, f, g, o, c, c_prev, h_prev = states
    H = layer.hx.shape[-1]
    T = layer.input.shape[0]
    x_t, w0_t, w1_t = tangents.input, tangents.weight0, tangents.weight1
    # The pre-activations' tangent, but for dh_prev W1^T (the recurrence).
    dpre = torch.matmul(x_t, layer.weight0.t()) if x_t is not None else None
    terms = [
        torch.matmul(layer.input, w0_t.t()) if w0_t is not None else None,
        torch.matmul(h_prev, w1_t.t()) if w1_t is not None else None,
        tangents.weight2 if bias_t else None,
        tangents.weight3 if bias_t else None,
    ]
    for term in terms:
        if term is not None:
            dpre = term if dpre is None else dpre + term
    if dpre is None:
        dpre = torch.zeros(T, i.shape[1], 4 * H, dtype=i.dtype, device=i.device)
    elif dpre.dim() == 1:
        dpre = dpre.expand(T, i.shape[1], 4 * H)
    dh = layer.state(tangents.hx, layer.hx)
    dc = layer.state(tangents.cx, layer.cx)
    dh0, dc0 = dh, dc
    tc = c.tanh()
    dis, dfs, dgs, dos, dcs, dhs = ([dh] * T for _ in range(6))
    for t in _steps(T, layer.reverse):
        da = dpre[t] + torch.matmul(dh, layer.weight1.t())
        da_i, da_f, da_g, da_o = da.chunk(4, -1)
        di = i[t] * (1 - i[t]) * da_i
        df = f[t] * (1 - f[t]) * da_f
        dg = (1 - g[t] * g[t]) * da_g
        do = o[t] * (1 - o[t]) * da_o
        dc = df * c_prev[t] + f[t] * dc + di * g[t] + i[t] * dg
        dh = do * tc[t] + o[t] * (1 - tc[t] * tc[t]) * dc
        dis[t], dfs[t], dgs[t], dos[t], dcs[t], dhs[t] = di, df, dg, do, dc, dh
    di, df, dg, do, dc, dh = (torch.stack(s, 0) for s in (dis, dfs, dgs, dos, dcs, dhs))
    dc_prev, dh_prev = _shift(dc, dc0, layer.reverse), _shift(dh, dh0, layer.reverse)
    return di, df, dg, do, dc, dc_prev, dh, dh_prev


def _output_tangents(layer: _Layer, lstm_tangents) -> tuple:
    """The tangents of the layer's (output, hy, cy) among `_lstm_tangents`' values."""
    dc, dh = lstm_tangents[4], lstm_tangents[6]
    return (dh, *layer.states_shaped(dh[layer.last], dc[layer.last]))


def _gate_grads(layer: _Layer, states, grads: _OutputGrads):
    """Backpropagation through time: the gradient of every step's gate
    pre-activations ([T, B, 4H], time order) and of hx, cx ([B, H]), given those
    of the outputs."""
    i, f, g, o, c, c_prev, _ = states
    T = i.shape[0]
    dh = layer.state(grads.hy, layer.hx)
    dc = layer.state(grads.cy, layer.cx)
    tc = c.tanh()
    das = [dh] * T
    for t in reversed(_steps(T, layer.reverse)):
        if grads.output is not None:
            dh = dh + grads.output[t]
        dc = dc + dh * o[t] * (1 - tc[t] * tc[t])
        da = torch.cat(
            [
                dc * g[t] * i[t] * (1 - i[t]),
                dc * c_prev[t] * f[t] * (1 - f[t]),
                dc * i[t] * (1 - g[t] * g[t]),
                dh * tc[t] * o[t] * (1 - o[t]),
            ],
            -1,
        )
        das[t] = da
        dh = torch.matmul(da, layer.weight1)
        dc = dc * f[t]
    return torch.stack(das, 0), dh, dc


def lstm_layer_derivative(
    kind: str,
    along,
    input,
    weight0,
    weight1,
    weight2,
    weight3,
    hx,
    cx,
    output,
    grad_output,
    grad_hy,
    grad_cy,
    reverse: bool,
    mode: int,
    has_biases: bool,
    batch_sizes,
) -> tuple:
    """A derivative of mkldnn_rnn_layer (whose `output` is the layer's output: its
    shifted sequence is every step's previous hidden state) or of its backward op
    (which reads the layer's output gradients `grad_output`, `grad_hy`, `grad_cy`;
    None for the layer itself), by `kind`, along the tensors `along` (each None:
    zero):

    - "tangents": the tangents of the layer's (output, hy, cy) from those of its
      seven inputs (input, weight0 .. weight3, hx, cx; the biases' count only with
      `has_biases`);
    - "grads": the gradients of the seven inputs from those of (output, hy, cy),
      by backpropagation through time (the biases' zero without `has_biases`);
    - "backward_tangents": the tangents of mkldnn_rnn_layer_backward's seven
      outputs (both bias gradients the summed gate gradients, has_biases or not,
      as the op returns them) from those of the layer's seven inputs and of its
      three output gradients (ten along); the op's `output`, a function of the
      layer's inputs, moves with theirs;
    - "backward_grads": the gradients of mkldnn_rnn_layer_backward's ten
      differentiable inputs (the layer's seven, then its three output gradients)
      from those of its seven outputs.
    """
    _check_layer(mode, batch_sizes)
    count = _ALONG.get(kind)
    if count is None:
        raise ValueError(
            f"lstm_layer_derivative: kind is one of {', '.join(_ALONG)}, got '{kind}'"
        )
    if len(along) != count:
        raise ValueError(
            f"lstm_layer_derivative: '{kind}' reads {count} tensors along, "
            f"got {len(along)}"
        )
    layer = _Layer(
        input, weight0, weight1, weight2, weight3, hx, cx, output, reverse, has_biases
    )
    states = _lstm_states(layer)
    if kind == "grads":
        return _layer_grads(layer, states, _OutputGrads(*along))
    tangents = _InputTangents(*along[:7])
    grads = _OutputGrads(grad_output, grad_hy, grad_cy)
    if kind == "backward_grads":
        return _backward_grads(layer, states, tangents, grads)
    lstm_tangents = _lstm_tangents(layer, states, tangents, has_biases)
    if kind == "tangents":
        return _output_tangents(layer, lstm_tangents)
    grads_t = _OutputGrads(*along[7:])
    return _backward_tangents(layer, states, tangents, lstm_tangents, grads, grads_t)


def _layer_grads(layer: _Layer, states, grads: _OutputGrads) -> tuple:
    """Gradients of mkldnn_rnn_layer's seven inputs from those of (output, hy,
    cy), by backpropagation through time. Without `has_biases` the bias arguments
    get zero gradients."""
    da, dh, dc = _gate_grads(layer, states, grads)
    h_prev = states[6]
    g_input = torch.matmul(da, layer.weight0)
    g_w0 = torch.matmul(_flat(da).t(), _flat(layer.input))
    g_w1 = torch.matmul(_flat(da).t(), _flat(h_prev))
    g_b0, g_b1 = layer.bias_grads(da.sum((0, 1)))
    return g_input, g_w0, g_w1, g_b0, g_b1, *layer.states_shaped(dh, dc)


def _backward_grads(
    layer: _Layer, states, along: _InputTangents, grads: _OutputGrads
) -> tuple:
    """Gradients of mkldnn_rnn_layer_backward's differentiable inputs (input,
    weight0 .. weight3, hx, cx, grad_output, grad_hy, grad_cy) from those of its
    seven outputs (`along`). The op is the gradient of
    L = <grad_output, output> + <grad_hy, hy> + <grad_cy, cy> in the layer's
    inputs (with a bias at zero when not has_biases), so by the symmetry of L's
    Hessian the layer inputs' gradients are the op's own tangents along the
    seven gradients, and the output gradients' are the layer's tangents along
    them. Without has_biases the op reads no bias argument: those get zero
    gradients."""
    # The seven gradients, as tangents of the layer's inputs (biases always read).
    lstm_tangents = _lstm_tangents(layer, states, along, True)
    no_grads_t = _OutputGrads(None, None, None)
    g_in, g_w0, g_w1, g_b, _, g_hx, g_cx = _backward_tangents(
        layer, states, along, lstm_tangents, grads, no_grads_t
    )
    g_b0, g_b1 = layer.bias_grads(g_b)
    g_outputs = _output_tangents(layer, lstm_tangents)
    return (g_in, g_w0, g_w1, g_b0, g_b1, g_hx, g_cx, *g_outputs)


def _backward_tangents(
    layer: _Layer,
    states,
    tangents: _InputTangents,
    lstm_tangents,
    grads: _OutputGrads,
    grads_t: _OutputGrads,
):
    """Tangents of mkldnn_rnn_layer_backward's seven outputs (both bias gradients
    the summed gate gradients) along the layer inputs' `tangents` (whose forward
    values' tangents are `lstm_tangents`) and the output gradients' `grads_t`."""
    i, f, g, o, c, c_prev, h_prev = states
    di, df, dg, do, dc_all, dc_prev, _, dh_prev = lstm_tangents
    weight1 = layer.weight1
    T = layer.input.shape[0]
    tc = c.tanh()
    dtc = (1 - tc * tc) * dc_all
    # Adjoints (a*) and their tangents (d*), backwards in time.
    ah = layer.state(grads.hy, layer.hx)
    ac = layer.state(grads.cy, layer.cx)
    dah = layer.state(grads_t.hy, layer.hx)
    dac = layer.state(grads_t.cy, layer.cx)
    w1_t = _or_zeros(tangents.weight1, weight1)
    das, ddas = [ah] * T, [ah] * T
    for t in reversed(_steps(T, layer.reverse)):
        if grads.output is not None:
            ah = ah + grads.output[t]
        if grads_t.output is not None:
            dah = dah + grads_t.output[t]
        k = 1 - tc[t] * tc[t]
        ac_new = ac + ah * o[t] * k
        dac = dac + dah * o[t] * k + ah * do[t] * k - 2 * ah * o[t] * tc[t] * dtc[t]
        ac = ac_new
        si, sf, so = i[t] * (1 - i[t]), f[t] * (1 - f[t]), o[t] * (1 - o[t])
        sg = 1 - g[t] * g[t]
        a_i = ac * g[t]
        a_f = ac * c_prev[t]
        a_g = ac * i[t]
        a_o = ah * tc[t]
        d_i = dac * g[t] + ac * dg[t]
        d_f = dac * c_prev[t] + ac * dc_prev[t]
        d_g = dac * i[t] + ac * di[t]
        d_o = dah * tc[t] + ah * dtc[t]
        da = torch.cat([a_i * si, a_f * sf, a_g * sg, a_o * so], -1)
        dda = torch.cat(
            [
                d_i * si + a_i * di[t] * (1 - 2 * i[t]),
                d_f * sf + a_f * df[t] * (1 - 2 * f[t]),
                d_g * sg - 2 * a_g * g[t] * dg[t],
                d_o * so + a_o * do[t] * (1 - 2 * o[t]),
            ],
            -1,
        )
        das[t], ddas[t] = da, dda
        ah, dah = torch.matmul(da, weight1), torch.matmul(dda, weight1) + torch.matmul(
            da, w1_t
        )
        ac, dac = ac * f[t], dac * f[t] + ac * df[t]
    da, dda = torch.stack(das, 0), torch.stack(ddas, 0)
    g_input_t = torch.matmul(dda, layer.weight0)
    if tangents.weight0 is not None:
        g_input_t = g_input_t + torch.matmul(da, tangents.weight0)
    g_w0_t = torch.matmul(_flat(dda).t(), _flat(layer.input))
    if tangents.input is not None:
        g_w0_t = g_w0_t + torch.matmul(_flat(da).t(), _flat(tangents.input))
    g_w1_t = torch.matmul(_flat(dda).t(), _flat(h_prev)) + torch.matmul(
        _flat(da).t(), _flat(dh_prev)
    )
    g_b_t = dda.sum((0, 1))
    return (g_input_t, g_w0_t, g_w1_t, g_b_t, g_b_t, *layer.states_shaped(dah, dac))
