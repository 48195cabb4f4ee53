"""Helpers for the formulas of backward ops (`*_backward`): forward-over-reverse.

A backward op's forward formula (and its own backward formula) differentiates the
op's first derivative again: the second derivatives of elu, gelu, mish and binary
cross entropy, glu's double backward, the gradients of convolution_backward
and embedding_dense_backward, and the tangents and gradients of the norms'
backward ops. These
helpers serve only entries of `*_backward` ops.
"""

from __future__ import annotations

import torch

from dualgen.generated.helpers import channel_view, group_shape

__all__ = [
    "convolution_backward_grads",
    "embedding_dense_backward_grad",
    "glu_tangent",
    "norm_backward_grads",
    "norm_backward_tangent",
]


def glu_tangent(t, self, dim: int):
    """The tangent of glu(self, dim) = a * sigmoid(b) ((a, b) the halves of self along
    `dim`) for the input tangent t: t_a sigmoid(b) + a sigmoid'(b) t_b. Also the
    gradient of glu_backward with respect to its grad_output (real)."""
    a, b = self.chunk(2, dim)
    ta, tb = t.chunk(2, dim)
    s = b.sigmoid()
    return ta * s + a * s * (1 - s) * tb


def _conv_backward(grad_output, input, weight, conv_args, mask):
    """convolution_backward without bias sizes; `conv_args`: (stride, padding,
    dilation, transposed, output_padding, groups), the convolution's own."""
    return torch.ops.aten.convolution_backward(
        grad_output, input, weight, None, *conv_args, mask
    )


def convolution_backward_grads(
    grad_input_grad, grad_weight_grad, grad_bias_grad, grad_output, input, weight, args
) -> tuple:
    """Gradients of `convolution_backward` (grad_output, input, weight) from those of
    its three outputs (None where absent). With A(w) the convolution x -> conv(x, w)
    and C(x) the map w -> conv(x, w), the outputs are A(w)^H g, C(x)^H g and the
    sum of g over all but the channel dimension (bilinear in (g, w), bilinear in
    (g, x), linear in g), so grad_output gets conv(gI, w) + conv(x, gW) + gb (per
    channel), input gets A(gW)^H g and weight gets C(gI)^H g. `args`: the
    convolution's own (stride, padding, dilation, transposed, output_padding,
    groups), as one tuple (a backward formula runs in Python only)."""
    go_grad = input_grad = weight_grad = None

    def conv(x, w):
        return torch.ops.aten.convolution(x, w, None, *args)

    if grad_input_grad is not None:
        go_grad = conv(grad_input_grad, weight)
        weight_grad = _conv_backward(
            grad_output, grad_input_grad, weight, args, [False, True, False]
        )[1]
    if grad_weight_grad is not None:
        term = conv(input, grad_weight_grad)
        go_grad = term if go_grad is None else go_grad + term
        input_grad = _conv_backward(
            grad_output, input, grad_weight_grad, args, [True, False, False]
        )[0]
    if grad_bias_grad is not None:
        term = channel_view(grad_bias_grad, grad_output.dim()).expand(grad_output.shape)
        go_grad = term if go_grad is None else go_grad + term
    return go_grad, input_grad, weight_grad


def embedding_dense_backward_grad(
    grad, indices, padding_idx, scale_grad_by_freq: bool
) -> torch.Tensor:
    """Gradient of `embedding_dense_backward` at its grad_output: the op adds row i
    of grad_output into row indices[i] (skipping padding_idx, divided by the count
    of each index when scale_grad_by_freq), so its adjoint reads `grad` back at
    `indices` with the same mask and scale."""
    flat = indices.reshape(-1)
    rows = grad.index_select(0, flat)
    if scale_grad_by_freq:
        counts = torch.bincount(flat, minlength=grad.shape[0]).to(grad.dtype)
        rows = rows / counts.index_select(0, flat).unsqueeze(-1)
    if padding_idx is not None and padding_idx >= 0:
        rows = rows * (flat != padding_idx).unsqueeze(-1).to(rows.dtype)
    return rows.reshape(list(indices.shape) + [grad.shape[-1]])


# The backward ops of layer, batch and group norm compute, over the reduced
# dimensions `dims` of a layout where the statistics broadcast,
#   grad_input = r * (u - mean(u) - xhat * mean(u * xhat)),  u = g * w,
#   xhat = (x - mean) * r,  grad_weight = sum(g * xhat),  grad_bias = sum(g),
# the weight sums over the dimensions the weight is broadcast along.


