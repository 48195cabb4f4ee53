#include "formulas.h"  // generated from twins.yaml

#include <tuple>
#include <utility>

namespace dualgen::formulas {

namespace {

void check_layer(int64_t mode, at::IntArrayRef batch_sizes) {
  TORCH_CHECK_VALUE(
      mode == 2,
      "mkldnn_rnn_layer: dualgen's rules cover mode 2 (LSTM) only, got mode ",
      mode);
  TORCH_CHECK_VALUE(
      batch_sizes.empty(),
      "mkldnn_rnn_layer: dualgen's rules cover unpacked input only (batch_sizes must be empty)");
}

// The time indices in the order the layer processes them.
std::vector<int64_t> steps(int64_t T, bool reverse) {
  std::vector<int64_t> order(T);
  for (int64_t s = 0; s < T; ++s) {
    order[s] = reverse ? T - 1 - s : s;
  }
  return order;
}

// For each time t, the value at the step processed before t: `first` ([B, H])
// for the first step processed, else seq at t - 1 (t + 1 when reverse).
at::Tensor shift(const at::Tensor& seq, const at::Tensor& first, bool reverse) {
  const at::Tensor f = first.unsqueeze(0);
  if (reverse) {
    return at::cat({seq.slice(0, 1), f}, 0);
  }
  return at::cat({f, seq.slice(0, 0, -1)}, 0);
}

at::Tensor or_zeros(const at::Tensor& t, const at::Tensor& like) {
  return t.defined() ? t : at::zeros_like(like);
}

at::Tensor flat(const at::Tensor& t) { return t.reshape({-1, t.size(-1)}); }

// Twins of recurrent._Layer, _InputTangents and _OutputGrads: the arguments the
// public twin takes flat (as the bindings pass them), bundled for the helpers.
struct Layer {
  at::Tensor input, weight0, weight1, weight2, weight3, hx, cx, output;
  bool reverse;
  bool has_biases;

  // The time index of the last step processed (that of hy, cy).
  int64_t last() const { return reverse ? 0 : input.size(0) - 1; }

  // An hx- or cx-shaped value (undefined: zero, like `like`) as [B, H].
  at::Tensor state(const at::Tensor& t, const at::Tensor& like) const {
    return or_zeros(t, like).reshape({-1, hx.size(-1)});
  }

