#include "formulas.h"  // generated from twins.yaml

#include <array>
#include <tuple>
#include <utility>

namespace dualgen::formulas {

namespace {

// ---------------------------------------------------------------- grid sampling

constexpr double kCubicA = -0.75;

at::Tensor cubic1(const at::Tensor& x) {
  const double a = kCubicA;
  return ((a + 2) * x - (a + 3)) * x * x + 1;
}
at::Tensor cubic1_d(const at::Tensor& x) {
  const double a = kCubicA;
  return (3 * (a + 2) * x - 2 * (a + 3)) * x;
}
at::Tensor cubic1_dd(const at::Tensor& x) {
  const double a = kCubicA;
  return 6 * (a + 2) * x - 2 * (a + 3);
}
at::Tensor cubic2(const at::Tensor& x) {
  const double a = kCubicA;
  return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
}
at::Tensor cubic2_d(const at::Tensor& x) {
  const double a = kCubicA;
  return (3 * a * x - 10 * a) * x + 8 * a;
}
at::Tensor cubic2_dd(const at::Tensor& x) {
  const double a = kCubicA;
  return 6 * a * x - 10 * a;
}

std::pair<at::Tensor, at::Tensor> reflect(
    const at::Tensor& x, int64_t twice_low, int64_t twice_high) {
  if (twice_low == twice_high) {
    return {at::zeros_like(x), at::zeros_like(x)};
  }
  const double low = twice_low / 2.0;
  const double span = (twice_high - twice_low) / 2.0;
  at::Tensor shifted = x - low;
  at::Tensor ones = at::ones_like(x);
  at::Tensor sign = at::where(shifted < 0, -ones, ones);
  shifted = shifted.abs();
  at::Tensor extra = at::fmod(shifted, span);
  at::Tensor flips = at::floor(shifted / span);
  at::Tensor even = at::fmod(flips, 2) == 0;
  return {at::where(even, extra + low, span - extra + low), at::where(even, sign, -sign)};
}

std::pair<at::Tensor, at::Tensor> pad_coordinates(
    at::Tensor x, int64_t size, int64_t padding_mode, bool align_corners) {
  if (padding_mode == 0) {
    return {x, at::ones_like(x)};
  }
  at::Tensor slope = at::ones_like(x);
  if (padding_mode == 2) {
    std::tie(x, slope) = align_corners ? reflect(x, 0, 2 * (size - 1))
                                       : reflect(x, -1, 2 * size - 1);
  }
  at::Tensor inside = (x > 0) & (x < size - 1);
  x = x.clamp(0, size - 1);
  return {x, at::where(inside, slope, at::zeros_like(slope))};
}

std::pair<at::Tensor, double> unnormalize(
    const at::Tensor& coord, int64_t size, bool align_corners) {
  if (align_corners) {
    return {(coord + 1) / 2 * (size - 1), (size - 1) / 2.0};
  }
  return {((coord + 1) * size - 1) / 2, size / 2.0};
}

at::Tensor in_bounds(const at::Tensor& x, int64_t size) {
  return (x >= 0) & (x <= size - 1);
}

struct DimTap {
  at::Tensor pos, valid, w, dw, ddw;
};

std::vector<DimTap> dim_taps(
    const at::Tensor& coord, int64_t size, int64_t interpolation_mode,
    int64_t padding_mode, bool align_corners) {
  auto [x, scale] = unnormalize(coord, size, align_corners);
  at::Tensor zero = at::zeros_like(x);
  std::vector<DimTap> taps;
  if (interpolation_mode == 2) {  // bicubic: the padding acts on each tap
    at::Tensor x0 = at::floor(x);
    at::Tensor t = x - x0;
    std::vector<std::array<at::Tensor, 3>> weights = {
        {cubic2(t + 1), cubic2_d(t + 1), cubic2_dd(t + 1)},
        {cubic1(t), cubic1_d(t), cubic1_dd(t)},
        {cubic1(1 - t), -cubic1_d(1 - t), cubic1_dd(1 - t)},
        {cubic2(2 - t), -cubic2_d(2 - t), cubic2_dd(2 - t)},
    };
    for (int64_t i = 0; i < 4; ++i) {
      at::Tensor pos =
          pad_coordinates(x0 + (i - 1), size, padding_mode, align_corners).first;
      pos = at::trunc(pos);
      taps.push_back({pos, in_bounds(pos, size), weights[i][0],
                      weights[i][1] * scale, weights[i][2] * (scale * scale)});
    }
    return taps;
  }
  auto [padded, slope] = pad_coordinates(x, size, padding_mode, align_corners);
  if (interpolation_mode == 1) {  // nearest: piecewise constant
    at::Tensor pos = at::round(padded);
    taps.push_back({pos, in_bounds(pos, size), at::ones_like(padded), zero, zero});
    return taps;
  }
  at::Tensor x0 = at::floor(padded);
  at::Tensor t = padded - x0;
  at::Tensor d = slope * scale;
  taps.push_back({x0, in_bounds(x0, size), 1 - t, -d, zero});
  taps.push_back({x0 + 1, in_bounds(x0 + 1, size), t, d, zero});
  return taps;
}

struct Tap {
  at::Tensor index;
  std::vector<at::Tensor> first;
  std::vector<std::vector<at::Tensor>> second;
};

// The sampling's interpolation_mode, padding_mode and align_corners (twin of
// fused_nn's `modes`).
struct Modes {
  int64_t interpolation_mode;
  int64_t padding_mode;
  bool align_corners;
};

std::vector<Tap> grid_taps(
    const at::Tensor& input, const at::Tensor& grid, const Modes& modes,
    bool second) {
  std::vector<int64_t> spatial(input.sizes().begin() + 2, input.sizes().end());
  const int64_t nd = static_cast<int64_t>(spatial.size());
  const int64_t n = grid.size(0);
  at::Tensor g = grid.reshape({n, -1, nd});
  std::vector<std::vector<DimTap>> per_dim;
  for (int64_t k = 0; k < nd; ++k) {
    per_dim.push_back(dim_taps(g.select(2, k), spatial[nd - 1 - k],
                               modes.interpolation_mode, modes.padding_mode,
                               modes.align_corners));
  }
  std::vector<int64_t> strides(nd, 1);
  for (int64_t k = 1; k < nd; ++k) {
    strides[k] = strides[k - 1] * spatial[nd - k];
  }
  // The cartesian product of the dimensions' taps, the last dimension fastest
  // (as itertools.product).
  std::vector<size_t> at_(nd, 0);
  std::vector<Tap> taps;
  while (true) {
    std::vector<const DimTap*> combo;
    for (int64_t k = 0; k < nd; ++k) combo.push_back(&per_dim[k][at_[k]]);
    at::Tensor valid = combo[0]->valid;
    at::Tensor index = combo[0]->pos * 0;
    for (int64_t k = 0; k < nd; ++k) {
      valid = valid & combo[k]->valid;
      index = index + combo[k]->pos * strides[k];
    }
    at::Tensor mask = valid.to(grid.scalar_type());
    index = at::where(valid, index, at::zeros_like(index)).to(at::kLong);
    std::vector<at::Tensor> first;
    std::vector<std::vector<at::Tensor>> seconds;
    for (int64_t k = 0; k < nd; ++k) {
      at::Tensor dk = mask * combo[k]->dw;
      std::vector<at::Tensor> row;
      for (int64_t j = 0; j < nd; ++j) {
        if (j != k) dk = dk * combo[j]->w;
      }
      for (int64_t l = 0; l < (second ? nd : 0); ++l) {
        at::Tensor dkl = l == k ? mask * combo[k]->ddw
                                : mask * combo[k]->dw * combo[l]->dw;
        for (int64_t j = 0; j < nd; ++j) {
          if (j != k && j != l) dkl = dkl * combo[j]->w;
        }
        row.push_back(dkl);
      }
      first.push_back(dk);
      if (second) seconds.push_back(row);
    }
    taps.push_back({index, first, seconds});
    int64_t k = nd - 1;
    while (k >= 0) {
      if (++at_[k] < per_dim[k].size()) break;
      at_[k] = 0;
      --k;
    }
    if (k < 0) break;
  }
  return taps;
}

at::Tensor gather_taps(const at::Tensor& input, const at::Tensor& index) {
  const int64_t n = input.size(0), c = input.size(1);
  at::Tensor flat = input.reshape({n, c, -1});
  return flat.gather(2, index.unsqueeze(1).expand({n, c, index.size(1)}));
}

at::Tensor scatter_taps(
    const at::Tensor& values, const at::Tensor& index, const at::Tensor& like) {
  const int64_t n = like.size(0), c = like.size(1);
  int64_t positions = 1;
  for (int64_t d = 2; d < like.dim(); ++d) positions *= like.size(d);
  at::Tensor flat = at::zeros({n, c, positions}, values.options());
  flat = flat.scatter_add(2, index.unsqueeze(1).expand({n, c, index.size(1)}), values);
  return flat.reshape(like.sizes());
}

at::Tensor along(const std::vector<at::Tensor>& first, const at::Tensor& grid_t) {
  const int64_t nd = static_cast<int64_t>(first.size());
  at::Tensor g = grid_t.reshape({grid_t.size(0), -1, nd});
  at::Tensor total = first[0] * g.select(2, 0);
  for (int64_t k = 1; k < nd; ++k) total = total + first[k] * g.select(2, k);
  return total;
}

// Twin of fused_nn._grid_tangent.
at::Tensor grid_tangent(
    const at::Tensor& input, const at::Tensor& grid, const at::Tensor& grid_t,
    const Modes& modes) {
  const int64_t n = input.size(0), c = input.size(1);
  std::vector<int64_t> out_shape = {n, c};
  int64_t points = 1;
  for (int64_t d = 1; d < grid.dim() - 1; ++d) {
    out_shape.push_back(grid.size(d));
    points *= grid.size(d);
  }
  at::Tensor total = at::zeros({n, c, points}, input.options());
  if (modes.interpolation_mode == 1 || total.numel() == 0) {
    return total.reshape(out_shape);
  }
  for (const Tap& tap : grid_taps(input, grid, modes, false)) {
    total = total + gather_taps(input, tap.index) * along(tap.first, grid_t).unsqueeze(1);
  }
  return total.reshape(out_shape);
}

// Twin of fused_nn._grid_tangent_adjoint.
at::Tensor grid_tangent_adjoint(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& grid,
    const at::Tensor& grid_t, const Modes& modes) {
  const int64_t n = input.size(0), c = input.size(1);
  if (modes.interpolation_mode == 1 || input.numel() == 0 || grad_output.numel() == 0) {
    return at::zeros_like(input);
  }
  at::Tensor go = grad_output.reshape({n, c, -1});
  at::Tensor total = at::zeros_like(input);
  for (const Tap& tap : grid_taps(input, grid, modes, false)) {
    total = total + scatter_taps(go * along(tap.first, grid_t).unsqueeze(1), tap.index, input);
  }
  return total;
}

// Twin of fused_nn._grid_second.
at::Tensor grid_second(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& grid,
    const at::Tensor& grid_t, const Modes& modes) {
  const int64_t nd = grid.size(-1);
  const int64_t n = input.size(0), c = input.size(1);
  if (modes.interpolation_mode == 1 || input.numel() == 0 || grad_output.numel() == 0) {
    return at::zeros_like(grid);
  }
  at::Tensor go = grad_output.reshape({n, c, -1});
  std::vector<at::Tensor> parts;
  for (int64_t k = 0; k < nd; ++k) {
    parts.push_back(at::zeros_like(grid.select(-1, 0)).reshape({n, -1}));
  }
  for (const Tap& tap : grid_taps(input, grid, modes, true)) {
    at::Tensor weighted = (go * gather_taps(input, tap.index)).sum(1);
    for (int64_t k = 0; k < nd; ++k) {
      parts[k] = parts[k] + weighted * along(tap.second[k], grid_t);
    }
  }
  return at::stack(parts, -1).reshape(grid.sizes());
}

}  // namespace

// ---------------------------------------------------------------- grid sampling

at::Tensor grid_sampler_grid_derivative(
    c10::string_view kind, const at::Tensor& grad_output, const at::Tensor& input,
    const at::Tensor& grid, const at::Tensor& grid_t, int64_t interpolation_mode,
    int64_t padding_mode, bool align_corners) {
  const Modes modes{interpolation_mode, padding_mode, align_corners};
  if (kind == "tangent") {
    return grid_tangent(input, grid, grid_t, modes);
  }
  if (kind == "tangent_adjoint") {
    return grid_tangent_adjoint(grad_output, input, grid, grid_t, modes);
  }
  TORCH_CHECK_VALUE(
      kind == "second",
      "grid_sampler_grid_derivative: kind is one of tangent, tangent_adjoint, "
      "second, got '",
      kind, "'");
  return grid_second(grad_output, input, grid, grid_t, modes);
}

}  // namespace dualgen::formulas