class _NormLayout:
    """How one norm's tensors are laid out so that `dims` are the reduced ones:
    `view` (input-shaped tensors), `stat` (mean, rstd: broadcastable), `wview`
    (the weight, a bias-shaped gradient); `out` maps back to the input's shape and
    `to_weight` sums to the weight's."""

    def __init__(self, kind, input, extra):
        self.kind = kind
        self.shape = input.shape
        ndim = input.dim()
        if kind == "layer":
            k = len(extra)
            self.dims = list(range(ndim - k, ndim))
            self.wshape = list(extra)
            self.view = lambda t: t
            self.stat = lambda t: t
            self.wview = lambda w: w
        elif kind == "batch":
            self.dims = [0] + list(range(2, ndim))
            self.view = lambda t: t
            self.stat = lambda t: channel_view(t, ndim)
            self.wview = lambda w: channel_view(w, ndim)
        else:  # group: [N, group, C / group * HxW]
            group = extra
            c = input.shape[1]
            shape = group_shape(input, group)
            self.dims = [-1]
            self.view = lambda t: t.reshape(shape)
            self.stat = lambda t: t.unsqueeze(-1)
            hxw = input.shape[2:].numel()

            def wview(w):
                return w.reshape(1, c, 1).expand(1, c, hxw).reshape(1, group, -1)

            self.wview = wview
        self.ndim = ndim

    def out(self, t):
        return t.reshape(self.shape)

    def to_weight(self, t):
        """A layout tensor summed to the weight's (or bias's) shape."""
        t = t.reshape(self.shape)
        if self.kind == "layer":
            lead = self.ndim - len(self.wshape)
            return t.sum(list(range(lead))) if lead else t
        return t.sum([0] + list(range(2, self.ndim)))

    def from_weight(self, t):
        """A weight-shaped tensor broadcast to the layout."""
        return self.wview(t)

    def mean(self, t):
        return t.mean(self.dims, keepdim=True)

    def sum(self, t):
        return t.sum(self.dims, keepdim=True)


def _norm_layout(kind, primals, extra, train, eps):
    """The layout of the norm's `primals` (grad_out, input, weight, mean, rstd)
    and, in it, g, x, mean, rstd (eval batch norm: from the running statistics)
    and the weight (None without one)."""
    grad_out, input, weight, mean, rstd = primals
    layout = _NormLayout(kind, input, extra)
    x = layout.view(input)
    if kind == "batch" and not train:
        m = layout.stat(mean)
        r = layout.stat((rstd + eps).rsqrt())
    else:
        m, r = layout.stat(mean), layout.stat(rstd)
    w = None if weight is None else layout.wview(weight)
    return layout, layout.view(grad_out), x, m, r, w


def _moving_with_input(layout, x, m, r):
    """The saved statistics m and r as functions of x for autograd: their values,
    with the derivatives of x's mean and rstd (r's from r itself, as the backward
    op is given no eps: d r = -r^3 d var / 2). Autograd sees saved statistics as
    constants, while the tangent formula takes them as x's; without this, the
    gradient of a tangent (reverse over forward over reverse) would miss their
    terms. Unchanged where autograd records no x, or records the statistics."""
    if not x.requires_grad or m.requires_grad or r.requires_grad:
        return m, r
    mean = layout.mean(x)
    var = layout.mean((x - mean).square())
    return m + (mean - mean.detach()), r - 0.5 * r.pow(3) * (var - var.detach())


