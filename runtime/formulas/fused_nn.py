"""Helpers for other fused nn kernels real models reach: grid sampling, embedding
bags, CTC loss and pairwise distances.

- Grid sampling (`grid_sampler_2d`, `grid_sampler_3d` and their backward ops): the
  output is a sum over interpolation taps of input values times weights that are
  functions of the grid; the helpers write those taps out (the op's definition:
  unnormalization, the padding modes' clip and reflection, bilinear, nearest and
  bicubic weights) with the weights' first and second derivatives in the grid.
- CTC loss: the true gradient in `log_probs` (native's backward assumes they come
  out of a log_softmax), written once in helpers/fused_nn.yaml.
- Pairwise distances (`_cdist_forward`, `_euclidean_dist`, `_cdist_backward`): the
  derivative of a p-norm distance in the coordinate differences, and its own
  derivatives, are written once in helpers/fused_nn.yaml.
- Grouped matmul (`_grouped_mm`, mixture-of-experts layers): the op on operands in
  any layout, zero where its groups do not reach (its tangents and gradients are
  the op again).
"""

from __future__ import annotations

import itertools

import torch

__all__ = [
    "embedding_bag_dense_backward_grads",
    "grid_sampler_backward_grads",
    "grid_sampler_grid_derivative",
    "grouped_mm_any_layout",
]

# ---------------------------------------------------------------- grid sampling
# interpolation_mode: 0 bilinear, 1 nearest, 2 bicubic;
# padding_mode: 0 zeros, 1 border, 2 reflection (as aten's grid_sampler ops).

_CUBIC_A = -0.75


def _cubic1(x):  # |x| <= 1
    a = _CUBIC_A
    return ((a + 2) * x - (a + 3)) * x * x + 1


def _cubic1_d(x):
    a = _CUBIC_A
    return (3 * (a + 2) * x - 2 * (a + 3)) * x


def _cubic1_dd(x):
    a = _CUBIC_A
    return 6 * (a + 2) * x - 2 * (a + 3)


def _cubic2(x):  # 1 < |x| < 2
    a = _CUBIC_A
    return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a


def _cubic2_d(x):
    a = _CUBIC_A
    return (3 * a * x - 10 * a) * x + 8 * a


def _cubic2_dd(x):
    a = _CUBIC_A
    return 6 * a * x - 10 * a


def _reflect(x, twice_low: int, twice_high: int):
    # aten's reflect_coordinates, with the derivative (+-1) of the reflection.
    if twice_low == twice_high:
        return torch.zeros_like(x), torch.zeros_like(x)
    low = twice_low / 2
    span = (twice_high - twice_low) / 2
    shifted = x - low
    sign = torch.where(shifted < 0, -torch.ones_like(x), torch.ones_like(x))
    shifted = shifted.abs()
    extra = torch.fmod(shifted, span)
    flips = torch.floor(shifted / span)
    even = torch.fmod(flips, 2) == 0
    value = torch.where(even, extra + low, span - extra + low)
    return value, torch.where(even, sign, -sign)


def _pad_coordinates(x, size: int, padding_mode: int, align_corners: bool):
    # aten's compute_coordinates with its derivative: border clips, reflection
    # reflects then clips; zeros leaves x as it is.
    if padding_mode == 0:
        return x, torch.ones_like(x)
    slope = torch.ones_like(x)
    if padding_mode == 2:
        if align_corners:
            x, slope = _reflect(x, 0, 2 * (size - 1))
        else:
            x, slope = _reflect(x, -1, 2 * size - 1)
    inside = (x > 0) & (x < size - 1)
    x = x.clamp(0, size - 1)
    return x, torch.where(inside, slope, torch.zeros_like(slope))


def _unnormalize(coord, size: int, align_corners: bool):
    # aten's grid_sampler_unnormalize, and its (constant) derivative.
    if align_corners:
        return (coord + 1) / 2 * (size - 1), (size - 1) / 2
    return ((coord + 1) * size - 1) / 2, size / 2


