// Tangents laid out as their primals, as runtime/layout.py does it: what the hot
// path gives each output's tangent (native forward AD's layout rules).
#pragma once

#include <ATen/ATen.h>

namespace dualgen {

// Whether `tangent` has `primal`'s sizes, strides (where the size is not 1),
// storage offset, conjugate and negative bits: its layout but for the storage's
// extent (which a tangent batched by vmap has none of).
bool same_geometry(const at::Tensor& tangent, const at::Tensor& primal);

// Whether `tangent` already has `primal`'s layout: sizes, strides (where the size
// is not 1), storage offset and extent, conjugate and negative bits.
bool same_layout(const at::Tensor& tangent, const at::Tensor& primal);

// An uninitialised tensor of `dtype` with `primal`'s geometry; one over a larger
// storage (a view) gets zeros around it.
at::Tensor laid_out_like(const at::Tensor& primal, at::ScalarType dtype);

// `tangent` in `primal`'s layout: itself when it has it (unless `fresh`: then a
// copy, as for a tangent that is an input's), else a copy in that layout.
at::Tensor conform_layout(const at::Tensor& tangent, const at::Tensor& primal, bool fresh);

}  // namespace dualgen
