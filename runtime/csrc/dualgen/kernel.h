// The C++ kernel interface: what generated/cpp/*.cpp include.
//
// A JVP kernel takes the op's arguments in schema order (`args`), the tangents
// of its differentiable inputs (`tangents`: None, a Tensor, or a list with None
// where absent) and the op's outputs, and returns one value per output: its
// tangent, or None. Values are IValues, as the dispatcher's boxed stack holds
// them; `unpack<T>` reads one as the C++ type `common.h` gives its schema type.
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>
#include <c10/util/MathConstants.h>

#include <array>
#include <cmath>
#include <limits>
#include <string>
#include <unordered_map>
#include <vector>

#include "dualgen/formulas/common.h"
#include "formulas.h"  // generated: every C++ twin of a helper

namespace dualgen {

using Values = std::vector<c10::IValue>;
using Results = std::vector<c10::IValue>;
using JvpKernel = Results (*)(const Values& args, const Values& tangents,
                              const Values& outputs);

// Python's None where a formula passes it: an undefined tensor, or nullopt.
struct NoneType {
  operator at::Tensor() const { return at::Tensor(); }
  template <class T>
  operator std::optional<T>() const { return std::nullopt; }
  operator at::OptionalIntArrayRef() const { return std::nullopt; }
  operator at::OptionalSymIntArrayRef() const { return std::nullopt; }
};
inline constexpr NoneType None{};

// An `int[]?` argument: Python's list or None, passed on as ATen's optional
// list views (which point into this object, alive for the whole kernel).
struct OptionalInts {
  std::optional<std::vector<int64_t>> values;
  operator at::OptionalIntArrayRef() const {
    return values ? at::OptionalIntArrayRef(*values) : at::OptionalIntArrayRef();
  }
  bool has_value() const { return values.has_value(); }
};
inline bool present(const OptionalInts& v) { return v.has_value(); }

// -- reading arguments ------------------------------------------------------

template <class T>
struct Unpack;

template <class T>
T unpack(const c10::IValue& v) { return Unpack<T>::get(v); }

template <>
struct Unpack<at::Tensor> {
  static at::Tensor get(const c10::IValue& v) {
    return v.isNone() ? at::Tensor() : v.toTensor();
  }
};
template <>
struct Unpack<TensorList> {
  // A tangent list: absent (empty) when None; entries None where absent.
  static TensorList get(const c10::IValue& v) {
    TensorList out;
    if (v.isNone()) return out;
    for (const c10::IValue& item : v.toListRef()) {
      out.push_back(item.isNone() ? at::Tensor() : item.toTensor());
    }
    return out;
  }
};
template <>
struct Unpack<c10::List<std::optional<at::Tensor>>> {
  static c10::List<std::optional<at::Tensor>> get(const c10::IValue& v) {
    c10::List<std::optional<at::Tensor>> out;
    for (const c10::IValue& item : v.toListRef()) {
      out.push_back(item.isNone() ? std::optional<at::Tensor>()
                                  : std::optional<at::Tensor>(item.toTensor()));
    }
    return out;
  }
};
template <>
struct Unpack<int64_t> {
  static int64_t get(const c10::IValue& v) {
    return v.isSymInt() ? v.toSymInt().expect_int() : v.toInt();
  }
};
// A list argument (int[], float[], bool[], Scalar[] as `_foreach_pow.ScalarList`
// has it), element by element; ATen takes it as an ArrayRef.
template <class T>
struct Unpack<std::vector<T>> {
  static std::vector<T> get(const c10::IValue& v) {
    std::vector<T> out;
    for (const c10::IValue& item : v.toListRef()) {
      out.push_back(Unpack<T>::get(item));
    }
    return out;
  }
};
// The types one IValue accessor gives.
#define DUALGEN_UNPACK_BY(type, accessor)                             \
  template <>                                                         \
  struct Unpack<type> {                                               \
    static type get(const c10::IValue& v) { return v.accessor(); }    \
  };
DUALGEN_UNPACK_BY(double, toDouble)
DUALGEN_UNPACK_BY(bool, toBool)
DUALGEN_UNPACK_BY(c10::Scalar, toScalar)
DUALGEN_UNPACK_BY(std::string, toStringRef)
DUALGEN_UNPACK_BY(at::ScalarType, toScalarType)
DUALGEN_UNPACK_BY(at::Layout, toLayout)
DUALGEN_UNPACK_BY(at::Device, toDevice)
DUALGEN_UNPACK_BY(at::MemoryFormat, toMemoryFormat)
DUALGEN_UNPACK_BY(at::Generator, toGenerator)
#undef DUALGEN_UNPACK_BY
template <>
struct Unpack<OptionalInts> {
  static OptionalInts get(const c10::IValue& v) {
    if (v.isNone()) return OptionalInts{};
    return OptionalInts{Unpack<std::vector<int64_t>>::get(v)};
  }
};
template <class T>
struct Unpack<std::optional<T>> {
  static std::optional<T> get(const c10::IValue& v) {
    if (v.isNone()) return std::nullopt;
    return Unpack<T>::get(v);
  }
};

// -- returning tangents -----------------------------------------------------

inline c10::IValue value(NoneType) { return c10::IValue(); }
inline c10::IValue value(const at::Tensor& t) {
  return t.defined() ? c10::IValue(t) : c10::IValue();
}
inline c10::IValue value(const TensorList& ts) {
  c10::List<std::optional<at::Tensor>> out;
  for (const at::Tensor& t : ts) {
    out.push_back(t.defined() ? std::optional<at::Tensor>(t) : std::nullopt);
  }
  return c10::IValue(out);
}

// -- small conversions the printer writes ------------------------------------

// ints as ATen's SymInt[] parameters take them: owns the SymInts for the full
// expression of the call.
struct SymInts {
  std::vector<c10::SymInt> values;
  operator c10::SymIntArrayRef() const { return values; }
};
inline SymInts symint_list(at::IntArrayRef ints) {
  return SymInts{std::vector<c10::SymInt>(ints.begin(), ints.end())};
}
inline SymInts symint_list(const std::vector<int64_t>& ints) {
  return symint_list(at::IntArrayRef(ints));
}
// ... and SymInt[]? parameters (None stays None)
struct OptionalSymInts {
  std::optional<std::vector<c10::SymInt>> values;
  operator at::OptionalSymIntArrayRef() const {
    return values ? at::OptionalSymIntArrayRef(*values) : at::OptionalSymIntArrayRef();
  }
};
inline OptionalSymInts optional_symint_list(const OptionalInts& ints) {
  if (!ints.values) return OptionalSymInts{};
  return OptionalSymInts{symint_list(at::IntArrayRef(*ints.values)).values};
}
inline OptionalSymInts optional_symint_list(at::IntArrayRef ints) {
  return OptionalSymInts{symint_list(ints).values};
}

// ATen's in-place functions take `Tensor&`; a formula may hand them a
// temporary (alive until the end of the statement) or a const handle (the
// tensor it names is what the op updates either way).
inline at::Tensor& lvalue(const at::Tensor& t) { return const_cast<at::Tensor&>(t); }

// Python arithmetic on Scalar arguments (`1 - weight`): complex if either is,
// else integral if both are, else double.
#define DUALGEN_SCALAR_OPERATOR(op)                                            \
  inline c10::Scalar operator op(const c10::Scalar& a, const c10::Scalar& b) { \
    if (a.isComplex() || b.isComplex()) {                                      \
      return a.toComplexDouble() op b.toComplexDouble();                       \
    }                                                                          \
    if (a.isIntegral(false) && b.isIntegral(false)) {                          \
      return a.toLong() op b.toLong();                                         \
    }                                                                          \
    return a.toDouble() op b.toDouble();                                       \
  }
DUALGEN_SCALAR_OPERATOR(+)
DUALGEN_SCALAR_OPERATOR(-)
DUALGEN_SCALAR_OPERATOR(*)
#undef DUALGEN_SCALAR_OPERATOR
inline c10::Scalar operator/(const c10::Scalar& a, const c10::Scalar& b) {
  if (a.isComplex() || b.isComplex()) return a.toComplexDouble() / b.toComplexDouble();
  return a.toDouble() / b.toDouble();  // Python's true division
}

// Python's `sizes[i]`, negative i counting from the end
inline int64_t at_index(at::IntArrayRef values, int64_t i) {
  const auto n = static_cast<int64_t>(values.size());
  TORCH_CHECK(-n <= i && i < n, "index ", i, " is out of range for ", n, " values");
  return values[i < 0 ? i + n : i];
}

// -- the registry -----------------------------------------------------------

class Registry {
 public:
  void add(const char* op, JvpKernel kernel) { kernels_[op] = kernel; }
  JvpKernel find(const std::string& op) const {
    auto it = kernels_.find(op);
    return it == kernels_.end() ? nullptr : it->second;
  }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& item : kernels_) out.push_back(item.first);
    return out;
  }

 private:
  std::unordered_map<std::string, JvpKernel> kernels_;
};

namespace jvp {
void register_generated(Registry& registry);
}  // namespace jvp

}  // namespace dualgen