def _in_bounds(x, size: int):
    return (x >= 0) & (x <= size - 1)


def _dim_taps(coord, size: int, interpolation_mode, padding_mode, align_corners):
    """The taps of one spatial dimension: a list of (position (floating, in
    bounds where `valid`), valid, weight, d weight / d coord, d2 weight / d coord2)."""
    x, scale = _unnormalize(coord, size, align_corners)
    zero = torch.zeros_like(x)
    if interpolation_mode == 2:  # bicubic: the padding acts on each tap
        x0 = torch.floor(x)
        t = x - x0
        weights = [
            (_cubic2(t + 1), _cubic2_d(t + 1), _cubic2_dd(t + 1)),
            (_cubic1(t), _cubic1_d(t), _cubic1_dd(t)),
            (_cubic1(1 - t), -_cubic1_d(1 - t), _cubic1_dd(1 - t)),
            (_cubic2(2 - t), -_cubic2_d(2 - t), _cubic2_dd(2 - t)),
        ]
        taps = []
        for i, (w, dw, ddw) in enumerate(weights):
            pos, _ = _pad_coordinates(x0 + (i - 1), size, padding_mode, align_corners)
            pos = torch.trunc(pos)
            taps.append(
                (pos, _in_bounds(pos, size), w, dw * scale, ddw * (scale * scale))
            )
        return taps
    x, slope = _pad_coordinates(x, size, padding_mode, align_corners)
    if interpolation_mode == 1:  # nearest: piecewise constant
        pos = torch.round(x)
        return [(pos, _in_bounds(pos, size), torch.ones_like(x), zero, zero)]
    x0 = torch.floor(x)
    t = x - x0
    d = slope * scale
    return [
        (x0, _in_bounds(x0, size), 1 - t, -d, zero),
        (x0 + 1, _in_bounds(x0 + 1, size), t, d, zero),
    ]


def _grid_taps(
    input, grid, interpolation_mode, padding_mode, align_corners, second=False
):
    """Every tap of grid sampling: (flat index into the input's spatial
    positions [N, P], [d weight / d grid_k] ([N, P] each) and, with `second`,
    [[d2 weight / d grid_k d grid_l]] (else []), zero where the tap falls
    outside)."""
    spatial = list(input.shape[2:])
    nd = len(spatial)
    n = grid.shape[0]
    g = grid.reshape(n, -1, nd)
    per_dim = [
        _dim_taps(
            g[:, :, k],
            spatial[nd - 1 - k],
            interpolation_mode,
            padding_mode,
            align_corners,
        )
        for k in range(nd)
    ]
    strides = [1] * nd  # stride of grid component k's dimension
    for k in range(1, nd):
        strides[k] = strides[k - 1] * spatial[nd - k]
    taps = []
    for combo in itertools.product(*per_dim):
        valid = combo[0][1]
        index = combo[0][0] * 0
        for k in range(nd):
            valid = valid & combo[k][1]
            index = index + combo[k][0] * strides[k]
        mask = valid.to(grid.dtype)
        index = torch.where(valid, index, torch.zeros_like(index)).to(torch.long)
        first = []
        seconds = []
        for k in range(nd):
            dk = mask * combo[k][3]
            row = []
            for j in range(nd):
                if j != k:
                    dk = dk * combo[j][2]
            for l in range(nd if second else 0):
                if l == k:
                    dkl = mask * combo[k][4]
                else:
                    dkl = mask * combo[k][3] * combo[l][3]
                for j in range(nd):
                    if j != k and j != l:
                        dkl = dkl * combo[j][2]
                row.append(dkl)
            first.append(dk)
            if second:
                seconds.append(row)
        taps.append((index, first, seconds))
    return taps


