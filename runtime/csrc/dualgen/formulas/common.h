// What every C++ twin of a dualgen.formulas helper, and every generated C++
// kernel, shares: how Python's values are represented in C++.
//
//   Python                         C++
//   Tensor                         at::Tensor
//   None where a Tensor may be     an undefined at::Tensor (`present(t)` is false)
//   list of tangents (Tensor[])    std::vector<at::Tensor>; absent: empty
//   Tensor?[] (index's indices)    c10::List<std::optional<at::Tensor>>
//   int / SymInt                   int64_t
//   int[] / SymInt[]               std::vector<int64_t> (at::IntArrayRef in parameters)
//   int[]? / int?                  at::OptionalIntArrayRef / std::optional<int64_t>
//   float / bool                   double / bool
//   Scalar / Scalar?               c10::Scalar / std::optional<c10::Scalar>
//   str / str?                     std::string (c10::string_view in parameters)
//   ScalarType?                    std::optional<at::ScalarType>
//   a tuple of tensors returned    std::vector<at::Tensor> (undefined = None)
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

// A possibly undefined tensor as ATen's `Tensor?` argument.
inline std::optional<at::Tensor> opt(const at::Tensor& t) {
  return t.defined() ? std::optional<at::Tensor>(t) : std::nullopt;
}

}  // namespace dualgen
