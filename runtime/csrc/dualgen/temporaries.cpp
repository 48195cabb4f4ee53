// When a formula's temporary may take an operator in place (temporaries.h).
#include "dualgen/temporaries.h"

#include <ATen/core/grad_mode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

namespace dualgen::temporaries {
namespace {

bool reuse_on = true;

// A plain tensor's functionalities: dense memory, autograd, autocast. Anything
// else (a subclass's or a mode's Python key, functorch's or vmap's wrappers,
// functionalisation, lazy conj, neg or zeros, sparse, nested) is not plain.
constexpr c10::DispatchKeySet plain_keys =
    c10::DispatchKeySet(c10::DispatchKey::Dense) |
    c10::autograd_dispatch_keyset_with_ADInplaceOrView | c10::autocast_dispatch_keyset;

bool plain(const at::Tensor& t) {
  return (t.key_set() - plain_keys).highestFunctionalityKey() == c10::DispatchKey::Undefined;
}

bool graph_sees(const at::Tensor& t) { return at::GradMode::is_enabled() && t.requires_grad(); }

// A Python mode on (a level tracing the formula, a user's mode): it sees the
// operator, and an in-place one means something else to it.
bool mode_on() {
  return c10::impl::tls_is_dispatch_key_included(c10::DispatchKey::Python) &&
         !c10::impl::tls_is_dispatch_key_excluded(c10::DispatchKey::Python);
}

// `temp` alone owns its tensor and its memory, which is dense and not empty (an
// empty result's strides are ATen's choice per operator: `t * 2` and `t + u`
// lay an empty `t` out differently, and view_as_complex reads them), and writing
// it records nothing.
bool alone(const at::Tensor& temp) {
  if (!reuse_on || !temp.defined() || temp.use_count() != 1) return false;
  if (temp.numel() == 0) return false;
  if (!plain(temp) || !temp.has_storage()) return false;
  if (temp.layout() != at::kStrided || temp.storage().use_count() != 1) return false;
  if (temp.scalar_type() == at::kBool || graph_sees(temp) || mode_on()) return false;
  return temp.is_non_overlapping_and_dense();
}

// The out-of-place result would have `temp`'s sizes and strides: `other` has
// them too, or is a number's 0-dim tensor, or broadcasts into `temp` from the
// right (then `temp`, the first operand, lays the result out).
bool same_layout(const at::Tensor& temp, const at::Tensor& other, bool first) {
  if (other.sizes() == temp.sizes()) {
    return other.strides() == temp.strides() || temp.numel() <= 1;
  }
  if (other.dim() == 0) return true;
  if (!first || other.dim() > temp.dim()) return false;
  const int64_t skipped = temp.dim() - other.dim();
  for (int64_t d = 0; d < other.dim(); ++d) {
    const int64_t size = other.size(d);
    if (size != 1 && size != temp.size(skipped + d)) return false;
  }
  return true;
}

}  // namespace

void set_reuse(bool on) { reuse_on = on; }
bool reuse() { return reuse_on; }

bool takes(const at::Tensor& temp, Op op, const at::Tensor& other, bool first) {
  if (!alone(temp) || !other.defined() || graph_sees(other)) return false;
  if (!plain(other)) return false;
  // The commuted product of complex numbers adds its two cross terms in the
  // other order, which a contracted multiply-add may round differently.
  if (!first && temp.is_complex()) return false;
  if (op == Op::div && !(temp.is_floating_point() || temp.is_complex())) return false;
  const bool same_device =
      other.device() == temp.device() || (other.dim() == 0 && other.is_cpu());
  if (!same_device || !same_layout(temp, other, first)) return false;
  if (other.scalar_type() == temp.scalar_type()) return true;
  return other.dim() == 0 && at::result_type(temp, other) == temp.scalar_type();
}

bool takes(const at::Tensor& temp, Op op, const c10::Scalar& other) {
  // (a bool number: ATen refuses to subtract it, and `rsub` comes here as `add`)
  if (!alone(temp) || other.isBoolean()) return false;
  if (temp.is_complex()) return true;
  if (temp.is_floating_point()) return !other.isComplex();
  // integers: with an integer, except true division
  return op != Op::div && other.isIntegral(false);
}

bool negatable(const at::Tensor& temp) { return alone(temp); }

}  // namespace dualgen::temporaries
