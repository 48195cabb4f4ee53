// Batching rules for torch's legacy vmap, for the element-wise ops it has none for.
//
// The vectorized forward-mode jacobians (dualgen.functional.jacobian with
// vectorize=True, torch's too) push the standard basis through each op as one
// tangent batched by `torch._vmap_internals._vmap`. An op without a batching
// rule there runs once per batch element (legacy vmap's for-loop fallback):
// tanh's tangent formula (tanh_backward) alone took three quarters of a 64x64
// MLP's jacobian. An element-wise op (tagged pointwise) needs no loop: each
// batched argument's batch dimensions go first, in level order (size 1 for the
// levels it lacks), the logical dimensions right-aligned, so that broadcasting
// the physical tensors is broadcasting each element's; the op runs once and its
// outputs are the same batch. Type promotion sees each argument as the loop
// would (an unbatched 0-d tensor stays 0-d); where a batched argument is 0-d per
// element and the dtypes differ, promotion could differ, and the batch is run
// element by element instead, as the fallback does. And `flatten` and `alias`,
// views the fallback refuses (the max-pooling kernels' formulas call flatten,
// the LU helpers' slices of whole dimensions alias).
//
// Then the products a tangent enters on the right of an unbatched matrix (the
// JVPs of `W @ x`: mv and mm with only the second operand batched), which
// torch's own rules run as a batched matrix product of the matrix expanded
// over the batch (many tiny products, three quarters of an MLP's jacobian),
// here as one matrix product of the batch; and `convolution` of a batched input
// with an unbatched weight and bias (the JVP of a convolution in its input),
// which had no rule (a convolution per batch element), here one convolution
// of the batch folded into the input's batch dimension (and its backward for
// the input's gradient, forward over reverse). And the ops without a rule that
// the jacobians and hessians reach on every pass: `sum` and `mean` of all
// elements, `mean.dim`, and `copy_` (a tangent laid out anew).
#include <ATen/LegacyBatchedTensorImpl.h>
#include <ATen/LegacyVmapTransforms.h>
#include <ATen/ATen.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/library.h>

#include <bitset>

#include "batching.h"

namespace py = pybind11;

