"""Reference CPU kernels of the CUDA RNN cells, for the tests only:
`_thnn_fused_lstm_cell` and `_thnn_fused_gru_cell` (outputs and workspace as the
CUDA kernels lay them out) with their backward kernels.
"""

from __future__ import annotations

import torch

from .common import check_real_floating


def _with_bias(gates, bias):
    return gates if bias is None else gates + bias


def _check_cell(name, input_gates, hidden_gates, state, input_bias, hidden_bias, n):
    """The CUDA cells' checks: gates [B, n H] alike, the state [B, H], both biases
    [n H] or neither."""
    check_real_floating(name, input_gates)
    hidden = state.size(-1) if state.dim() == 2 else -1
    if (
        hidden < 0
        or input_gates.shape != hidden_gates.shape
        or input_gates.shape != (state.size(0), n * hidden)
    ):
        raise RuntimeError(
            f"{name}: gates must be [B, {n} * hidden] and the state [B, hidden]"
        )
    if (input_bias is None) != (hidden_bias is None):
        raise RuntimeError(f"{name}: give both biases or neither")
    for bias in (input_bias, hidden_bias):
        if bias is not None and bias.shape != (n * hidden,):
            raise RuntimeError(f"{name}: a bias must be [{n} * hidden]")


def fused_lstm_cell(input_gates, hidden_gates, cx, input_bias=None, hidden_bias=None):
    """(hy, cy, workspace): one LSTM step from its gate pre-activations, the
    workspace [B, 4H] holding the activated gates i, f, g, o, as the CUDA kernel
    saves them."""
    _check_cell(
        "_thnn_fused_lstm_cell",
        input_gates,
        hidden_gates,
        cx,
        input_bias,
        hidden_bias,
        4,
    )
    gates = _with_bias(input_gates, input_bias) + _with_bias(hidden_gates, hidden_bias)
    i, f, g, o = gates.chunk(4, 1)
    i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
    cy = f * cx + i * g
    hy = o * cy.tanh()
    return hy, cy, torch.cat([i, f, g, o], 1)


def fused_gru_cell(input_gates, hidden_gates, hx, input_bias=None, hidden_bias=None):
    """(hy, workspace): one GRU step from its gate pre-activations, the workspace
    [B, 5H] holding r, z, n, hx and the hidden share of n (bias included), as the
    CUDA kernel saves them."""
    _check_cell(
        "_thnn_fused_gru_cell",
        input_gates,
        hidden_gates,
        hx,
        input_bias,
        hidden_bias,
        3,
    )
    xr, xz, xn = _with_bias(input_gates, input_bias).chunk(3, 1)
    hr, hz, hn = _with_bias(hidden_gates, hidden_bias).chunk(3, 1)
    r = (xr + hr).sigmoid()
    z = (xz + hz).sigmoid()
    n = (xn + r * hn).tanh()
    hy = n + z * (hx - n)
    return hy, torch.cat([r, z, n, hx, hn], 1)


def fused_lstm_cell_backward_impl(grad_hy, grad_cy, cx, cy, workspace, has_bias):
    """(grad_gates, grad_cx, grad_bias): the LSTM cell's backward kernel, from the
    activated gates the forward saved (absent gradients are zeros; grad_bias the
    gates' summed over the batch, undefined without biases)."""
    check_real_floating("_thnn_fused_lstm_cell_backward_impl", workspace)
    i, f, g, o = workspace.chunk(4, 1)
    grad_hy = torch.zeros_like(cx) if grad_hy is None else grad_hy
    grad_cy = torch.zeros_like(cx) if grad_cy is None else grad_cy
    tanh_cy = cy.tanh()
    grad_c = grad_hy * o * (1 - tanh_cy**2) + grad_cy
    grad_gates = torch.cat(
        [
            grad_c * g * i * (1 - i),
            grad_c * cx * f * (1 - f),
            grad_c * i * (1 - g**2),
            grad_hy * tanh_cy * o * (1 - o),
        ],
        1,
    )
    grad_bias = grad_gates.sum(0) if has_bias else None
    return grad_gates, grad_c * f, grad_bias


def fused_gru_cell_backward(grad_hy, workspace, has_bias):
    """(grad_input_gates, grad_hidden_gates, grad_hx, grad_input_bias,
    grad_hidden_bias): the GRU cell's backward kernel, from r, z, n, hx and the
    hidden share of n the forward saved."""
    check_real_floating("_thnn_fused_gru_cell_backward", workspace)
    r, z, n, hx, hn = workspace.chunk(5, 1)
    grad_n = grad_hy * (1 - z) * (1 - n**2)
    grad_z = grad_hy * (hx - n) * z * (1 - z)
    grad_r = grad_n * hn * r * (1 - r)
    grad_input = torch.cat([grad_r, grad_z, grad_n], 1)
    grad_hidden = torch.cat([grad_r, grad_z, grad_n * r], 1)
    if not has_bias:
        return grad_input, grad_hidden, grad_hy * z, None, None
    return grad_input, grad_hidden, grad_hy * z, grad_input.sum(0), grad_hidden.sum(0)


KERNELS = {
    "_thnn_fused_lstm_cell": fused_lstm_cell,
    "_thnn_fused_gru_cell": fused_gru_cell,
    "_thnn_fused_lstm_cell_backward_impl": fused_lstm_cell_backward_impl,
    "_thnn_fused_gru_cell_backward": fused_gru_cell_backward,
}
