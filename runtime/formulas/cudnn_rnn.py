"""Tangents of aten::_cudnn_rnn: the whole stack of recurrent layers that nn.RNN,
nn.LSTM and nn.GRU reach on CUDA, one call for all layers and directions.

The op's arguments, as cuDNN reads them:

- `input`: [T, B, I] ([B, T, I] with `batch_first`), or packed ([N, I] with
  `batch_sizes` the rows of each time step, non-increasing: a PackedSequence);
- `weight`: for each layer and direction (layer-major, the reverse direction
  second) `weight_stride0` tensors: w_ih [G H, I], w_hh [G H, P], then b_ih, b_hh
  [G H] when the stride is 4 or 5, then w_hr [P, H] when `proj_size` > 0 (P:
  proj_size, else H; G: the gates of `mode`). cuDNN reads them from `weight_buf`
  when given, which nn.RNN makes their common storage: their tangents are the
  list's;
- `hx` [L D, B, P], `cx` [L D, B, H] (LSTM only), D = 2 when `bidirectional`;
- `mode`: 0 ReLU RNN, 1 tanh RNN, 2 LSTM, 3 GRU (cudnnRNNMode_t), with the cells

      RNN:  h = act(W_ih x + b_ih + W_hh h' + b_hh)
      LSTM: i, f, g, o = sigmoid, sigmoid, tanh, sigmoid of (W_ih x + b_ih + W_hh h' + b_hh)
            c = f c' + i g,   h = o tanh(c)   (times W_hr^T with a projection)
      GRU:  r, z = sigmoid of (W_ih x + b_ih + W_hh h' + b_hh) [r, z rows]
            n = tanh(W_in x + b_in + r (W_hn h' + b_hn)),   h = (1 - z) n + z h'

It returns (output [T, B, D P] or packed [N, D P], hy, cy, reserve, weight_buf):
cy is empty ([0]) without cx. With `dropout` > 0 in training and more than one
layer, cuDNN drops each layer's output but the last with a mask it draws inside
and never returns: no rule can follow that, so the helper refuses it.

The tangent is the layers' dual recurrence, written out: each step computes its
primal values (which the tangent's coefficients need; the op returns only the
last layer's) and their tangents. Inputs are kept packed throughout, an
unpacked input being the packing with every step B rows, so one loop serves
both: step t updates the first batch_sizes[t] rows of the state, the others
keeping theirs (a sequence that has ended, or in reverse not yet begun).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["cudnn_rnn_grads", "cudnn_rnn_tangents"]

# cudnnRNNMode_t: the number of gates each mode's weights stack.
_GATES = {0: 1, 1: 1, 2: 4, 3: 3}


def _check(mode, weight, weight_stride0, proj_size, num_layers, bidirectional):
    if mode not in _GATES:
        raise ValueError(
            f"_cudnn_rnn: mode is 0, 1, 2 or 3 (cudnnRNNMode_t), got {mode}"
        )
    directions = 2 if bidirectional else 1
    expected = (2 + (2 if weight_stride0 in (4, 5) else 0)) + (
        1 if proj_size > 0 else 0
    )
    if (
        weight_stride0 != expected
        or len(weight) != weight_stride0 * num_layers * directions
    ):
        raise ValueError(
            f"_cudnn_rnn: {len(weight)} weights with weight_stride0 {weight_stride0} do not "
            f"make {num_layers} layer(s) of {directions} direction(s)"
            + (" with a projection" if proj_size > 0 else "")
        )


def _refuse_dropout(dropout, train, num_layers):
    if dropout > 0 and train and num_layers > 1:
        raise ValueError(
            "_cudnn_rnn: dropout between layers draws its mask inside cuDNN, where no "
            "tangent can follow it; dualgen refuses dropout > 0 in training (use "
            "dropout=0, or eval())"
        )


def _linear(x, dx, w, dw, b, db):
    """(x W^T + b, its tangent); b, db may be None."""
    y = torch.matmul(x, w.t())
    dy = torch.matmul(dx, w.t()) + torch.matmul(x, dw.t())
    if b is not None:
        y, dy = y + b, dy + db
    return y, dy


def _sigmoid(a, da):
    s = a.sigmoid()
    return s, s * (1 - s) * da


def _tanh(a, da):
    t = a.tanh()
    return t, (1 - t * t) * da


def _cell(mode, gi, dgi, h, dh, c, dc, w):
    """One step of `mode`'s cell on the rows of the step: the input's share of the
    gates gi (bias included) and its tangent, the previous state (h, c) and its
    tangent, the direction's weights `w` (_Weights); the new (h, c) and tangents
    (c: None but for the LSTM)."""
    gh, dgh = _linear(h, dh, w.w_hh, w.dw_hh, w.b_hh, w.db_hh)
    if mode in (0, 1):
        a, da = gi + gh, dgi + dgh
        if mode == 0:
            return a.relu(), (a > 0).to(da.dtype) * da, None, None
        h, dh = _tanh(a, da)
        return h, dh, None, None
    if mode == 3:
        r_i, z_i, n_i = gi.chunk(3, -1)
        r_h, z_h, n_h = gh.chunk(3, -1)
        dr_i, dz_i, dn_i = dgi.chunk(3, -1)
        dr_h, dz_h, dn_h = dgh.chunk(3, -1)
        r, dr = _sigmoid(r_i + r_h, dr_i + dr_h)
        z, dz = _sigmoid(z_i + z_h, dz_i + dz_h)
        n, dn = _tanh(n_i + r * n_h, dn_i + dr * n_h + r * dn_h)
        return (1 - z) * n + z * h, (1 - z) * dn + z * dh + dz * (h - n), None, None
    a_i, a_f, a_g, a_o = (gi + gh).chunk(4, -1)
    da_i, da_f, da_g, da_o = (dgi + dgh).chunk(4, -1)
    i, di = _sigmoid(a_i, da_i)
    f, df = _sigmoid(a_f, da_f)
    g, dg = _tanh(a_g, da_g)
    o, do = _sigmoid(a_o, da_o)
    c_new = f * c + i * g
    dc_new = df * c + f * dc + di * g + i * dg
    tc, dtc = _tanh(c_new, dc_new)
    m, dm = o * tc, do * tc + o * dtc
    if w.w_hr is not None:
        m, dm = _linear(m, dm, w.w_hr, w.dw_hr, None, None)
    return m, dm, c_new, dc_new


@dataclass(frozen=True)
class _Weights:
    """One layer and direction's weights and their tangents, by name (biases and
    the projection None where the op has none)."""

    w_ih: torch.Tensor
    w_hh: torch.Tensor
    b_ih: torch.Tensor | None
    b_hh: torch.Tensor | None
    w_hr: torch.Tensor | None
    dw_ih: torch.Tensor
    dw_hh: torch.Tensor
    db_ih: torch.Tensor | None
    db_hh: torch.Tensor | None
    dw_hr: torch.Tensor | None

    @classmethod
    def of(cls, weights, tangents, has_bias: bool, has_proj: bool) -> _Weights:
        """From the stride of the weight list (and its tangents) one layer and
        direction own: w_ih, w_hh[, b_ih, b_hh][, w_hr]."""

        def named(ws):
            biases = (ws[2], ws[3]) if has_bias else (None, None)
            return (ws[0], ws[1], *biases, ws[-1] if has_proj else None)

        return cls(*named(weights), *named(tangents))


def _direction(mode, w, x, dx, sizes, h, dh, c, dc, reverse: bool):
    """One layer in one direction over the packed input x [N, I] (`sizes`: rows of
    each step): its output rows [N, P] and tangent, and the final state and its
    tangent (c, dc: None but for the LSTM)."""
    gi_all, dgi_all = _linear(x, dx, w.w_ih, w.dw_ih, w.b_ih, w.db_ih)
    gis, dgis = gi_all.split(sizes, 0), dgi_all.split(sizes, 0)
    order = range(len(sizes) - 1, -1, -1) if reverse else range(len(sizes))
    outs, douts = [None] * len(sizes), [None] * len(sizes)
    full = h.shape[0]
    for t in order:
        b = sizes[t]
        c_rows = None if c is None else c[:b]
        dc_rows = None if dc is None else dc[:b]
        h_new, dh_new, c_new, dc_new = _cell(
            mode, gis[t], dgis[t], h[:b], dh[:b], c_rows, dc_rows, w
        )
        outs[t], douts[t] = h_new, dh_new
        if b < full:
            h_new, dh_new = torch.cat([h_new, h[b:]]), torch.cat([dh_new, dh[b:]])
            if c is not None:
                c_new, dc_new = torch.cat([c_new, c[b:]]), torch.cat([dc_new, dc[b:]])
        h, dh, c, dc = h_new, dh_new, c_new, dc_new
    return torch.cat(outs), torch.cat(douts), h, dh, c, dc


def cudnn_rnn_tangents(
    input_t,
    weight_t,
    hx_t,
    cx_t,
    input,
    weight,
    weight_stride0: int,
    hx,
    cx,
    mode: int,
    proj_size: int,
    num_layers: int,
    batch_first: bool,
    dropout: float,
    train: bool,
    bidirectional: bool,
    batch_sizes,
) -> list:
    """The tangents of _cudnn_rnn's (output, hy, cy) along those of input, the
    weight list, hx and cx (cx, cx_t: None without a cell state; then cy's
    tangent is empty, as cy is)."""
    _check(mode, weight, weight_stride0, proj_size, num_layers, bidirectional)
    _refuse_dropout(dropout, train, num_layers)
    directions = 2 if bidirectional else 1
    packed = len(batch_sizes) > 0
    if packed:
        sizes = [int(b) for b in batch_sizes]
        x, dx = input, input_t
    else:
        seq = input.transpose(0, 1) if batch_first else input
        dseq = input_t.transpose(0, 1) if batch_first else input_t
        sizes = [seq.shape[1]] * seq.shape[0]
        x, dx = seq.reshape(-1, seq.shape[-1]), dseq.reshape(-1, seq.shape[-1])
    has_bias, has_proj = weight_stride0 in (4, 5), proj_size > 0
    hys, dhys, cys, dcys = [], [], [], []
    for layer in range(num_layers):
        outs, douts = [], []
        for d in range(directions):
            k = layer * directions + d
            at = slice(k * weight_stride0, (k + 1) * weight_stride0)
            w = _Weights.of(weight[at], weight_t[at], has_bias, has_proj)
            c0 = None if cx is None else cx[k]
            dc0 = None if cx is None else cx_t[k]
            out, dout, h, dh, c, dc = _direction(
                mode, w, x, dx, sizes, hx[k], hx_t[k], c0, dc0, d == 1
            )
            outs.append(out)
            douts.append(dout)
            hys.append(h)
            dhys.append(dh)
            cys.append(c)
            dcys.append(dc)
        x, dx = torch.cat(outs, -1), torch.cat(douts, -1)
    output_t = dx
    if not packed:
        output_t = dx.reshape(len(sizes), sizes[0] if sizes else 0, dx.shape[-1])
        if batch_first:
            output_t = output_t.transpose(0, 1)
    hy_t = torch.stack(dhys)
    cy_t = hx.new_zeros([0]) if cx is None else torch.stack(dcys)
    return [output_t, hy_t, cy_t]


def cudnn_rnn_grads(
    grad_output,
    grad_hy,
    grad_cy,
    input,
    weight,
    weight_stride0: int,
    weight_buf,
    hx,
    cx,
    output,
    mode: int,
    hidden_size: int,
    proj_size: int,
    num_layers: int,
    batch_first: bool,
    dropout: float,
    train: bool,
    bidirectional: bool,
    batch_sizes,
    dropout_state,
    reserve,
) -> tuple:
    """The gradients of _cudnn_rnn's input, weight list, hx and cx from those of
    (output, hy, cy), by the kernel autograd calls for it (_cudnn_rnn_backward,
    which reads the forward's output, its `reserve` and the `weight_buf` it
    returned; training mode only, as for autograd)."""
    grad_input, grad_hx, grad_cx, grad_weight = torch.ops.aten._cudnn_rnn_backward(
        input,
        weight,
        weight_stride0,
        weight_buf,
        hx,
        cx,
        output,
        grad_output,
        grad_hy,
        grad_cy,
        mode,
        hidden_size,
        proj_size,
        num_layers,
        batch_first,
        dropout,
        train,
        bidirectional,
        batch_sizes,
        dropout_state,
        reserve,
        [True, True, cx is not None, True],
    )
    return grad_input, list(grad_weight), grad_hx, grad_cx if cx is not None else None
