// Legacy-vmap batching rules for ops that index, shift, pad or resample a
// tensor: the tangent kernels of gather (sort, topk, max, max pooling),
// index_select, indexing, embedding, cumsum, flip, roll, repeat, padding,
// triu / tril, diag_embed, scatter_add, index_add, average pooling and
// upsampling; max pooling's backward ops; the `*_like` factories and casts;
// addmm; nll_loss_forward; the splits that return lists; and matmul's
// decomposition. Legacy vmap has no rule for them, so a Jacobian's batched
// tangents went through them one column at a time (torch's for-loop fallback):
// `jacfwd` of `x.repeat(4)` took 2.6x torch.func's time.
//
// Each rule takes the case where the tensor being indexed (or shifted, padded,
// resampled) is batched and the index-like arguments are not: the op runs once
// on the physical batch, batch dims leading, its dim arguments moved past them
// (or the batch folded into the images' leading dimension, for the kernels
// that take a fixed rank). Every other case runs element by element, as
// torch's fallback does.
#include <ATen/LegacyBatchedTensorImpl.h>
#include <ATen/LegacyVmapTransforms.h>
#include <ATen/WrapDimUtils.h>

#include "batching.h"

namespace dualgen::batching {

namespace {

bool holds_batched(const c10::IValue& value) {
  if (value.isTensor()) return at::isBatchedTensor(value.toTensor());
  if (value.isTensorList()) {
    for (const at::Tensor& t : value.toTensorVector()) {
      if (at::isBatchedTensor(t)) return true;
    }
  }
  if (value.isList()) {  // Tensor?[]
    for (const c10::IValue& item : value.toListRef()) {
      if (item.isTensor() && at::isBatchedTensor(item.toTensor())) return true;
    }
  }
  return false;
}

// The stack's arguments of `op`, first at `first`.
size_t first_argument(const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  return stack.size() - op.schema().arguments().size();
}

// True if argument `which` is a batched tensor of at least `min_rank` logical
// dims and no other argument holds a batched tensor.
bool batched_alone(const c10::OperatorHandle& op, const torch::jit::Stack& stack,
                   size_t which, int64_t min_rank) {
  const size_t first = first_argument(op, stack);
  for (size_t i = first; i < stack.size(); ++i) {
    const bool batched = holds_batched(stack[i]);
    if (i - first == which) {
      if (!batched || logical_dim(stack[i].toTensor()) < min_rank) return false;
    } else if (batched) {
      return false;
    }
  }
  return true;
}

// Replaces the op's arguments on the stack by its result, `physical` mapped
// back through `view`.
void push_result(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                 const at::VmapPhysicalView& view, const at::Tensor& physical) {
  torch::jit::drop(*stack, op.schema().arguments().size());
  stack->push_back(view.getPhysicalToLogicalMap().apply(physical));
}

std::vector<int64_t> physical_dims(const at::VmapPhysicalView& view, c10::IntArrayRef dims) {
  std::vector<int64_t> out;
  for (int64_t d : dims) out.push_back(view.getPhysicalDim(d));
  return out;
}

// The batch sizes of a physical view, then `rest`.
std::vector<int64_t> batch_then(const at::VmapPhysicalView& view, c10::IntArrayRef rest) {
  const auto sizes = view.tensor().sizes();
  std::vector<int64_t> shape(sizes.begin(), sizes.begin() + view.numBatchDims());
  shape.insert(shape.end(), rest.begin(), rest.end());
  return shape;
}

// A rule: `compute` (the physical view of the batched argument 0 and the
// arguments) gives the physical result, for a batched argument 0 of at least
// `min_rank` logical dims with nothing else batched; element by element
// otherwise.
template <int64_t min_rank, at::Tensor (*compute)(const at::VmapPhysicalView&,
                                                 c10::ArrayRef<c10::IValue>)>
void self_batched(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  if (!batched_alone(op, *stack, 0, min_rank)) return element_by_element(op, stack);
  const size_t first = first_argument(op, *stack);
  const c10::ArrayRef<c10::IValue> args(stack->data() + first, stack->size() - first);
  const auto view = at::MultiBatchVmapTransform::logicalToPhysical(args[0].toTensor());
  const at::Tensor result = compute(view, args);
  push_result(op, stack, view, result);
}

// cumsum(self, dim, *, dtype)
at::Tensor cumsum(const at::VmapPhysicalView& view, c10::ArrayRef<c10::IValue> args) {
  return at::cumsum(view.tensor(), view.getPhysicalDim(args[1].toInt()),
                    args[2].toOptional<at::ScalarType>());
}

// flip(self, dims)
at::Tensor flip(const at::VmapPhysicalView& view, c10::ArrayRef<c10::IValue> args) {
  return view.tensor().flip(physical_dims(view, args[1].toIntVector()));
}

// roll(self, shifts, dims): without dims, over the flattened element.
at::Tensor roll(const at::VmapPhysicalView& view, c10::ArrayRef<c10::IValue> args) {
  const auto shifts = args[1].toIntVector();
  const auto dims = args[2].toIntVector();
  const at::Tensor& t = view.tensor();
  if (dims.empty()) {
    const int64_t start = view.numBatchDims();
    return t.flatten(start).roll(shifts, {start}).view(t.sizes());
  }
  return t.roll(shifts, physical_dims(view, dims));
}

// repeat(self, repeats): the element viewed with the leading ones repeats adds.
at::Tensor repeat(const at::VmapPhysicalView& view, c10::ArrayRef<c10::IValue> args) {
  const auto repeats = args[1].toIntVector();
  const at::Tensor& t = view.tensor();
  const int64_t batch = view.numBatchDims();
  const int64_t rank = t.dim() - batch;
  TORCH_CHECK(static_cast<int64_t>(repeats.size()) >= rank,
              "Number of dimensions of repeat dims can not be smaller than number of "
              "dimensions of tensor");
  std::vector<int64_t> ones(repeats.size() - rank, 1);
  ones.insert(ones.end(), t.sizes().begin() + batch, t.sizes().end());
  std::vector<int64_t> all(batch, 1);
  all.insert(all.end(), repeats.begin(), repeats.end());
  return t.reshape(batch_then(view, ones)).repeat(all);
}

// constant_pad_nd(self, pad, value): pads trailing dims, which the batch's are.
at::Tensor constant_pad_nd(const at::VmapPhysicalView& view, c10::ArrayRef<c10::IValue> args) {
  const auto pad = args[1].toIntVector();
  TORCH_CHECK(static_cast<int64_t>(pad.size()) <= 2 * (view.tensor().dim() - view.numBatchDims()),
              "Length of pad should be no more than twice the number of dimensions of the input.");
  return at::constant_pad_nd(view.tensor(), pad, args[2].toScalar());
}

// triu(self, diagonal), tril(self, diagonal): the trailing two dims.
at::Tensor triu(const at::VmapPhysicalView& view, c10::ArrayRef<c10::IValue> args) {
  return view.tensor().triu(args[1].toInt());
}

at::Tensor tril(const at::VmapPhysicalView& view, c10::ArrayRef<c10::IValue> args) {
  return view.tensor().tril(args[1].toInt());
}

// diag_embed(self, offset, dim1, dim2): dims of the result, one more than self's.
at::Tensor diag_embed(const at::VmapPhysicalView& view, c10::ArrayRef<c10::IValue> args) {
  const int64_t batch = view.numBatchDims();
  const int64_t rank = view.tensor().dim() - batch + 1;
  const int64_t dim1 = at::maybe_wrap_dim(args[2].toInt(), rank) + batch;
  const int64_t dim2 = at::maybe_wrap_dim(args[3].toInt(), rank) + batch;
  return at::diag_embed(view.tensor(), args[1].toInt(), dim1, dim2);
}

// gather(self, dim, index, *, sparse_grad): the index the same for every element.
at::Tensor gather(const at::VmapPhysicalView& view, c10::ArrayRef<c10::IValue> args) {
  const at::Tensor index = args[2].toTensor();
  const int64_t rank = view.tensor().dim() - view.numBatchDims();
  TORCH_CHECK(index.dim() == rank,
              "Index tensor must have the same number of dimensions as input tensor");
  return at::gather(view.tensor(), view.getPhysicalDim(args[1].toInt()),
                    index.expand(batch_then(view, index.sizes())), args[3].toBool());
}

// index_select(self, dim, index)
at::Tensor index_select(const at::VmapPhysicalView& view, c10::ArrayRef<c10::IValue> args) {
  return at::index_select(view.tensor(), view.getPhysicalDim(args[1].toInt()),
                          args[2].toTensor());
}

// embedding(weight, indices, ...): the rows of each element's weight.
at::Tensor embedding(const at::VmapPhysicalView& view, c10::ArrayRef<c10::IValue> args) {
  const at::Tensor indices = args[1].toTensor();
  const at::Tensor& weight = view.tensor();
  std::vector<int64_t> shape(indices.sizes().begin(), indices.sizes().end());
  shape.push_back(weight.size(-1));
  return weight.index_select(view.numBatchDims(), indices.reshape(-1))
      .view(batch_then(view, shape));
}

// index.Tensor(self, indices): the batch dims taken whole. Advanced indices
// separated by a whole dimension put their result first, before the batch
// dims: those run element by element.
void index(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  if (!batched_alone(op, *stack, 0, 1)) return element_by_element(op, stack);
  const auto indices = stack->back().to<c10::List<std::optional<at::Tensor>>>();
  int64_t first_index = -1, last_index = -1, count = 0;
  for (size_t i = 0; i < indices.size(); ++i) {
    const std::optional<at::Tensor> t = indices.get(i);
    if (!t.has_value() || !t->defined()) continue;
    if (first_index < 0) first_index = static_cast<int64_t>(i);
    last_index = static_cast<int64_t>(i);
    ++count;
  }
  if (count == 0 || last_index - first_index + 1 != count) {
    return element_by_element(op, stack);
  }
  const auto view = at::MultiBatchVmapTransform::logicalToPhysical(
      (*stack)[stack->size() - 2].toTensor());
  c10::List<std::optional<at::Tensor>> shifted;
  for (int64_t d = 0; d < view.numBatchDims(); ++d) shifted.push_back(std::nullopt);
  for (size_t i = 0; i < indices.size(); ++i) shifted.push_back(indices.get(i));
  push_result(op, stack, view, at::index(view.tensor(), shifted));
}

// scatter_add(self, dim, index, src) and index_add(self, dim, index, source,
// *, alpha) with self or the source batched and the index not: self and the
// source both physical, expanded over the batch, the index too for scatter_add.
template <bool scatter>
void add_at(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const size_t first = first_argument(op, *stack);
  const at::Tensor self = (*stack)[first].toTensor();
  const at::Tensor index = (*stack)[first + 2].toTensor();
  const at::Tensor source = (*stack)[first + 3].toTensor();
  const int64_t rank = logical_dim(self);
  if (at::isBatchedTensor(index) || rank == 0 || logical_dim(source) != rank ||
      (!at::isBatchedTensor(self) && !at::isBatchedTensor(source))) {
    return element_by_element(op, stack);
  }
  const Levels levels = levels_of({self, source});
  at::Tensor self_p = physical(self, levels, rank);
  at::Tensor source_p = physical(source, levels, rank);
  const int64_t batch = static_cast<int64_t>(levels.count());
  std::vector<int64_t> sizes;
  for (int64_t d = 0; d < batch; ++d) sizes.push_back(std::max(self_p.size(d), source_p.size(d)));
  const auto over_batch = [&](const at::Tensor& t, int64_t skip) {
    std::vector<int64_t> shape(sizes);
    shape.insert(shape.end(), t.sizes().begin() + skip, t.sizes().end());
    return shape;
  };
  self_p = self_p.expand(over_batch(self_p, batch));
  source_p = source_p.expand(over_batch(source_p, batch));
  const int64_t dim = at::maybe_wrap_dim((*stack)[first + 1].toInt(), rank) + batch;
  at::Tensor result;
  if constexpr (scatter) {
    result = at::scatter_add(self_p, dim, index.expand(over_batch(index, 0)), source_p);
  } else {
    result = at::index_add(self_p, dim, index, source_p, (*stack)[first + 4].toScalar());
  }
  torch::jit::drop(*stack, op.schema().arguments().size());
  stack->push_back(at::VmapPhysicalToLogicalMap(levels).apply(result));
}

// Kernels that take images of a fixed rank ((N, C, *spatial), or (C, *spatial)
// for some): the batch and any leading logical dims folded into N, the last
// `kept` (C and the spatial dims) kept, the result unfolded again.
template <int64_t kept>
void images(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  if (!batched_alone(op, *stack, 0, kept)) return element_by_element(op, stack);
  const size_t first = first_argument(op, *stack);
  const auto view = at::MultiBatchVmapTransform::logicalToPhysical((*stack)[first].toTensor());
  const at::Tensor& t = view.tensor();
  std::vector<int64_t> folded{-1};
  folded.insert(folded.end(), t.sizes().end() - kept, t.sizes().end());
  (*stack)[first] = c10::IValue(t.reshape(folded));
  op.callBoxed(*stack);  // (nothing batched is left)
  const at::Tensor out = stack->back().toTensor();
  std::vector<int64_t> unfolded(t.sizes().begin(), t.sizes().end() - kept);
  unfolded.insert(unfolded.end(), out.sizes().end() - kept, out.sizes().end());
  stack->back() = c10::IValue(view.getPhysicalToLogicalMap().apply(out.reshape(unfolded)));
}

// zeros_like(self, ...) and the other `*_like` factories: the physical
// batch's, which has each element's shape.
void like(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  if (!batched_alone(op, *stack, 0, 0)) return element_by_element(op, stack);
  const size_t first = first_argument(op, *stack);
  const auto view = at::MultiBatchVmapTransform::logicalToPhysical((*stack)[first].toTensor());
  (*stack)[first] = c10::IValue(view.tensor());
  op.callBoxed(*stack);  // (nothing batched is left)
  stack->back() = c10::IValue(view.getPhysicalToLogicalMap().apply(stack->back().toTensor()));
}

// _unsafe_view(self, size), which matmul's decomposition reaches: each
// element's values in the new shape.
at::Tensor unsafe_view(const at::VmapPhysicalView& view, c10::ArrayRef<c10::IValue> args) {
  return view.tensor().reshape(batch_then(view, args[1].toIntVector()));
}

// linalg_solve_triangular(A, B, *, upper, left, unitriangular), which
// broadcasts its operands' leading dims: each operand's batch dims first, its
// logical dims right-aligned, as the element-wise rule lays them out.
void solve_triangular(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const size_t first = first_argument(op, *stack);
  const at::Tensor a = (*stack)[first].toTensor();
  const at::Tensor b = (*stack)[first + 1].toTensor();
  const Levels levels = levels_of({a, b});
  const int64_t rank = std::max(logical_dim(a), logical_dim(b));
  const at::Tensor result = at::linalg_solve_triangular(
      physical(a, levels, rank), physical(b, levels, rank), (*stack)[first + 2].toBool(),
      (*stack)[first + 3].toBool(), (*stack)[first + 4].toBool());
  torch::jit::drop(*stack, op.schema().arguments().size());
  stack->push_back(at::VmapPhysicalToLogicalMap(levels).apply(result));
}

// matmul, a composite op, of operands of two or more dims: its decomposition
// (mm, bmm, reshapes and expands, which have rules) on the batched operands,
// where legacy vmap's fallback would take it first and loop. A 1-d operand's
// decomposition squeezes in place, which legacy vmap's loop does to each
// element's view and not to the batch (the result would keep the dim): those
// run element by element, as does a decomposition that meets an op the
// fallback cannot loop over.
void decomposed(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const size_t n = op.schema().arguments().size();
  const size_t first = stack->size() - n;
  for (size_t i = first; i < stack->size(); ++i) {
    if (logical_dim((*stack)[i].toTensor()) < 2) return element_by_element(op, stack);
  }
  const std::vector<c10::IValue> arguments(stack->begin() + first, stack->end());
  try {
    op.callBoxedForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd, *stack);
  } catch (const c10::Error&) {
    stack->resize(first);
    stack->insert(stack->end(), arguments.begin(), arguments.end());
    element_by_element(op, stack);
  }
}

// addmm(self, mat1, mat2, *, beta, alpha): beta self + alpha mat1 @ mat2 on the
// batched operands (mm's rule and the element-wise ones); self is not read
// where beta is 0, as the op does not (its NaNs do not propagate).
void addmm(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const size_t first = first_argument(op, *stack);
  const at::Tensor self = (*stack)[first].toTensor();
  const at::Tensor mat1 = (*stack)[first + 1].toTensor();
  const at::Tensor mat2 = (*stack)[first + 2].toTensor();
  const c10::Scalar beta = (*stack)[first + 3].toScalar();
  const c10::Scalar alpha = (*stack)[first + 4].toScalar();
  at::Tensor product = at::mm(mat1, mat2);
  if (!(alpha.isIntegral(false) && alpha.toLong() == 1)) product = product * alpha;
  at::Tensor result;
  if (beta.isIntegral(false) && beta.toLong() == 0) {
    result = product;
  } else if (beta.isIntegral(false) && beta.toLong() == 1) {
    result = self + product;
  } else {
    result = self * beta + product;
  }
  torch::jit::drop(*stack, op.schema().arguments().size());
  stack->push_back(result);
}

// nll_loss_forward(self, target, weight, reduction, ignore_index), self batched
// ((N, C) or (C) per element): the batch folded into N, reduction none, then
// each element's reduction; the total weight is the same for every element
// (it reads the target and weight only): the op's own, on zeros of one
// element's shape.
void nll_loss_forward(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  if (!batched_alone(op, *stack, 0, 1)) return element_by_element(op, stack);
  const size_t first = first_argument(op, *stack);
  const auto view = at::MultiBatchVmapTransform::logicalToPhysical((*stack)[first].toTensor());
  const at::Tensor target = (*stack)[first + 1].toTensor();
  const auto weight = (*stack)[first + 2].toOptional<at::Tensor>();
  const int64_t reduction = (*stack)[first + 3].toInt();
  const int64_t ignore_index = (*stack)[first + 4].toInt();
  const at::Tensor& self = view.tensor();
  const int64_t batch_dims = view.numBatchDims();
  const bool rows = self.dim() - batch_dims == 2;  // (N, C), else (C)
  const int64_t n = rows ? self.size(-2) : 1;
  const std::vector<int64_t> batch = batch_then(view, {});
  int64_t elements = 1;
  for (int64_t size : batch) elements *= size;
  const at::Tensor targets = target.reshape({1, n}).expand({elements, n}).reshape({-1});
  const at::Tensor each = std::get<0>(at::nll_loss_forward(
      self.reshape({-1, self.size(-1)}), targets, weight, at::Reduction::None, ignore_index));
  std::vector<int64_t> shape(batch);
  if (rows) shape.push_back(n);
  at::Tensor output = each.view(shape);
  const std::vector<int64_t> one(self.sizes().begin() + batch_dims, self.sizes().end());
  const at::Tensor total = std::get<1>(at::nll_loss_forward(
      at::zeros(one, self.options()), target, weight, reduction, ignore_index));
  if (reduction != at::Reduction::None && rows) output = output.sum(-1);
  if (reduction == at::Reduction::Mean) output = output / total;
  torch::jit::drop(*stack, op.schema().arguments().size());
  const auto& logical = view.getPhysicalToLogicalMap();
  stack->push_back(logical.apply(output));
  stack->push_back(logical.apply(total.expand(batch)));
}

// unsafe_split(self, split_size, dim), unsafe_split_with_sizes(self,
// split_sizes, dim), split_with_sizes_copy and unbind_copy: lists, which
// legacy vmap's fallback cannot stack (GRU's cells split their gates with
// unsafe_split: a Jacobian through nn.GRU ran a column at a time). The same
// split of the batch past its batch dims.
template <std::vector<at::Tensor> (*split)(const at::Tensor&, c10::ArrayRef<c10::IValue>,
                                           int64_t)>
void split_batched(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  if (!batched_alone(op, *stack, 0, 1)) return element_by_element(op, stack);
  const size_t first = first_argument(op, *stack);
  const c10::ArrayRef<c10::IValue> args(stack->data() + first, stack->size() - first);
  const auto view = at::MultiBatchVmapTransform::logicalToPhysical(args[0].toTensor());
  const int64_t dim = view.getPhysicalDim(args.back().toInt());
  std::vector<at::Tensor> pieces = split(view.tensor(), args, dim);
  const auto& logical = view.getPhysicalToLogicalMap();
  // (copies: the pieces are new tensors, as the loop's stacked ones would be)
  for (at::Tensor& piece : pieces) piece = logical.apply(piece.clone());
  torch::jit::drop(*stack, args.size());
  stack->push_back(c10::IValue(pieces));
}

std::vector<at::Tensor> split_by_size(const at::Tensor& t, c10::ArrayRef<c10::IValue> args,
                                      int64_t dim) {
  return t.split(args[1].toInt(), dim);
}

std::vector<at::Tensor> split_by_sizes(const at::Tensor& t, c10::ArrayRef<c10::IValue> args,
                                       int64_t dim) {
  return t.split_with_sizes(args[1].toIntVector(), dim);
}

std::vector<at::Tensor> unbind(const at::Tensor& t, c10::ArrayRef<c10::IValue>, int64_t dim) {
  return t.unbind(dim);
}

// max_pool{2,3}d_with_indices_backward(grad_output, self, ..., indices) and
// adaptive_max_pool{2,3}d_backward(grad_output, self, indices) with only
// grad_output batched (forward over reverse through max pooling): each
// element's gradient is grad_output scattered, added, into the positions
// `indices` (flat within each plane of `spatial` dims) name; one scatter_add
// of the batch. Element by element otherwise.
template <int64_t spatial>
void pool_backward(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  if (!batched_alone(op, *stack, 0, spatial + 1)) return element_by_element(op, stack);
  const size_t first = first_argument(op, *stack);
  const at::Tensor self = (*stack)[first + 1].toTensor();
  const at::Tensor indices = stack->back().toTensor();
  const auto view = at::MultiBatchVmapTransform::logicalToPhysical((*stack)[first].toTensor());
  const at::Tensor& grad = view.tensor();
  const std::vector<int64_t> batch = batch_then(view, {});
  std::vector<int64_t> shape(batch);
  shape.insert(shape.end(), self.sizes().begin(), self.sizes().end());
  const at::Tensor flat_grad = grad.flatten(-spatial);
  std::vector<int64_t> index_shape(batch);
  const at::Tensor flat_indices = indices.flatten(-spatial);
  index_shape.insert(index_shape.end(), flat_indices.sizes().begin(), flat_indices.sizes().end());
  const at::Tensor result =
      at::zeros(shape, grad.options()).flatten(-spatial).scatter_add(
          -1, flat_indices.expand(index_shape), flat_grad);
  torch::jit::drop(*stack, op.schema().arguments().size());
  stack->push_back(view.getPhysicalToLogicalMap().apply(result.view(shape)));
}

template <auto rule>
torch::CppFunction boxed() {
  return torch::CppFunction::makeFromBoxedFunction<rule>();
}

}  // namespace