def _gather(input, index):
    # input [N, C, *S] at flat spatial positions index [N, P]: [N, C, P].
    n, c = input.shape[0], input.shape[1]
    flat = input.reshape(n, c, -1)
    return flat.gather(2, index.unsqueeze(1).expand(n, c, index.shape[1]))


def _scatter(values, index, like):
    # The adjoint of _gather: values [N, C, P] added at index [N, P], like like.
    n, c = like.shape[0], like.shape[1]
    positions = 1
    for size in like.shape[2:]:
        positions *= size
    flat = torch.zeros([n, c, positions], dtype=values.dtype, device=values.device)
    flat = flat.scatter_add(2, index.unsqueeze(1).expand(n, c, index.shape[1]), values)
    return flat.reshape(like.shape)


def _along(first, grid_t):
    # sum_k first[k] * grid_t[..., k] ([N, P]).
    nd = len(first)
    g = grid_t.reshape(grid_t.shape[0], -1, nd)
    total = first[0] * g[:, :, 0]
    for k in range(1, nd):
        total = total + first[k] * g[:, :, k]
    return total


def grid_sampler_grid_derivative(
    kind: str,
    grad_output,
    input,
    grid,
    grid_t,
    interpolation_mode: int,
    padding_mode: int,
    align_corners: bool,
):
    """A term of grid_sampler_2d / grid_sampler_3d's derivatives that the grid's
    tangent `grid_t` ([N, *out, d]) makes by moving the taps' weights, by `kind`:

    - "tangent": the tangent of the output ([N, C, *out]): the input's taps times
      the derivative of their weights along grid_t (zero for nearest);
      `grad_output` is not read (None);
    - "tangent_adjoint": its adjoint in the input ([N, C, *in], like `input`):
      `grad_output` spread over the taps with the derivative of their weights
      along grid_t. It is the tangent of grid_sampler's input gradient from the
      grid's tangent, and the input gradient of grid_sampler's grid gradient;
    - "second": the second derivative term of grid_sampler's grid gradient
      ([N, *out, d], like `grid`): the sum over channels and taps of grad_output
      times the input's tap times d2 weight / d grid_k d grid_l along grid_t (in
      l)."""
    modes = (interpolation_mode, padding_mode, align_corners)
    if kind == "tangent":
        return _grid_tangent(input, grid, grid_t, modes)
    if kind == "tangent_adjoint":
        return _grid_tangent_adjoint(grad_output, input, grid, grid_t, modes)
    if kind == "second":
        return _grid_second(grad_output, input, grid, grid_t, modes)
    raise ValueError(
        "grid_sampler_grid_derivative: kind is one of tangent, tangent_adjoint, "
        f"second, got '{kind}'"
    )


def _grid_tangent(input, grid, grid_t, modes):
    n, c = input.shape[0], input.shape[1]
    out_shape = [n, c] + list(grid.shape[1:-1])
    points = 1
    for size in grid.shape[1:-1]:
        points *= size
    total = torch.zeros([n, c, points], dtype=input.dtype, device=input.device)
    if modes[0] == 1 or total.numel() == 0:
        return total.reshape(out_shape)
    for index, first, _ in _grid_taps(input, grid, *modes):
        total = total + _gather(input, index) * _along(first, grid_t).unsqueeze(1)
    return total.reshape(out_shape)


def _grid_tangent_adjoint(grad_output, input, grid, grid_t, modes):
    n, c = input.shape[0], input.shape[1]
    if modes[0] == 1 or input.numel() == 0 or grad_output.numel() == 0:
        return torch.zeros_like(input)
    go = grad_output.reshape(n, c, -1)
    total = torch.zeros_like(input)
    for index, first, _ in _grid_taps(input, grid, *modes):
        total = total + _scatter(go * _along(first, grid_t).unsqueeze(1), index, input)
    return total


