#include "formulas.h"  // generated from twins.yaml

#include <vector>

// Twin of dualgen.formulas.cudnn_rnn: the tangents of _cudnn_rnn, the layers'
// dual recurrence written out over a packed input (an unpacked one being the
// packing with every step B rows).
namespace dualgen::formulas {

// Named, not anonymous: the twins' sources build as one unit.
namespace rnn_stack {

// cudnnRNNMode_t: the number of gates each mode's weights stack (0: none).
int64_t gates(int64_t mode) {
  switch (mode) {
    case 0:
    case 1:
      return 1;
    case 2:
      return 4;
    case 3:
      return 3;
    default:
      return 0;
  }
}

// A value and its tangent.
struct Dual {
  at::Tensor p, t;
};

// (x W^T + b, its tangent); b, db undefined: no bias.
Dual linear(
    const Dual& x,
    const at::Tensor& w,
    const at::Tensor& dw,
    const at::Tensor& b,
    const at::Tensor& db) {
  at::Tensor y = at::matmul(x.p, w.t());
  at::Tensor dy = at::matmul(x.t, w.t()) + at::matmul(x.p, dw.t());
  if (b.defined()) {
    y = y + b;
    dy = dy + db;
  }
  return {y, dy};
}

Dual sigmoid(const at::Tensor& a, const at::Tensor& da) {
  const at::Tensor s = a.sigmoid();
  return {s, s * (1 - s) * da};
}

Dual tanh(const at::Tensor& a, const at::Tensor& da) {
  const at::Tensor t = a.tanh();
  return {t, (1 - t * t) * da};
}

// One layer and direction's weights and their tangents (twin of _Weights).
struct Weights {
  at::Tensor w_ih, w_hh, b_ih, b_hh, w_hr;
  at::Tensor dw_ih, dw_hh, db_ih, db_hh, dw_hr;
};

Weights weights_of(
    const TensorList& weight,
    const TensorList& tangent,
    int64_t first,
    int64_t stride,
    bool has_bias,
    bool has_proj) {
  Weights w;
  w.w_ih = weight[first];
  w.w_hh = weight[first + 1];
  w.dw_ih = tangent[first];
  w.dw_hh = tangent[first + 1];
  if (has_bias) {
    w.b_ih = weight[first + 2];
    w.b_hh = weight[first + 3];
    w.db_ih = tangent[first + 2];
    w.db_hh = tangent[first + 3];
  }
  if (has_proj) {
    w.w_hr = weight[first + stride - 1];
    w.dw_hr = tangent[first + stride - 1];
  }
  return w;
}

// A step's new state: h and c (c undefined but for the LSTM), with tangents.
struct State {
  Dual h, c;
};

// One step of mode's cell on the step's rows (twin of cudnn_rnn._cell).
State cell(int64_t mode, const Dual& gi, const State& prev, const Weights& w) {
  const Dual gh = linear(prev.h, w.w_hh, w.dw_hh, w.b_hh, w.db_hh);
  if (mode == 0 || mode == 1) {
    const at::Tensor a = gi.p + gh.p;
    const at::Tensor da = gi.t + gh.t;
    if (mode == 0) {
      return {{a.relu(), (a > 0).to(da.scalar_type()) * da}, {}};
    }
    return {tanh(a, da), {}};
  }
  if (mode == 3) {
    const auto x = gi.p.chunk(3, -1);
    const auto h = gh.p.chunk(3, -1);
    const auto dx = gi.t.chunk(3, -1);
    const auto dh = gh.t.chunk(3, -1);
    const Dual r = sigmoid(x[0] + h[0], dx[0] + dh[0]);
    const Dual z = sigmoid(x[1] + h[1], dx[1] + dh[1]);
    const Dual n = tanh(x[2] + r.p * h[2], dx[2] + r.t * h[2] + r.p * dh[2]);
    return {
        {(1 - z.p) * n.p + z.p * prev.h.p,
         (1 - z.p) * n.t + z.p * prev.h.t + z.t * (prev.h.p - n.p)},
        {}};
  }
  const auto a = (gi.p + gh.p).chunk(4, -1);
  const auto da = (gi.t + gh.t).chunk(4, -1);
  const Dual i = sigmoid(a[0], da[0]);
  const Dual f = sigmoid(a[1], da[1]);
  const Dual g = tanh(a[2], da[2]);
  const Dual o = sigmoid(a[3], da[3]);
  const Dual c{
      f.p * prev.c.p + i.p * g.p,
      f.t * prev.c.p + f.p * prev.c.t + i.t * g.p + i.p * g.t};
  const Dual tc = tanh(c.p, c.t);
  Dual m{o.p * tc.p, o.t * tc.p + o.p * tc.t};
  if (w.w_hr.defined()) {
    m = linear(m, w.w_hr, w.dw_hr, at::Tensor(), at::Tensor());
  }
  return {m, c};
}

// The first b rows of a state, undefined kept undefined.
Dual rows(const Dual& v, int64_t b) {
  if (!v.p.defined()) {
    return v;
  }
  return {v.p.slice(0, 0, b), v.t.slice(0, 0, b)};
}

// A step's new rows over the state's first rows, the others kept.
Dual over(const Dual& fresh, const Dual& old, int64_t b) {
  if (!fresh.p.defined() || b == old.p.size(0)) {
    return fresh;
  }
  return {
      at::cat({fresh.p, old.p.slice(0, b)}), at::cat({fresh.t, old.t.slice(0, b)})};
}

// One layer in one direction over the packed input (twin of _direction): its
// output rows and the final state, with tangents.
std::pair<Dual, State> direction(
    int64_t mode,
    const Weights& w,
    const Dual& x,
    const std::vector<int64_t>& sizes,
    State state,
    bool reverse) {
  const Dual gi_all = linear(x, w.w_ih, w.dw_ih, w.b_ih, w.db_ih);
  const auto gis = gi_all.p.split_with_sizes(sizes, 0);
  const auto dgis = gi_all.t.split_with_sizes(sizes, 0);
  const int64_t T = static_cast<int64_t>(sizes.size());
  std::vector<at::Tensor> outs(T), douts(T);
  for (int64_t s = 0; s < T; ++s) {
    const int64_t t = reverse ? T - 1 - s : s;
    const int64_t b = sizes[t];
    const State prev{rows(state.h, b), rows(state.c, b)};
    const State next = cell(mode, {gis[t], dgis[t]}, prev, w);
    outs[t] = next.h.p;
    douts[t] = next.h.t;
    state = {over(next.h, state.h, b), over(next.c, state.c, b)};
  }
  return {{at::cat(outs), at::cat(douts)}, state};
}

}  // namespace rnn_stack

TensorList cudnn_rnn_tangents(
    const at::Tensor& input_t,
    const TensorList& weight_t,
    const at::Tensor& hx_t,
    const at::Tensor& cx_t,
    const at::Tensor& input,
    const TensorList& weight,
    int64_t weight_stride0,
    const at::Tensor& hx,
    const at::Tensor& cx,
    int64_t mode,
    int64_t proj_size,
    int64_t num_layers,
    bool batch_first,
    double dropout,
    bool train,
    bool bidirectional,
    at::IntArrayRef batch_sizes) {
  const int64_t directions = bidirectional ? 2 : 1;
  const bool has_bias = weight_stride0 == 4 || weight_stride0 == 5;
  const bool has_proj = proj_size > 0;
  TORCH_CHECK_VALUE(
      rnn_stack::gates(mode) > 0, "_cudnn_rnn: mode is 0, 1, 2 or 3 (cudnnRNNMode_t), got ", mode);
  TORCH_CHECK_VALUE(
      weight_stride0 == 2 + (has_bias ? 2 : 0) + (has_proj ? 1 : 0) &&
          static_cast<int64_t>(weight.size()) ==
              weight_stride0 * num_layers * directions,
      "_cudnn_rnn: ",
      weight.size(),
      " weights with weight_stride0 ",
      weight_stride0,
      " do not make ",
      num_layers,
      " layer(s) of ",
      directions,
      " direction(s)",
      has_proj ? " with a projection" : "");
  TORCH_CHECK_VALUE(
      !(dropout > 0 && train && num_layers > 1),
      "_cudnn_rnn: dropout between layers draws its mask inside cuDNN, where no "
      "tangent can follow it; dualgen refuses dropout > 0 in training (use "
      "dropout=0, or eval())");
  const bool packed = !batch_sizes.empty();
  std::vector<int64_t> sizes;
  rnn_stack::Dual x;
  if (packed) {
    sizes.assign(batch_sizes.begin(), batch_sizes.end());
    x = {input, input_t};
  } else {
    const at::Tensor seq = batch_first ? input.transpose(0, 1) : input;
    const at::Tensor dseq = batch_first ? input_t.transpose(0, 1) : input_t;
    sizes.assign(seq.size(0), seq.size(1));
    x = {seq.reshape({-1, seq.size(-1)}), dseq.reshape({-1, seq.size(-1)})};
  }
  std::vector<at::Tensor> dhys, dcys;
  for (int64_t layer = 0; layer < num_layers; ++layer) {
    std::vector<at::Tensor> outs, douts;
    for (int64_t d = 0; d < directions; ++d) {
      const int64_t k = layer * directions + d;
      const rnn_stack::Weights w = rnn_stack::weights_of(
          weight, weight_t, k * weight_stride0, weight_stride0, has_bias, has_proj);
      rnn_stack::State state{{hx[k], hx_t[k]}, {}};
      if (cx.defined()) {
        state.c = {cx[k], cx_t[k]};
      }
      const auto [out, last] = rnn_stack::direction(mode, w, x, sizes, state, d == 1);
      outs.push_back(out.p);
      douts.push_back(out.t);
      dhys.push_back(last.h.t);
      if (cx.defined()) {
        dcys.push_back(last.c.t);
      }
    }
    x = {at::cat(outs, -1), at::cat(douts, -1)};
  }
  at::Tensor output_t = x.t;
  if (!packed) {
    const int64_t steps = static_cast<int64_t>(sizes.size());
    output_t = x.t.reshape({steps, steps > 0 ? sizes[0] : 0, x.t.size(-1)});
    if (batch_first) {
      output_t = output_t.transpose(0, 1);
    }
  }
  const at::Tensor cy_t = cx.defined() ? at::stack(dcys) : hx.new_zeros({0});
  return {output_t, at::stack(dhys), cy_t};
}

}  // namespace dualgen::formulas