namespace dualgen {

namespace batching {

// The tensor the op runs on for `t`: batch dimensions of `levels` first, then
// t's logical dimensions right-aligned to `rank`.
at::Tensor physical(const at::Tensor& t, const Levels& levels, int64_t rank) {
  at::Tensor value = t;
  Levels has;
  if (const auto* impl = at::maybeGetBatchedImpl(t)) {
    std::vector<int64_t> from, to;
    for (const auto& bdim : impl->bdims()) {  // (in level order)
      from.push_back(bdim.dim());
      to.push_back(static_cast<int64_t>(to.size()));
      has.set(bdim.level());
    }
    value = impl->value().movedim(from, to);
  }
  int64_t position = 0;
  for (size_t level = 0; level < levels.size(); ++level) {
    if (!levels[level]) continue;
    if (!has[level]) value = value.unsqueeze(position);
    ++position;
  }
  for (int64_t logical = value.dim() - position; logical < rank; ++logical) {
    value = value.unsqueeze(position);
  }
  return value;
}

Levels levels_of(std::initializer_list<at::Tensor> tensors) {
  Levels levels;
  for (const at::Tensor& t : tensors) {
    if (const auto* impl = at::maybeGetBatchedImpl(t)) {
      levels |= at::createVmapLevelsBitset(impl->bdims());
    }
  }
  return levels;
}

int64_t logical_dim(const at::Tensor& t) {
  const auto* impl = at::maybeGetBatchedImpl(t);
  return impl ? impl->value().dim() - static_cast<int64_t>(impl->bdims().size()) : t.dim();
}

// The batch run element by element along the innermost level: each element's
// arguments are those batched at that level with it selected (their outer
// levels stay batched, so this rule takes them again), the outputs stacked back
// into the level. (The innermost: its batch dim is the last a tensor has, so
// adding it back keeps a batched tensor's levels in order.)
void element_by_element(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const size_t n = op.schema().arguments().size();
  std::vector<c10::IValue> arguments(stack->end() - n, stack->end());
  torch::jit::drop(*stack, n);
  int64_t inner = -1, size = 0;
  for (const auto& value : arguments) {
    if (!value.isTensor()) continue;
    if (const auto* impl = at::maybeGetBatchedImpl(value.toTensor())) {
      const auto& last = impl->bdims().back();
      if (last.level() > inner) {
        inner = last.level();
        size = impl->value().size(last.dim());
      }
    }
  }
  std::vector<std::vector<at::Tensor>> outputs(op.schema().returns().size());
  for (int64_t b = 0; b < size; ++b) {
    torch::jit::Stack element;
    for (const auto& value : arguments) {
      const auto* impl = value.isTensor() ? at::maybeGetBatchedImpl(value.toTensor()) : nullptr;
      if (impl == nullptr || impl->bdims().back().level() != inner) {
        element.push_back(value);
        continue;
      }
      const int64_t dim = impl->bdims().back().dim();
      at::BatchDims outer;
      for (const auto& bdim : impl->bdims().slice(0, impl->bdims().size() - 1)) {
        outer.emplace_back(bdim.level(), bdim.dim() > dim ? bdim.dim() - 1 : bdim.dim());
      }
      at::Tensor selected = impl->value().select(dim, b);
      element.push_back(outer.empty() ? selected : at::makeBatched(selected, outer));
    }
    op.callBoxed(element);
    for (size_t k = 0; k < outputs.size(); ++k) outputs[k].push_back(element[k].toTensor());
  }
  for (auto& pieces : outputs) {
    if (!pieces.empty() && !pieces.front().defined()) {  // not computed (output_mask)
      stack->push_back(at::Tensor());
      continue;
    }
    stack->push_back(at::addBatchDim(at::stack(pieces), inner, 0));
  }
}

}  // namespace batching

namespace {

using batching::element_by_element;
using batching::Levels;
using batching::logical_dim;
using batching::physical;

std::unique_ptr<torch::Library> batching_library;

void pointwise_batched(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const size_t n = op.schema().arguments().size();
  auto arguments = torch::jit::last(*stack, n);
  Levels levels;
  int64_t rank = 0;
  bool scalar_batched = false, one_dtype = true;
  std::optional<at::ScalarType> dtype;
  for (const auto& value : arguments) {
    if (!value.isTensor()) continue;
    const at::Tensor& t = value.toTensor();
    one_dtype = one_dtype && (!dtype || *dtype == t.scalar_type());
    dtype = t.scalar_type();
    const auto* impl = at::maybeGetBatchedImpl(t);
    if (impl == nullptr && t.dim() == 0) continue;  // stays as it is
    if (impl != nullptr) {
      levels |= at::createVmapLevelsBitset(impl->bdims());
      scalar_batched = scalar_batched || logical_dim(t) == 0;
    }
    rank = std::max(rank, logical_dim(t));
  }
  if (scalar_batched && !one_dtype) return element_by_element(op, stack);
  std::vector<int64_t> shape;
  std::vector<size_t> positions;
  for (size_t i = stack->size() - n; i < stack->size(); ++i) {
    c10::IValue& value = (*stack)[i];
    if (!value.isTensor()) continue;
    const at::Tensor t = value.toTensor();
    if (at::maybeGetBatchedImpl(t) == nullptr && t.dim() == 0) continue;
    value = physical(t, levels, rank);
    shape = at::infer_size(shape, value.toTensor().sizes());
    positions.push_back(i);
  }
  // Each element's arguments broadcast as the op sees them un-batched, but the
  // batch dimensions broadcast too ([B, n] with [1, n]), which some kernels
  // refuse (CPU gelu_backward through oneDNN): the op gets them expanded to one
  // shape (views; where an argument has it already, as it is).
  for (const size_t i : positions) {
    const at::Tensor t = (*stack)[i].toTensor();
    if (t.sizes() != at::IntArrayRef(shape)) (*stack)[i] = t.expand(shape);
  }
  op.callBoxed(*stack);
  const at::VmapPhysicalToLogicalMap logical(levels);
  const size_t returned = op.schema().returns().size();
  for (size_t k = stack->size() - returned; k < stack->size(); ++k) {
    (*stack)[k] = logical.apply((*stack)[k].toTensor());
  }
}

// flatten(self, start_dim, end_dim), a view legacy vmap has no rule for (its
// loop cannot take views): the same view of the batch, past its batch dims.
void flatten_batched(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const int64_t end = (*stack)[stack->size() - 1].toInt();
  const int64_t start = (*stack)[stack->size() - 2].toInt();
  const at::Tensor self = (*stack)[stack->size() - 3].toTensor();
  torch::jit::drop(*stack, 3);
  const auto view = at::MultiBatchVmapTransform::logicalToPhysical(self);
  at::Tensor flat;
  if (logical_dim(self) == 0) {  // a 0-d tensor flattens to one element
    flat = view.tensor().unsqueeze(-1);
  } else {
    flat = view.tensor().flatten(view.getPhysicalDim(start), view.getPhysicalDim(end));
  }
  stack->push_back(view.getPhysicalToLogicalMap().apply(flat));
}

// alias(self), a view legacy vmap has no rule for: Python's slice of a whole
// dimension (`t[..., :k]` with k its length, as the LU helpers write) reaches
// it; the same alias of the batch.
void alias_batched(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const at::Tensor self = (*stack)[stack->size() - 1].toTensor();
  torch::jit::drop(*stack, 1);
  const auto view = at::MultiBatchVmapTransform::logicalToPhysical(self);
  stack->push_back(view.getPhysicalToLogicalMap().apply(view.tensor().alias()));
}

bool batched(const at::Tensor& t) { return at::isBatchedTensor(t); }

// mv(self, vec) and mm(self, mat2): as torch's rules where self is batched; with
// only the second operand batched, one product of its physical batch by self
// transposed (torch's rule expands self over the batch into a bmm). A vector is
// taken as a matrix of one column.
void product_batched(torch::jit::Stack* stack, bool vector) {
  const at::Tensor other = (*stack)[stack->size() - 1].toTensor();
  const at::Tensor self = (*stack)[stack->size() - 2].toTensor();
  torch::jit::drop(*stack, 2);
  TORCH_CHECK(self.dim() == 2 && other.dim() == (vector ? 1 : 2), "vmap: ",
              vector ? "mv" : "mm", ": expected a 2-D self and a ", vector ? 1 : 2,
              "-D second operand, got shapes ", self.sizes(), " and ", other.sizes());
  const auto as_matrix = [vector](const at::Tensor& t) { return vector ? t.unsqueeze(-1) : t; };
  const auto as_result = [vector](const at::Tensor& t) { return vector ? t.squeeze(-1) : t; };
  if (!batched(self)) {  // ([..., N, K] @ [K, L]).mT: one matrix product
    const auto view = at::MultiBatchVmapTransform::logicalToPhysical(other);
    const at::Tensor right = as_matrix(view.tensor()).transpose(-1, -2);
    const at::Tensor result = at::matmul(right, self.t()).transpose(-1, -2);
    stack->push_back(view.getPhysicalToLogicalMap().apply(as_result(result)));
    return;
  }
  at::VmapPhysicalViewVec views;
  if (batched(other)) {
    views = at::MultiBatchVmapTransform::logicalToPhysical({self, other});
  } else {
    views.push_back(at::MultiBatchVmapTransform::logicalToPhysical(self));
  }
  const at::Tensor right = as_matrix(batched(other) ? views[1].tensor() : other);
  const at::Tensor result = at::matmul(views[0].tensor(), right);
  stack->push_back(views[0].getPhysicalToLogicalMap().apply(as_result(result)));
}

void mv_batched(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  product_batched(stack, true);
}

void mm_batched(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  product_batched(stack, false);
}

// convolution(input, weight, bias, ...) with only the input batched: the batch
// folded into the input's leading dimension (its batch of images, or the batch
// itself for an input without one), one convolution, unfolded again. Otherwise
// element by element, as torch's fallback runs it.
void convolution_batched(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const size_t n = op.schema().arguments().size();
  const at::Tensor input = (*stack)[stack->size() - n].toTensor();
  const at::Tensor weight = (*stack)[stack->size() - n + 1].toTensor();
  const c10::IValue& bias = (*stack)[stack->size() - n + 2];
  const bool bias_batched = bias.isTensor() && batched(bias.toTensor());
  if (!batched(input) || batched(weight) || bias_batched) {
    return element_by_element(op, stack);
  }
  const auto view = at::MultiBatchVmapTransform::logicalToPhysical(input);
  const at::Tensor& physical = view.tensor();
  const int64_t image_dims = weight.dim() - 1;  // channels and spatial dims
  const int64_t batch_dims = physical.dim() - image_dims;
  int64_t images = 1;
  for (int64_t d = 0; d < batch_dims; ++d) images *= physical.size(d);
  std::vector<int64_t> folded{images};
  for (int64_t d = batch_dims; d < physical.dim(); ++d) folded.push_back(physical.size(d));
  (*stack)[stack->size() - n] = c10::IValue(physical.reshape(folded));
  op.callBoxed(*stack);  // (nothing batched is left)
  const at::Tensor out = (*stack)[stack->size() - 1].toTensor();
  std::vector<int64_t> unfolded(physical.sizes().begin(), physical.sizes().begin() + batch_dims);
  for (int64_t d = 1; d < out.dim(); ++d) unfolded.push_back(out.size(d));
  (*stack)[stack->size() - 1] = c10::IValue(view.getPhysicalToLogicalMap().apply(out.reshape(unfolded)));
}

// convolution_backward(grad_output, input, weight, ...) for the input's gradient
// alone (output_mask [true, false, false], forward over reverse of a
// convolution with constant weights) with only grad_output batched: folded as
// `convolution_batched` folds, the input repeated for each batch element (its
// values are the same for all). Otherwise element by element.
void convolution_backward_batched(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const size_t n = op.schema().arguments().size();
  const size_t first = stack->size() - n;
  const at::Tensor grad_output = (*stack)[first].toTensor();
  const at::Tensor input = (*stack)[first + 1].toTensor();
  const at::Tensor weight = (*stack)[first + 2].toTensor();
  const auto mask = (*stack)[stack->size() - 1].toBoolList();
  const bool input_gradient_only = mask.size() == 3 && mask[0] && !mask[1] && !mask[2];
  if (!input_gradient_only || !batched(grad_output) || batched(input) || batched(weight) ||
      logical_dim(grad_output) != weight.dim() || input.dim() != weight.dim()) {
    return element_by_element(op, stack);
  }
  const auto view = at::MultiBatchVmapTransform::logicalToPhysical(grad_output);
  const at::Tensor& physical = view.tensor();
  const int64_t batch_dims = physical.dim() - weight.dim();
  int64_t copies = 1;
  for (int64_t d = 0; d < batch_dims; ++d) copies *= physical.size(d);
  std::vector<int64_t> folded{copies * physical.size(batch_dims)};
  for (int64_t d = batch_dims + 1; d < physical.dim(); ++d) folded.push_back(physical.size(d));
  std::vector<int64_t> repeated{copies};
  for (int64_t size : input.sizes()) repeated.push_back(size);
  std::vector<int64_t> inputs_folded{copies * input.size(0)};
  for (int64_t d = 1; d < input.dim(); ++d) inputs_folded.push_back(input.size(d));
  (*stack)[first] = c10::IValue(physical.reshape(folded));
  (*stack)[first + 1] = c10::IValue(input.unsqueeze(0).expand(repeated).reshape(inputs_folded));
  op.callBoxed(*stack);  // (nothing batched is left)
  const size_t out = stack->size() - 3;
  const at::Tensor grad_input = (*stack)[out].toTensor();
  std::vector<int64_t> unfolded(physical.sizes().begin(), physical.sizes().begin() + batch_dims);
  for (int64_t size : input.sizes()) unfolded.push_back(size);
  (*stack)[out] = c10::IValue(view.getPhysicalToLogicalMap().apply(grad_input.reshape(unfolded)));
}

// sum(self, *, dtype) and mean(self, *, dtype): over every logical dimension
// (a 0-d one is a dimension of size one, so the batch dims are never reduced).
template <bool mean>
void reduce_all_batched(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  const auto dtype = (*stack)[stack->size() - 1].toOptional<at::ScalarType>();
  const at::Tensor self = (*stack)[stack->size() - 2].toTensor();
  torch::jit::drop(*stack, 2);
  const auto view = at::MultiBatchVmapTransform::logicalToPhysical(self);
  at::Tensor physical = view.tensor();
  const int64_t batch_dims = view.numBatchDims();
  if (physical.dim() == batch_dims) physical = physical.unsqueeze(-1);
  std::vector<int64_t> dims;
  for (int64_t d = batch_dims; d < physical.dim(); ++d) dims.push_back(d);
  const at::Tensor result =
      mean ? at::mean(physical, dims, false, dtype) : at::sum(physical, dims, false, dtype);
  stack->push_back(view.getPhysicalToLogicalMap().apply(result));
}

// mean.dim(self, dim, keepdim, *, dtype): the logical dims (all for None or
// none given) as physical ones.
void mean_dim_batched(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  const auto dtype = (*stack)[stack->size() - 1].toOptional<at::ScalarType>();
  const bool keepdim = (*stack)[stack->size() - 2].toBool();
  const auto dim = (*stack)[stack->size() - 3].toOptional<std::vector<int64_t>>();
  const at::Tensor self = (*stack)[stack->size() - 4].toTensor();
  torch::jit::drop(*stack, 4);
  const auto view = at::MultiBatchVmapTransform::logicalToPhysical(self);
  at::Tensor physical = view.tensor();
  const int64_t batch_dims = view.numBatchDims();
  std::vector<int64_t> dims;
  const bool scalar = physical.dim() == batch_dims;  // 0-d: its one dim is size one
  if (scalar) {
    physical = physical.unsqueeze(-1);
    dims.push_back(batch_dims);
  } else if (dim.has_value() && !dim->empty()) {
    for (int64_t d : *dim) dims.push_back(view.getPhysicalDim(d));
  } else {
    for (int64_t d = batch_dims; d < physical.dim(); ++d) dims.push_back(d);
  }
  at::Tensor result = at::mean(physical, dims, keepdim, dtype);
  if (scalar && keepdim) result = result.squeeze(-1);
  stack->push_back(view.getPhysicalToLogicalMap().apply(result));
}

// copy_(self, src, non_blocking): each batch element of self takes its src
// (src's batch dims aligned with self's, broadcast where it has none); self
// must be batched at every level src is, as torch's in-place rules require.
void copy_batched(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  const bool non_blocking = (*stack)[stack->size() - 1].toBool();
  const at::Tensor src = (*stack)[stack->size() - 2].toTensor();
  const c10::IValue self_value = (*stack)[stack->size() - 3];
  const at::Tensor self = self_value.toTensor();
  const auto* impl = at::maybeGetBatchedImpl(self);
  const auto* src_impl = at::maybeGetBatchedImpl(src);
  Levels levels, src_levels;
  if (impl != nullptr) levels = at::createVmapLevelsBitset(impl->bdims());
  if (src_impl != nullptr) src_levels = at::createVmapLevelsBitset(src_impl->bdims());
  TORCH_CHECK((src_levels & ~levels).none(),
              "vmap: copy_(self, src): self is not batched at every vmap level src is "
              "(each batch element of src would write the same memory of self)");
  const at::Tensor physical_self = at::MultiBatchVmapTransform::logicalToPhysical(self).tensor();
  physical_self.copy_(physical(src, levels, logical_dim(self)), non_blocking);
  torch::jit::drop(*stack, 3);
  stack->push_back(self_value);
}

// Replacing torch's own rules (mv, mm) makes the dispatcher warn: not a
// concern of the user's, so this registration's warnings are dropped.
struct DropWarnings : c10::WarningHandler {
  void process(const c10::Warning&) override {}
};

// Register the rule for `ops` (OpOverloads; the Python side chooses them), or,
// given None, remove it.
void set_batching(const py::object& ops) {
  batching_library.reset();
  if (ops.is_none()) return;
  batching_library = std::make_unique<torch::Library>(torch::Library::IMPL, "aten",
                                              c10::DispatchKey::Batched, __FILE__, __LINE__);
  for (const py::handle& func : ops) {
    const auto name = func.attr("_schema").attr("name").cast<std::string>();
    const auto overload = func.attr("_overloadname").cast<std::string>();
    const std::string bare = name.substr(name.find("::") + 2);
    const std::string qualified = overload == "default" ? bare : bare + "." + overload;
    batching_library->impl(qualified.c_str(),
                   torch::CppFunction::makeFromBoxedFunction<&pointwise_batched>());
  }
  batching_library->impl("flatten.using_ints",
                 torch::CppFunction::makeFromBoxedFunction<&flatten_batched>());
  batching_library->impl("alias", torch::CppFunction::makeFromBoxedFunction<&alias_batched>());
  batching_library->impl("convolution",
                 torch::CppFunction::makeFromBoxedFunction<&convolution_batched>());
  batching_library->impl("convolution_backward",
                 torch::CppFunction::makeFromBoxedFunction<&convolution_backward_batched>());
  batching_library->impl("sum", torch::CppFunction::makeFromBoxedFunction<&reduce_all_batched<false>>());
  batching_library->impl("mean", torch::CppFunction::makeFromBoxedFunction<&reduce_all_batched<true>>());
  batching_library->impl("mean.dim", torch::CppFunction::makeFromBoxedFunction<&mean_dim_batched>());
  batching_library->impl("copy_", torch::CppFunction::makeFromBoxedFunction<&copy_batched>());
  DropWarnings drop;
  c10::WarningUtils::WarningHandlerGuard quiet(&drop);
  batching_library->impl("mv", torch::CppFunction::makeFromBoxedFunction<&mv_batched>());
  batching_library->impl("mm", torch::CppFunction::makeFromBoxedFunction<&mm_batched>());
  batching::register_shape_rules(*batching_library);
}

}  // namespace

void bind_batching(py::module_& m) {
  m.def("set_batching", &set_batching,
        "register legacy vmap's element-wise batching rule for these OpOverloads "
        "(None: remove it)");
}

}  // namespace dualgen