def norm_backward_tangent(
    which: int, result, kind: str, tangents, primals, extra, train=True, eps=0.0
):
    """Tangent of output `which` (grad_input, grad_weight, grad_bias) of the
    backward op of a norm, `kind` "layer" (`extra`: normalized_shape), "batch"
    (`extra`: None; `mean`, `rstd`: save_mean, save_invstd in training,
    running_mean, running_var in eval with `eps`) or "group" (`extra`: the group
    count), along the `tangents` of its `primals` (grad_out, input, weight, mean,
    rstd); None where that output was not computed. Tangents may be None (the
    weight's when there is none).

    With mean_t = rstd_t = None the statistics are taken as the input's, moving
    with it: xhat_t = r (x_t - mean(x_t) - xhat mean(xhat x_t)),
    r_t = -r^2 mean(xhat x_t) (the total derivative; what forward-over-reverse
    needs, as the saved statistics of layer and batch norm carry no tangent).
    Given their tangents (group norm only), they are inputs of their own:
    xhat_t = r_t (x - mean) + r (x_t - mean_t) (the partial derivatives)."""
    if result is None:
        return None
    grad_out_t, input_t, weight_t, mean_t, rstd_t = tangents
    layout, g, x, m, r, w = _norm_layout(kind, primals, extra, train, eps)
    eval_mode = kind == "batch" and not train
    if not eval_mode and mean_t is None:
        m, r = _moving_with_input(layout, x, m, r)
    xhat = (x - m) * r
    g_t = None if grad_out_t is None else layout.view(grad_out_t)
    x_t = None if input_t is None else layout.view(input_t)
    w_t = None if weight_t is None else layout.wview(weight_t)
    if which == 2:
        return layout.to_weight(g_t)
    if eval_mode:
        xhat_t = x_t * r
        r_t = None
    elif mean_t is not None:
        xhat_t = (x - m) * layout.stat(rstd_t) + r * (x_t - layout.stat(mean_t))
        r_t = layout.stat(rstd_t)
    else:
        xhat_t = r * (x_t - layout.mean(x_t) - xhat * layout.mean(xhat * x_t))
        r_t = -r * r * layout.mean(xhat * x_t)
    if which == 1:
        return layout.to_weight(g_t * xhat + g * xhat_t)
    u = g if w is None else g * w
    u_t = g_t if w is None else g_t * w
    if w_t is not None:
        u_t = u_t + g * w_t
    if eval_mode:
        return layout.out(u_t * r)
    inner = u - layout.mean(u) - xhat * layout.mean(u * xhat)
    inner_t = (
        u_t
        - layout.mean(u_t)
        - xhat_t * layout.mean(u * xhat)
        - xhat * layout.mean(u_t * xhat + u * xhat_t)
    )
    return layout.out(r_t * inner + r * inner_t)


def norm_backward_grads(
    grad_input_grad,
    grad_weight_grad,
    grad_bias_grad,
    kind: str,
    primals,
    extra,
    train=True,
    eps=0.0,
    stats_are_inputs: bool = False,
) -> tuple:
    """Gradients of a norm's backward op (see `norm_backward_tangent`) in its
    `primals` (grad_out, input, weight, mean, rstd) from those of its three
    outputs (None where absent), the adjoint of the tangent map. The statistics are the input's (their
    gradient flows into the input's; None for mean and rstd) unless
    `stats_are_inputs` (group norm only: the partial derivatives); the weight's is
    None without a weight."""
    layout, g, x, m, r, w = _norm_layout(kind, primals, extra, train, eps)
    xhat = (x - m) * r
    eval_mode = kind == "batch" and not train
    zero = torch.zeros_like(x)
    gi = zero if grad_input_grad is None else layout.view(grad_input_grad)
    gw = zero if grad_weight_grad is None else layout.from_weight(grad_weight_grad)
    gb = zero if grad_bias_grad is None else layout.from_weight(grad_bias_grad)
    if eval_mode:
        u_grad = gi * r
        xhat_grad = g * gw
        r_grad = None
    else:
        u = g if w is None else g * w
        # grad_input = r * Q(u): Q is symmetric, so u's gradient is r * Q(gi).
        u_grad = r * (gi - layout.mean(gi) - xhat * layout.mean(xhat * gi))
        xhat_grad = -r * (gi * layout.mean(u * xhat) + u * layout.mean(gi * xhat))
        xhat_grad = xhat_grad + g * gw
        inner = u - layout.mean(u) - xhat * layout.mean(u * xhat)
        r_grad = layout.sum(gi * inner)
    g_grad = (u_grad if w is None else u_grad * w) + gw * xhat + gb
    weight_grad = None if w is None else layout.to_weight(u_grad * g)
    mean_grad = rstd_grad = None
    if eval_mode:
        input_grad = xhat_grad * r
    elif stats_are_inputs:
        input_grad = r * xhat_grad
        mean_grad = -layout.sum(input_grad).squeeze(-1)
        rstd_grad = (r_grad + layout.sum(xhat_grad * (x - m))).squeeze(-1)
    else:
        # xhat_t = r * P(x_t) with P symmetric; r_t = -r^2 mean(xhat * x_t).
        input_grad = r * (
            xhat_grad - layout.mean(xhat_grad) - xhat * layout.mean(xhat * xhat_grad)
        )
        count = max(x.numel() // max(r.numel(), 1), 1)
        input_grad = input_grad - r * r * xhat * r_grad / count
    return (
        layout.out(g_grad),
        layout.out(input_grad),
        weight_grad,
        mean_grad,
        rstd_grad,
    )
