// Shared by the batching rules dualgen gives torch's legacy vmap (batching.cpp:
// element-wise ops, products, convolutions, reductions; batching_shapes.cpp:
// ops that index, shift, pad or resample one batched tensor).
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/stack.h>
#include <torch/library.h>

#include <bitset>

namespace dualgen::batching {

using Levels = std::bitset<at::kVmapNumLevels>;

// The tensor the op runs on for `t`: batch dimensions of `levels` first (size 1
// for the levels t lacks), then t's logical dimensions right-aligned to `rank`.
at::Tensor physical(const at::Tensor& t, const Levels& levels, int64_t rank);

// The vmap levels at which any of `tensors` is batched.
Levels levels_of(std::initializer_list<at::Tensor> tensors);

// The dimensions of t as each batch element sees it.
int64_t logical_dim(const at::Tensor& t);

// The op run element by element along the innermost batched level, as torch's
// fallback runs it (for the cases a rule does not take).
void element_by_element(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// Registers batching_shapes.cpp's rules on `library` (aten, Batched).
void register_shape_rules(torch::Library& library);

}  // namespace dualgen::batching