  // The two bias gradients from the summed gate gradients: zero when the op
  // reads no bias argument.
  std::pair<at::Tensor, at::Tensor> bias_grads(const at::Tensor& summed) const {
    if (has_biases) {
      return {summed, summed};
    }
    return {at::zeros_like(weight2), at::zeros_like(weight3)};
  }
};

// Tangents (or cotangents) of input, weight0 .. weight3, hx, cx; undefined: zero.
struct InputTangents {
  at::Tensor input, weight0, weight1, weight2, weight3, hx, cx;
};

// Gradients of (output, hy, cy), or their tangents; undefined: zero.
struct OutputGrads {
  at::Tensor output, hy, cy;
};

// The layer's forward values in time order (twin of recurrent._lstm_states).
struct States {
  at::Tensor i, f, g, o, c, c_prev, h_prev;
};

States lstm_states(const Layer& l) {
  const at::Tensor h0 = l.state(l.hx, l.hx);
  const at::Tensor c0 = l.state(l.cx, l.cx);
  const int64_t T = l.input.size(0);
  const at::Tensor h_prev = shift(l.output, h0, l.reverse);
  at::Tensor pre =
      at::matmul(l.input, l.weight0.t()) + at::matmul(h_prev, l.weight1.t());
  if (l.has_biases) {
    pre = pre + (l.weight2 + l.weight3);
  }
  const auto a = pre.chunk(4, -1);
  States s;
  s.i = a[0].sigmoid();
  s.f = a[1].sigmoid();
  s.g = a[2].tanh();
  s.o = a[3].sigmoid();
  std::vector<at::Tensor> cells(T, c0);
  at::Tensor c = c0;
  for (int64_t t : steps(T, l.reverse)) {
    c = s.f[t] * c + s.i[t] * s.g[t];
    cells[t] = c;
  }
  s.c = at::stack(cells, 0);
  s.c_prev = shift(s.c, c0, l.reverse);
  s.h_prev = h_prev;
  return s;
}

// Tangents of the forward values in time order (twin of recurrent._lstm_tangents).
struct Tangents {
  at::Tensor di, df, dg, d_o, dc, dc_prev, dh, dh_prev;
};

Tangents lstm_tangents(
    const Layer& l, const States& s, const InputTangents& v, bool bias_t) {
  const int64_t H = l.hx.size(-1);
  const int64_t T = l.input.size(0);
  at::Tensor dpre;
  if (v.input.defined()) {
    dpre = at::matmul(v.input, l.weight0.t());
  }
  const at::Tensor terms[] = {
      v.weight0.defined() ? at::matmul(l.input, v.weight0.t()) : at::Tensor(),
      v.weight1.defined() ? at::matmul(s.h_prev, v.weight1.t()) : at::Tensor(),
      bias_t ? v.weight2 : at::Tensor(),
      bias_t ? v.weight3 : at::Tensor(),
  };
  for (const at::Tensor& term : terms) {
    if (term.defined()) {
      dpre = dpre.defined() ? dpre + term : term;
    }
  }
  if (!dpre.defined()) {
    dpre = at::zeros({T, s.i.size(1), 4 * H}, s.i.options());
  } else if (dpre.dim() == 1) {
    dpre = dpre.expand({T, s.i.size(1), 4 * H});
  }
  at::Tensor dh = l.state(v.hx, l.hx);
  at::Tensor dc = l.state(v.cx, l.cx);
  const at::Tensor dh0 = dh, dc0 = dc;
  const at::Tensor tc = s.c.tanh();
  std::vector<at::Tensor> dis(T, dh), dfs(T, dh), dgs(T, dh), dos(T, dh),
      dcs(T, dh), dhs(T, dh);
  for (int64_t t : steps(T, l.reverse)) {
    const at::Tensor da = dpre[t] + at::matmul(dh, l.weight1.t());
    const auto d = da.chunk(4, -1);
    const at::Tensor i = s.i[t], f = s.f[t], g = s.g[t], o = s.o[t], tct = tc[t];
    const at::Tensor di = i * (1 - i) * d[0];
    const at::Tensor df = f * (1 - f) * d[1];
    const at::Tensor dg = (1 - g * g) * d[2];
    const at::Tensor d_o = o * (1 - o) * d[3];
    dc = df * s.c_prev[t] + f * dc + di * g + i * dg;
    dh = d_o * tct + o * (1 - tct * tct) * dc;
    dis[t] = di;
    dfs[t] = df;
    dgs[t] = dg;
    dos[t] = d_o;
    dcs[t] = dc;
    dhs[t] = dh;
  }
  Tangents r;
  r.di = at::stack(dis, 0);
  r.df = at::stack(dfs, 0);
  r.dg = at::stack(dgs, 0);
  r.d_o = at::stack(dos, 0);
  r.dc = at::stack(dcs, 0);
  r.dh = at::stack(dhs, 0);
  r.dc_prev = shift(r.dc, dc0, l.reverse);
  r.dh_prev = shift(r.dh, dh0, l.reverse);
  return r;
}

// The tangents of the layer's (output, hy, cy) (twin of recurrent._output_tangents).
TensorList output_tangents(const Layer& l, const Tangents& d) {
  return {d.dh, d.dh[l.last()].reshape(l.hx.sizes()),
          d.dc[l.last()].reshape(l.cx.sizes())};
}

// Twin of recurrent._backward_tangents.
TensorList backward_tangents(
    const Layer& l, const States& s, const InputTangents& v, const Tangents& d,
    const OutputGrads& grads, const OutputGrads& grads_t) {
  const int64_t T = l.input.size(0);
  const at::Tensor tc = s.c.tanh();
  const at::Tensor dtc = (1 - tc * tc) * d.dc;
  at::Tensor ah = l.state(grads.hy, l.hx);
  at::Tensor ac = l.state(grads.cy, l.cx);
  at::Tensor dah = l.state(grads_t.hy, l.hx);
  at::Tensor dac = l.state(grads_t.cy, l.cx);
  const at::Tensor w1_t = or_zeros(v.weight1, l.weight1);
  std::vector<at::Tensor> das(T, ah), ddas(T, ah);
  std::vector<int64_t> order = steps(T, l.reverse);
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const int64_t t = *it;
    if (grads.output.defined()) {
      ah = ah + grads.output[t];
    }
    if (grads_t.output.defined()) {
      dah = dah + grads_t.output[t];
    }
    const at::Tensor i = s.i[t], f = s.f[t], g = s.g[t], o = s.o[t], tct = tc[t];
    const at::Tensor di = d.di[t], df = d.df[t], dg = d.dg[t], d_o = d.d_o[t];
    const at::Tensor k = 1 - tct * tct;
    const at::Tensor ac_new = ac + ah * o * k;
    dac = dac + dah * o * k + ah * d_o * k - 2 * ah * o * tct * dtc[t];
    ac = ac_new;
    const at::Tensor si = i * (1 - i), sf = f * (1 - f), so = o * (1 - o);
    const at::Tensor sg = 1 - g * g;
    const at::Tensor a_i = ac * g;
    const at::Tensor a_f = ac * s.c_prev[t];
    const at::Tensor a_g = ac * i;
    const at::Tensor a_o = ah * tct;
    const at::Tensor d_i = dac * g + ac * dg;
    const at::Tensor d_f = dac * s.c_prev[t] + ac * d.dc_prev[t];
    const at::Tensor d_g = dac * i + ac * di;
    const at::Tensor d_oo = dah * tct + ah * dtc[t];
    const at::Tensor da = at::cat({a_i * si, a_f * sf, a_g * sg, a_o * so}, -1);
    const at::Tensor dda = at::cat(
        {d_i * si + a_i * di * (1 - 2 * i), d_f * sf + a_f * df * (1 - 2 * f),
         d_g * sg - 2 * a_g * g * dg, d_oo * so + a_o * d_o * (1 - 2 * o)},
        -1);
    das[t] = da;
    ddas[t] = dda;
    ah = at::matmul(da, l.weight1);
    dah = at::matmul(dda, l.weight1) + at::matmul(da, w1_t);
    dac = dac * f + ac * df;
    ac = ac * f;
  }
  const at::Tensor da = at::stack(das, 0), dda = at::stack(ddas, 0);
  at::Tensor g_input_t = at::matmul(dda, l.weight0);
  if (v.weight0.defined()) {
    g_input_t = g_input_t + at::matmul(da, v.weight0);
  }
  at::Tensor g_w0_t = at::matmul(flat(dda).t(), flat(l.input));
  if (v.input.defined()) {
    g_w0_t = g_w0_t + at::matmul(flat(da).t(), flat(v.input));
  }
  const at::Tensor g_w1_t = at::matmul(flat(dda).t(), flat(s.h_prev)) +
      at::matmul(flat(da).t(), flat(d.dh_prev));
  const at::Tensor g_b_t = dda.sum(at::IntArrayRef{0, 1});
  return {g_input_t, g_w0_t, g_w1_t, g_b_t, g_b_t, dah.reshape(l.hx.sizes()),
          dac.reshape(l.cx.sizes())};
}

// Twin of recurrent._layer_grads: backpropagation through time.
TensorList layer_grads(const Layer& l, const States& s, const OutputGrads& grads) {
  const int64_t T = s.i.size(0);
  at::Tensor dh = l.state(grads.hy, l.hx);
  at::Tensor dc = l.state(grads.cy, l.cx);
  const at::Tensor tc = s.c.tanh();
  std::vector<at::Tensor> das(T, dh);
  std::vector<int64_t> order = steps(T, l.reverse);
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const int64_t t = *it;
    if (grads.output.defined()) {
      dh = dh + grads.output[t];
    }
    const at::Tensor i = s.i[t], f = s.f[t], g = s.g[t], o = s.o[t], tct = tc[t];
    dc = dc + dh * o * (1 - tct * tct);
    const at::Tensor da = at::cat(
        {dc * g * i * (1 - i), dc * s.c_prev[t] * f * (1 - f),
         dc * i * (1 - g * g), dh * tct * o * (1 - o)},
        -1);
    das[t] = da;
    dh = at::matmul(da, l.weight1);
    dc = dc * f;
  }
  const at::Tensor da = at::stack(das, 0);
  const at::Tensor g_input = at::matmul(da, l.weight0);
  const at::Tensor g_w0 = at::matmul(flat(da).t(), flat(l.input));
  const at::Tensor g_w1 = at::matmul(flat(da).t(), flat(s.h_prev));
  const auto [g_b0, g_b1] = l.bias_grads(da.sum(at::IntArrayRef{0, 1}));
  return {g_input, g_w0, g_w1, g_b0, g_b1, dh.reshape(l.hx.sizes()),
          dc.reshape(l.cx.sizes())};
}

