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
// element by element instead, as the fallback does. And `flatten`, a view the
// fallback refuses (the max-pooling kernels' formulas call it).
#include <ATen/LegacyBatchedTensorImpl.h>
#include <ATen/LegacyVmapTransforms.h>
#include <ATen/ATen.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/library.h>

#include <bitset>

namespace py = pybind11;

namespace dualgen {

namespace {

using Levels = std::bitset<at::kVmapNumLevels>;

std::unique_ptr<torch::Library> batching;

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
    stack->push_back(at::addBatchDim(at::stack(pieces), inner, 0));
  }
}

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
  for (size_t i = stack->size() - n; i < stack->size(); ++i) {
    c10::IValue& value = (*stack)[i];
    if (!value.isTensor()) continue;
    const at::Tensor t = value.toTensor();
    if (at::maybeGetBatchedImpl(t) == nullptr && t.dim() == 0) continue;
    value = physical(t, levels, rank);
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

// Register the rule for `ops` (OpOverloads; the Python side chooses them), or,
// given None, remove it.
void set_batching(const py::object& ops) {
  batching.reset();
  if (ops.is_none()) return;
  batching = std::make_unique<torch::Library>(torch::Library::IMPL, "aten",
                                              c10::DispatchKey::Batched, __FILE__, __LINE__);
  for (const py::handle& func : ops) {
    const auto name = func.attr("_schema").attr("name").cast<std::string>();
    const auto overload = func.attr("_overloadname").cast<std::string>();
    const std::string bare = name.substr(name.find("::") + 2);
    const std::string qualified = overload == "default" ? bare : bare + "." + overload;
    batching->impl(qualified.c_str(),
                   torch::CppFunction::makeFromBoxedFunction<&pointwise_batched>());
  }
  batching->impl("flatten.using_ints",
                 torch::CppFunction::makeFromBoxedFunction<&flatten_batched>());
}

}  // namespace

void bind_batching(py::module_& m) {
  m.def("set_batching", &set_batching,
        "register legacy vmap's element-wise batching rule for these OpOverloads "
        "(None: remove it)");
}

}  // namespace dualgen
