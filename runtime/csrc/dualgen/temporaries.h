// Arithmetic that writes into a formula's temporaries.
//
// In `self_t * -self_p.sin()` ATen allocates `sin`'s result, then another
// tensor for its negation and a third for the product; native forward AD runs
// the same three. At large sizes every fresh buffer is memory the caches have
// never seen (measured, 2M floats, 2 threads: that formula 1.67 ms; the
// negation and the product written into `sin`'s result, 1.40 ms). The operators
// below take a temporary (an rvalue tensor, the result of a call in the
// formula) and, where no one else can see it and the answer is bit for bit what
// the out-of-place operator gives, compute into it: `sin(x).neg_().mul_(t)`.
// Everywhere else they are ATen's operators. The generated code reads as the
// formula does; C++ picks these overloads for rvalue operands.
//
// Bit for bit: the in-place op runs the same ATen kernel on the same values in
// the same dtype, and the temporary's layout is the layout the out-of-place
// result would get. `a + b` and `a * b` equal `b + a` and `b * a` exactly
// (IEEE, and ATen's complex product), so a temporary on the right is used too.
#pragma once

#include <ATen/ATen.h>

#include <utility>

namespace dualgen {
namespace temporaries {

enum class Op { add, sub, mul, div };

// On by default; off, every operator is ATen's (tests compare the two).
void set_reuse(bool on);
bool reuse();

// Whether `temp`, an rvalue, may take `op` with `other` in place: it owns its
// tensor and storage alone, is a plain dense tensor no autograd graph or
// Python mode sees, and the out-of-place result would have its dtype, sizes
// and strides.
// `first`: `temp` is the left operand (the layout of a result is its first
// operand's where operands differ).
bool takes(const at::Tensor& temp, Op op, const at::Tensor& other, bool first);
bool takes(const at::Tensor& temp, Op op, const c10::Scalar& other);
bool negatable(const at::Tensor& temp);

}  // namespace temporaries

// (Each returns the temporary moved out, so the next operator finds it alone
// again: a copy would leave the first handle alive to the end of the statement.)
#define DUALGEN_TEMPORARY_OPERATOR(symbol, name, commutes)                         \
  inline at::Tensor operator symbol(at::Tensor&& a, const at::Tensor& b) {         \
    if (temporaries::takes(a, temporaries::Op::name, b, true)) {                   \
      a.name##_(b);                                                                \
      return std::move(a);                                                         \
    }                                                                              \
    return at::name(a, b);                                                         \
  }                                                                                \
  inline at::Tensor operator symbol(const at::Tensor& a, at::Tensor&& b) {         \
    if (commutes && temporaries::takes(b, temporaries::Op::name, a, false)) {      \
      b.name##_(a);                                                                \
      return std::move(b);                                                         \
    }                                                                              \
    return at::name(a, b);                                                         \
  }                                                                                \
  /* Two temporaries: the left one first, else the right one as above. */        \
  inline at::Tensor operator symbol(at::Tensor&& a, at::Tensor&& b) {              \
    if (temporaries::takes(a, temporaries::Op::name, b, true)) {                   \
      a.name##_(b);                                                                \
      return std::move(a);                                                         \
    }                                                                              \
    return std::as_const(a) symbol std::move(b);                                   \
  }                                                                                \
  inline at::Tensor operator symbol(at::Tensor&& a, const c10::Scalar& b) {        \
    if (temporaries::takes(a, temporaries::Op::name, b)) {                         \
      a.name##_(b);                                                                \
      return std::move(a);                                                         \
    }                                                                              \
    return at::name(a, b);                                                         \
  }
DUALGEN_TEMPORARY_OPERATOR(+, add, true)
DUALGEN_TEMPORARY_OPERATOR(-, sub, false)
DUALGEN_TEMPORARY_OPERATOR(*, mul, true)
DUALGEN_TEMPORARY_OPERATOR(/, div, false)
#undef DUALGEN_TEMPORARY_OPERATOR

// A Scalar on the left: `2 * temp` and `1 + temp` are `temp * 2` and `temp + 1`
// (ATen computes them so). The printer writes Python's `1 - x` as `rsub(x, 1)`:
// for a temporary `-temp + 1` (IEEE subtraction is the sum with the negation).
inline at::Tensor operator*(const c10::Scalar& a, at::Tensor&& b) {
  return std::move(b) * a;
}
inline at::Tensor operator+(const c10::Scalar& a, at::Tensor&& b) {
  return std::move(b) + a;
}
inline at::Tensor rsub(const at::Tensor& a, const c10::Scalar& b) { return at::rsub(a, b); }
inline at::Tensor rsub(at::Tensor&& a, const c10::Scalar& b) {
  if (temporaries::negatable(a) && temporaries::takes(a, temporaries::Op::add, b)) {
    a.neg_().add_(b);
    return std::move(a);
  }
  return at::rsub(a, b);
}

inline at::Tensor operator-(at::Tensor&& a) {
  if (temporaries::negatable(a)) {
    a.neg_();
    return std::move(a);
  }
  return a.neg();
}

}  // namespace dualgen