def _grid_second(grad_output, input, grid, grid_t, modes):
    nd = grid.shape[-1]
    n, c = input.shape[0], input.shape[1]
    if modes[0] == 1 or input.numel() == 0 or grad_output.numel() == 0:
        return torch.zeros_like(grid)
    go = grad_output.reshape(n, c, -1)
    parts = [torch.zeros_like(grid[..., 0]).reshape(n, -1) for _ in range(nd)]
    for index, _, second in _grid_taps(input, grid, *modes, second=True):
        weighted = (go * _gather(input, index)).sum(1)  # [N, P]
        for k in range(nd):
            parts[k] = parts[k] + weighted * _along(second[k], grid_t)
    return torch.stack(parts, -1).reshape(grid.shape)


def _grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners):
    if grid.dim() == 4:
        return torch.ops.aten.grid_sampler_2d(
            input, grid, interpolation_mode, padding_mode, align_corners
        )
    return torch.ops.aten.grid_sampler_3d(
        input, grid, interpolation_mode, padding_mode, align_corners
    )


def _grid_sampler_grid_grad(
    grad_output, input, grid, interpolation_mode, padding_mode, align_corners
):
    op = (
        torch.ops.aten.grid_sampler_2d_backward
        if grid.dim() == 4
        else torch.ops.aten.grid_sampler_3d_backward
    )
    return op(
        grad_output,
        input,
        grid,
        interpolation_mode,
        padding_mode,
        align_corners,
        [False, True],
    )[1]


def grid_sampler_backward_grads(
    grad_input_grad,
    grad_grid_grad,
    grad_output,
    input,
    grid,
    interpolation_mode: int,
    padding_mode: int,
    align_corners: bool,
) -> tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:
    """The gradients of grid_sampler_2d_backward / grid_sampler_3d_backward in
    (grad_output, input, grid) from the cotangents of its outputs (grad_input,
    grad_grid; None where absent): with A(grid) the sampling map and
    B(input) = the map grid_t -> grid_sampler_grid_derivative("tangent", ...),
    the outputs are A^T g and B^T g, so grad_output gets A gi + B gg, input gets
    the adjoint of B along gg, and grid the second derivatives of the taps."""
    modes = (interpolation_mode, padding_mode, align_corners)
    go_grad = input_grad = grid_grad = None
    if grad_input_grad is not None:
        go_grad = _grid_sampler(grad_input_grad, grid, *modes)
        grid_grad = _grid_sampler_grid_grad(grad_output, grad_input_grad, grid, *modes)
    if grad_grid_grad is not None:
        b = _grid_tangent(input, grid, grad_grid_grad, modes)
        go_grad = b if go_grad is None else go_grad + b
        gg = grad_grid_grad
        input_grad = _grid_tangent_adjoint(grad_output, input, grid, gg, modes)
        s = _grid_second(grad_output, input, grid, gg, modes)
        grid_grad = s if grid_grad is None else grid_grad + s
    return go_grad, input_grad, grid_grad


# ---------------------------------------------------------------- embedding bags


