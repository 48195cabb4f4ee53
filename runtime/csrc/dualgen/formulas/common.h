// What every C++ twin of a dualgen.formulas helper, and every generated C++
// kernel, shares. How each Python value is represented in C++ is one table, in
// tools/cpp_types.py (kernels' declarations, twins' parameters, bindings); the
// convention it rests on: None where a tensor may be is an undefined at::Tensor
// (`present(t)` is false), an absent list of tangents an empty TensorList.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dualgen/temporaries.h"  // operators on temporaries write into them

namespace dualgen {

using TensorList = std::vector<at::Tensor>;

inline bool present(const at::Tensor& t) { return t.defined(); }
inline bool present(const TensorList& ts) { return !ts.empty(); }
template <class T>
bool present(const std::optional<T>& v) { return v.has_value(); }
inline bool present(const at::OptionalIntArrayRef& v) { return v.has_value(); }

// A possibly undefined tensor as ATen's `Tensor?` argument.
inline std::optional<at::Tensor> opt(const at::Tensor& t) {
  return t.defined() ? std::optional<at::Tensor>(t) : std::nullopt;
}

}  // namespace dualgen
