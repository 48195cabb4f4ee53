// C++ twins of dualgen.formulas.reductions (same names, same meaning): the
// tangents of reductions (sum-like, norms, var/std, logsumexp, prod, amax/amin,
// full max/min/median, renorm), of the scans cumprod/logcumsumexp, and of the
// ops that select elements by their indices (max.dim, sort, topk, cummax, ...).
//
// `dim` of a reduction: an undefined or empty list means all dims; negative
// dims count from the end (wrapped as Python's `d % ndim`).
#pragma once

#include "dualgen/formulas/common.h"

namespace dualgen::formulas {

// Tangent of amax/amin: the mean tangent of the elements that attain it.
at::Tensor amax_tangent(
    const at::Tensor& self_t,
    const at::Tensor& self_p,
    const at::Tensor& result,
    at::OptionalIntArrayRef dim,
    bool keepdim);
// aminmax's `int? dim`: one dim, or none for all.
at::Tensor amax_tangent(
    const at::Tensor& self_t,
    const at::Tensor& self_p,
    const at::Tensor& result,
    std::optional<int64_t> dim,
    bool keepdim);

// The elements of `t` that a max/min over `dim` selected (its `indices` output).
at::Tensor gather_reduced(
    const at::Tensor& t, int64_t dim, const at::Tensor& indices, bool keepdim);

// Tangent of linalg_vector_norm: sum of Re(conj(d norm/d x) * x_t); `ord`
// absent means 2.
at::Tensor vector_norm_tangent(
    const at::Tensor& self_t,
    const at::Tensor& self_p,
    const std::optional<c10::Scalar>& ord,
    at::OptionalIntArrayRef dim,
    bool keepdim,
    const at::Tensor& result);

// Tangents of _foreach_norm: for each tensor of the list, the tangent of its
// vector norm over all its elements (`result`: the norms, in the op's dtype).
TensorList foreach_norm_tangents(
    const TensorList& self_t,
    const TensorList& self_p,
    const std::optional<c10::Scalar>& ord,
    const TensorList& result);

// Tangent of dist(self, other, p) from the tangent `t` of one input (self's;
// negate for other's): the norm's tangent at self - other.
at::Tensor dist_tangent(
    const at::Tensor& t,
    const at::Tensor& self_p,
    const at::Tensor& other_p,
    const std::optional<c10::Scalar>& p,
    const at::Tensor& result);

// Tangent of var.correction: 2 Re(conj(x - mean) x_t) summed, over the dof
// (`correction` absent means 1).
at::Tensor var_tangent(
    const at::Tensor& self_t,
    const at::Tensor& self_p,
    at::OptionalIntArrayRef dim,
    const std::optional<c10::Scalar>& correction,
    bool keepdim,
    const at::Tensor& result);

// Tangent of std.correction: var's tangent over 2 std (0 where std is 0).
at::Tensor std_tangent(
    const at::Tensor& self_t,
    const at::Tensor& self_p,
    at::OptionalIntArrayRef dim,
    const std::optional<c10::Scalar>& correction,
    bool keepdim,
    const at::Tensor& result);

// Tangent of a mean over `dim`, as var_mean's second output.
at::Tensor mean_tangent(
    const at::Tensor& self_t,
    const at::Tensor& self_p,
    at::OptionalIntArrayRef dim,
    bool keepdim);

// Tangent of logsumexp: the exp(self - result)-weighted sum of self's tangent.
at::Tensor logsumexp_tangent(
    const at::Tensor& self_t,
    const at::Tensor& self_p,
    at::OptionalIntArrayRef dim,
    bool keepdim,
    const at::Tensor& result);

// Tangent of prod along `dim` (absent: all elements); exact with zeros.
at::Tensor prod_tangent(
    const at::Tensor& self_t,
    const at::Tensor& self_p,
    std::optional<int64_t> dim,
    bool keepdim,
    const at::Tensor& result);

// Tangent of a full max/min/median: the mean tangent of the elements equal to
// the result (NaN matches NaN).
at::Tensor evenly_read_tangent(
    const at::Tensor& self_t, const at::Tensor& self_p, const at::Tensor& result);

// Tangent of renorm: self_t * factor + self * d factor.
at::Tensor renorm_tangent(
    const at::Tensor& self_t,
    const at::Tensor& self_p,
    const c10::Scalar& p,
    int64_t dim,
    const c10::Scalar& maxnorm);

// Tangent of cumprod or logcumsumexp (`kind`; anything but "cumprod" means
// logcumsumexp) along `dim`; exact with zeros.
at::Tensor scan_tangent(
    const at::Tensor& self_t,
    const at::Tensor& self_p,
    int64_t dim,
    c10::string_view kind);

// Tangent of sort/topk/cummax-like ops: the elements of `t` at `indices`.
at::Tensor gather_selected(
    const at::Tensor& t, int64_t dim, const at::Tensor& indices);

}  // namespace dualgen::formulas