// Twin of recurrent._backward_grads: the seven gradients `along` are tangents of
// the layer's inputs (biases always read).
TensorList backward_grads(
    const Layer& l, const States& s, const InputTangents& along,
    const OutputGrads& grads) {
  const Tangents d = lstm_tangents(l, s, along, /*bias_t=*/true);
  TensorList r = backward_tangents(l, s, along, d, grads, OutputGrads{});
  std::tie(r[3], r[4]) = l.bias_grads(r[3]);
  for (const at::Tensor& t : output_tangents(l, d)) {
    r.push_back(t);
  }
  return r;
}

// What lstm_layer_derivative computes, by kind, and how many tensors it reads
// along (twin of recurrent._ALONG).
const std::pair<c10::string_view, size_t> kAlong[] = {
    {"tangents", 7}, {"grads", 3}, {"backward_tangents", 10}, {"backward_grads", 7}};

void check_along(c10::string_view kind, const TensorList& along) {
  for (const auto& [name, count] : kAlong) {
    if (kind == name) {
      TORCH_CHECK_VALUE(
          along.size() == count, "lstm_layer_derivative: '", kind, "' reads ",
          count, " tensors along, got ", along.size());
      return;
    }
  }
  TORCH_CHECK_VALUE(
      false,
      "lstm_layer_derivative: kind is one of tangents, grads, backward_tangents, "
      "backward_grads, got '",
      kind, "'");
}

}  // namespace