// ---------------------------------------------------------------- grouped matmul
// and weight norm

namespace dualgen::formulas {

namespace {

// `mat` if aten::_grouped_mm accepts its layout (last two dims row- or
// column-major, the leading stride a multiple of 16 bytes), else a view of a
// row-major copy with rows padded to a multiple of 16 bytes.
at::Tensor grouped_mm_operand(const at::Tensor& mat) {
  const int64_t align =
      std::max<int64_t>(1, 16 / static_cast<int64_t>(mat.element_size()));
  const int64_t rows = mat.size(-2), cols = mat.size(-1);
  const int64_t row_stride = mat.stride(-2), col_stride = mat.stride(-1);
  if (col_stride == 1 && row_stride >= std::max<int64_t>(1, cols) &&
      row_stride % align == 0) {
    return mat;
  }
  if (row_stride == 1 && col_stride >= std::max<int64_t>(1, rows) &&
      col_stride % align == 0) {
    return mat;
  }
  const int64_t padded = std::max((cols + align - 1) / align * align, align);
  if (padded == cols) {
    return mat.contiguous();
  }
  return at::constant_pad_nd(mat, {0, padded - cols}, 0).narrow(-1, 0, cols);
}

}  // namespace

at::Tensor grouped_mm_any_layout(
    const at::Tensor& a, const at::Tensor& b, const at::Tensor& offs) {
  at::Tensor out =
      at::_grouped_mm(grouped_mm_operand(a), grouped_mm_operand(b), opt(offs));
  if (!offs.defined() || a.dim() == b.dim() || offs.numel() == 0) {
    return out;
  }
  const int64_t dim = a.dim() == 2 ? 0 : 1;  // the output's grouped dim
  at::Tensor covered =
      at::arange(out.size(dim), out.options().dtype(at::kLong))
          .lt(offs.select(0, offs.size(0) - 1));
  if (dim == 0) {
    covered = covered.unsqueeze(-1);
  }
  return out.masked_fill(covered.logical_not(), 0);
}

}  // namespace dualgen::formulas