def embedding_bag_dense_backward_grads(
    grad_weight_grad,
    grad,
    indices,
    offset2bag,
    bag_size,
    maximum_indices,
    scale_grad_by_freq: bool,
    mode: int,
    per_sample_weights,
    padding_idx: int,
    offsets=None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The gradients of `_embedding_bag_dense_backward` (linear in `grad`, and in
    `per_sample_weights`) in `grad` ([B, D]) and `per_sample_weights` ([L]; None
    when there are none) from the cotangent of its output (a weight gradient
    [num_weights, D]). Sum and mean modes add row i of the bags' gradient, scaled
    (per-sample weight, 1/bag size, 1/frequency of the index; 0 at padding_idx),
    into row indices[i]; max mode puts it where maximum_indices point. The
    frequency scale is native's CPU one (see below), so that this is the adjoint
    of the op torch runs. Where offset2bag is empty (sum mode leaves it so, and
    `_embedding_bag_backward` then rebuilds it), it is rebuilt from `offsets`."""
    g = grad_weight_grad
    if offsets is not None and offset2bag.numel() == 0 and indices.numel() != 0:
        steps = torch.arange(indices.shape[0], device=indices.device)
        offset2bag = torch.searchsorted(offsets, steps, right=True) - 1
    if mode == 2:
        live = (bag_size > 0).unsqueeze(-1)
        picked = g.gather(0, maximum_indices.clamp_min(0))
        return torch.where(live, picked, torch.zeros_like(picked)), None
    scale = (indices != padding_idx).to(grad.dtype)
    if scale_grad_by_freq:
        # As native's CPU kernel scales: the k-th distinct index (in sorted
        # order) by 1 / the count of the k-th smallest index, which is its own
        # count only where no index repeats below it.
        counts = torch.bincount(indices, minlength=g.shape[0]).to(grad.dtype)
        ordered = indices.sort().values
        group = torch.searchsorted(torch.unique(ordered), indices)
        scale = scale / counts.index_select(0, ordered.index_select(0, group))
    if mode == 1:
        sizes = bag_size.index_select(0, offset2bag).to(grad.dtype)
        scale = scale / sizes.clamp_min(1)
    rows = g.index_select(0, indices)  # [L, D]
    psw_grad = None
    if per_sample_weights is not None:
        psw_grad = (rows * grad.index_select(0, offset2bag)).sum(-1) * scale
        scale = scale * per_sample_weights
    grad_grad = torch.zeros_like(grad).index_add(
        0, offset2bag, rows * scale.unsqueeze(-1)
    )
    return grad_grad, psw_grad


# ---------------------------------------------------------------- grouped matmul


def _grouped_mm_operand(mat: torch.Tensor) -> torch.Tensor:
    """`mat` itself if aten::_grouped_mm accepts its layout (the last two dims row-
    or column-major, the leading stride a multiple of 16 bytes), else a row-major
    copy whose rows are padded to a multiple of 16 bytes (a view of it)."""
    align = max(1, 16 // mat.element_size())
    rows, cols = mat.shape[-2], mat.shape[-1]
    row_stride, col_stride = mat.stride(-2), mat.stride(-1)
    if col_stride == 1 and row_stride >= max(1, cols) and row_stride % align == 0:
        return mat
    if row_stride == 1 and col_stride >= max(1, rows) and col_stride % align == 0:
        return mat
    padded = max((cols + align - 1) // align * align, align)
    if padded == cols:
        return mat.contiguous()
    return torch.nn.functional.pad(mat, (0, padded - cols)).narrow(-1, 0, cols)


def grouped_mm_any_layout(
    a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor | None
) -> torch.Tensor:
    """aten::_grouped_mm(a, b, offs) on operands in any layout, zero where the groups
    do not reach. The op's layouts, `offs` the cumulative group ends (int32) along
    the grouped dim: a [M, K] @ b [G, K, N] -> [M, N] (rows grouped); a [G, M, K]
    @ b [G, K, N] -> [G, M, N] (no offs, bmm); a [M, K] @ b [K, N] -> [G, M, N] (K
    grouped); a [G, M, K] @ b [K, N] -> [M, N] (columns grouped). The op leaves the
    rows (columns) of its grouped output past offs[-1] unwritten; here they are 0,
    as every gradient is there. Operands whose strides the op refuses (tangents,
    gradients) are copied with rows padded to 16 bytes first."""
    out = torch.ops.aten._grouped_mm(
        _grouped_mm_operand(a), _grouped_mm_operand(b), offs
    )
    if offs is None or a.dim() == b.dim() or offs.numel() == 0:
        return out
    dim = 0 if a.dim() == 2 else 1  # the output's grouped dim
    covered = torch.arange(out.size(dim), device=out.device) < offs[-1]
    if dim == 0:
        covered = covered.unsqueeze(-1)
    return out.masked_fill(covered.logical_not(), 0)