TensorList lstm_layer_derivative(
    c10::string_view kind, const TensorList& along, const at::Tensor& input,
    const at::Tensor& weight0, const at::Tensor& weight1,
    const at::Tensor& weight2, const at::Tensor& weight3, const at::Tensor& hx,
    const at::Tensor& cx, const at::Tensor& output,
    const at::Tensor& grad_output, const at::Tensor& grad_hy,
    const at::Tensor& grad_cy, bool reverse, int64_t mode, bool has_biases,
    at::IntArrayRef batch_sizes) {
  check_layer(mode, batch_sizes);
  check_along(kind, along);
  const Layer l{input, weight0, weight1, weight2, weight3,
                hx,    cx,      output,  reverse, has_biases};
  const States s = lstm_states(l);
  if (kind == "grads") {
    return layer_grads(l, s, {along[0], along[1], along[2]});
  }
  const InputTangents v{along[0], along[1], along[2], along[3],
                        along[4], along[5], along[6]};
  const OutputGrads grads{grad_output, grad_hy, grad_cy};
  if (kind == "backward_grads") {
    return backward_grads(l, s, v, grads);
  }
  const Tangents d = lstm_tangents(l, s, v, has_biases);
  if (kind == "tangents") {
    return output_tangents(l, d);
  }
  return backward_tangents(l, s, v, d, grads, {along[7], along[8], along[9]});
}

}  // namespace dualgen::formulas
