"""Reference CPU kernels of the CUDA recurrent kernels, for the tests only:
`_thnn_fused_lstm_cell` and `_thnn_fused_gru_cell` (outputs and workspace as the
CUDA kernels lay them out) with their backward kernels, and cuDNN's whole stack
`_cudnn_rnn` with its backward `_cudnn_rnn_backward`.
"""

from __future__ import annotations

import torch
from torch import _VF

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


# cudnnRNNMode_t, and the CPU ops that run the same stack from the same weight
# list (torch's own path off CUDA).
_CUDNN_MODES = {0: _VF.rnn_relu, 1: _VF.rnn_tanh, 2: _VF.lstm, 3: _VF.gru}


def _cudnn_stack(
    input,
    weight,
    weight_stride0,
    hx,
    cx,
    mode,
    num_layers,
    batch_first,
    dropout,
    train,
    bidirectional,
    batch_sizes,
):
    """(output, hy, cy) of the layers cuDNN runs, by the CPU ops (cy empty without
    cx, as cuDNN returns it)."""
    if mode not in _CUDNN_MODES:
        raise RuntimeError(f"_cudnn_rnn: unknown mode {mode}")
    if (mode == 2) != (cx is not None):
        raise RuntimeError("_cudnn_rnn: cx is given for the LSTM (mode 2) only")
    check_real_floating("_cudnn_rnn", input)
    has_biases = weight_stride0 in (4, 5)
    state = (hx, cx) if mode == 2 else hx
    fn = _CUDNN_MODES[mode]
    if len(batch_sizes) > 0:
        sizes = torch.tensor(list(batch_sizes), dtype=torch.int64)
        result = fn(
            input,
            sizes,
            state,
            list(weight),
            has_biases,
            num_layers,
            dropout,
            train,
            bidirectional,
        )
    else:
        result = fn(
            input,
            state,
            list(weight),
            has_biases,
            num_layers,
            dropout,
            train,
            bidirectional,
            batch_first,
        )
    if mode == 2:
        return result
    return (*result, hx.new_zeros([0]))


def cudnn_rnn(
    input,
    weight,
    weight_stride0,
    weight_buf,
    hx,
    cx,
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
):
    """(output, hy, cy, reserve, weight_buf): cuDNN's stack. cuDNN reads the
    weights from `weight_buf` when given (their common storage); this reads the
    list. The reserve is empty (the backward below recomputes what cuDNN keeps
    there) and weight_buf, when not given, the weights flattened (cuDNN's own
    packing is opaque; nothing reads it but the backward, which reads the list)."""
    output, hy, cy = _cudnn_stack(
        input,
        weight,
        weight_stride0,
        hx,
        cx,
        mode,
        num_layers,
        batch_first,
        dropout,
        train,
        bidirectional,
        batch_sizes,
    )
    if weight_buf is None:
        weight_buf = torch.cat([w.reshape(-1) for w in weight])
    return output, hy, cy, input.new_zeros([0], dtype=torch.uint8), weight_buf


def _without_autograd_keys():
    """This thread's excluded dispatch keys less autograd's (which a kernel runs
    below)."""
    keys = torch._C._dispatch_tls_local_exclude_set()
    for name in (
        "ADInplaceOrView",
        "AutogradCPU",
        "AutogradOther",
        "AutogradFunctionality",
    ):
        keys = keys.remove(getattr(torch._C.DispatchKey, name))
    return keys


def cudnn_rnn_backward(
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
    output_mask,
):
    """(grad_input, grad_hx, grad_cx, grad_weight): the stack's gradients by
    autograd through the CPU ops (absent output gradients are zeros; training
    mode only, as cuDNN's)."""
    if not train:
        raise RuntimeError("cudnn RNN backward can only be called in training mode")
    if dropout > 0 and num_layers > 1:
        raise RuntimeError(
            "_cudnn_rnn_backward: the reference cannot replay cuDNN's dropout mask"
        )
    leaves = [t.detach().requires_grad_() for t in (input, hx, *weight)]
    cell = None if cx is None else cx.detach().requires_grad_()
    # A kernel runs below autograd (its keys excluded): let them back in for this.
    with (
        torch.enable_grad(),
        torch._C._ForceDispatchKeyGuard(
            torch._C._dispatch_tls_local_include_set(), _without_autograd_keys()
        ),
    ):
        outputs = _cudnn_stack(
            leaves[0],
            leaves[2:],
            weight_stride0,
            leaves[1],
            cell,
            mode,
            num_layers,
            batch_first,
            0.0,
            False,
            bidirectional,
            batch_sizes,
        )
        given = (grad_output, grad_hy, grad_cy)
        pairs = [(o, g) for o, g in zip(outputs, given) if g is not None and o.numel()]
        wrt = leaves + ([] if cell is None else [cell])
        grads = (
            torch.autograd.grad(
                [o for o, _ in pairs], wrt, [g for _, g in pairs], allow_unused=True
            )
            if pairs
            else [None] * len(wrt)
        )
    grads = [torch.zeros_like(t) if g is None else g for g, t in zip(grads, wrt)]
    grad_cx = grads[-1] if cell is not None else None
    return grads[0], grads[1], grad_cx, grads[2 : 2 + len(weight)]


KERNELS = {
    "_cudnn_rnn": cudnn_rnn,
    "_cudnn_rnn_backward": cudnn_rnn_backward,
    "_thnn_fused_lstm_cell": fused_lstm_cell,
    "_thnn_fused_gru_cell": fused_gru_cell,
    "_thnn_fused_lstm_cell_backward_impl": fused_lstm_cell_backward_impl,
    "_thnn_fused_gru_cell_backward": fused_gru_cell_backward,
}