void register_shape_rules(torch::Library& library) {
  library.impl("cumsum", boxed<&self_batched<1, &cumsum>>());
  library.impl("flip", boxed<&self_batched<1, &flip>>());
  library.impl("roll", boxed<&self_batched<1, &roll>>());
  library.impl("repeat", boxed<&self_batched<0, &repeat>>());
  library.impl("constant_pad_nd", boxed<&self_batched<1, &constant_pad_nd>>());
  library.impl("triu", boxed<&self_batched<2, &triu>>());
  library.impl("tril", boxed<&self_batched<2, &tril>>());
  library.impl("diag_embed", boxed<&self_batched<1, &diag_embed>>());
  library.impl("gather", boxed<&self_batched<1, &gather>>());
  library.impl("index_select", boxed<&self_batched<1, &index_select>>());
  library.impl("embedding", boxed<&self_batched<2, &embedding>>());
  library.impl("index.Tensor", boxed<&index>());
  library.impl("scatter_add", boxed<&add_at<true>>());
  library.impl("index_add", boxed<&add_at<false>>());
  library.impl("addmm", boxed<&addmm>());
  library.impl("nll_loss_forward", boxed<&nll_loss_forward>());
  library.impl("max_pool2d_with_indices_backward", boxed<&pool_backward<2>>());
  library.impl("adaptive_max_pool2d_backward", boxed<&pool_backward<2>>());
  library.impl("max_pool3d_with_indices_backward", boxed<&pool_backward<3>>());
  library.impl("adaptive_max_pool3d_backward", boxed<&pool_backward<3>>());
  library.impl("unsafe_split.Tensor", boxed<&split_batched<&split_by_size>>());
  library.impl("unsafe_split_with_sizes", boxed<&split_batched<&split_by_sizes>>());
  library.impl("split_with_sizes_copy", boxed<&split_batched<&split_by_sizes>>());
  library.impl("unbind_copy.int", boxed<&split_batched<&unbind>>());
  for (const char* name :
       {"zeros_like", "ones_like", "full_like", "empty_like", "_to_copy", "fill.Tensor"}) {
    library.impl(name, boxed<&like>());
  }
  library.impl("matmul", boxed<&decomposed>());
  library.impl("_unsafe_view", boxed<&self_batched<0, &unsafe_view>>());
  library.impl("linalg_solve_triangular", boxed<&solve_triangular>());
  for (const char* name :
       {"avg_pool1d", "upsample_nearest1d", "upsample_nearest1d.vec", "upsample_linear1d",
        "upsample_linear1d.vec", "_upsample_nearest_exact1d", "_upsample_nearest_exact1d.vec",
        "reflection_pad1d", "replication_pad1d"}) {
    library.impl(name, boxed<&images<2>>());
  }
  for (const char* name :
       {"avg_pool2d", "_adaptive_avg_pool2d", "upsample_nearest2d", "upsample_nearest2d.vec",
        "upsample_bilinear2d", "upsample_bilinear2d.vec", "upsample_bicubic2d",
        "upsample_bicubic2d.vec", "_upsample_bilinear2d_aa", "_upsample_bilinear2d_aa.vec",
        "_upsample_bicubic2d_aa", "_upsample_bicubic2d_aa.vec", "_upsample_nearest_exact2d",
        "_upsample_nearest_exact2d.vec", "reflection_pad2d", "replication_pad2d",
        "pixel_shuffle", "pixel_unshuffle"}) {
    library.impl(name, boxed<&images<3>>());
  }
  for (const char* name :
       {"avg_pool3d", "_adaptive_avg_pool3d", "upsample_nearest3d", "upsample_nearest3d.vec",
        "upsample_trilinear3d", "upsample_trilinear3d.vec", "_upsample_nearest_exact3d",
        "_upsample_nearest_exact3d.vec", "reflection_pad3d", "replication_pad3d"}) {
    library.impl(name, boxed<&images<4>>());
  }
}

}  // namespace dualgen::batching
