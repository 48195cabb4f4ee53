#include "dualgen/formulas/bindings.h"
#include "dualgen/formulas/reductions.h"

#include <pybind11/complex.h>
#include <pybind11/stl.h>

namespace dualgen::formulas {

namespace py = pybind11;

namespace {

// A Python reduction `dim`: None, one int or a sequence of ints, kept alive
// here while the twin reads it as an at::OptionalIntArrayRef.
struct Dims {
  std::optional<std::vector<int64_t>> dims;

  explicit Dims(const py::object& dim) {
    if (dim.is_none()) {
      return;
    }
    if (py::isinstance<py::int_>(dim)) {
      dims = std::vector<int64_t>{dim.cast<int64_t>()};
    } else {
      dims = dim.cast<std::vector<int64_t>>();
    }
  }

  at::OptionalIntArrayRef ref() const {
    return dims.has_value() ? at::OptionalIntArrayRef(*dims)
                            : at::OptionalIntArrayRef();
  }
};

using binding::to_optional_scalar;
using binding::to_scalar;

}  // namespace

void bind_reductions(py::module_& m) {
  m.def(
      "amax_tangent",
      [](const at::Tensor& self_t, const at::Tensor& self_p,
         const at::Tensor& result, const py::object& dim, bool keepdim) {
        // An int or None is aminmax's `int? dim`: the std::optional overload.
        if (dim.is_none() || py::isinstance<py::int_>(dim)) {
          return amax_tangent(
              self_t, self_p, result, dim.cast<std::optional<int64_t>>(),
              keepdim);
        }
        return amax_tangent(self_t, self_p, result, Dims(dim).ref(), keepdim);
      },
      py::arg("self_t"), py::arg("self_p"), py::arg("result"), py::arg("dim"),
      py::arg("keepdim"));
  m.def(
      "gather_reduced", &gather_reduced, py::arg("t"), py::arg("dim"),
      py::arg("indices"), py::arg("keepdim"));
  m.def(
      "vector_norm_tangent",
      [](const at::Tensor& self_t, const at::Tensor& self_p,
         const py::object& ord, const py::object& dim, bool keepdim,
         const at::Tensor& result) {
        return vector_norm_tangent(
            self_t, self_p, to_optional_scalar(ord), Dims(dim).ref(), keepdim,
            result);
      },
      py::arg("self_t"), py::arg("self_p"), py::arg("ord"), py::arg("dim"),
      py::arg("keepdim"), py::arg("result"));
  m.def(
      "foreach_norm_tangents",
      [](const std::vector<at::Tensor>& self_t,
         const std::vector<at::Tensor>& self_p, const py::object& ord,
         const std::vector<at::Tensor>& result) {
        return foreach_norm_tangents(
            self_t, self_p, to_optional_scalar(ord), result);
      },
      py::arg("self_t"), py::arg("self_p"), py::arg("ord"), py::arg("result"));
  m.def(
      "dist_tangent",
      [](const at::Tensor& t, const at::Tensor& self_p,
         const at::Tensor& other_p, const py::object& p,
         const at::Tensor& result) {
        return dist_tangent(t, self_p, other_p, to_optional_scalar(p), result);
      },
      py::arg("t"), py::arg("self_p"),
      py::arg("other_p"), py::arg("p"), py::arg("result"));
  m.def(
      "var_tangent",
      [](const at::Tensor& self_t, const at::Tensor& self_p,
         const py::object& dim, const py::object& correction, bool keepdim,
         const at::Tensor& result) {
        return var_tangent(
            self_t, self_p, Dims(dim).ref(), to_optional_scalar(correction),
            keepdim, result);
      },
      py::arg("self_t"), py::arg("self_p"), py::arg("dim"),
      py::arg("correction"), py::arg("keepdim"), py::arg("result"));
  m.def(
      "std_tangent",
      [](const at::Tensor& self_t, const at::Tensor& self_p,
         const py::object& dim, const py::object& correction, bool keepdim,
         const at::Tensor& result) {
        return std_tangent(
            self_t, self_p, Dims(dim).ref(), to_optional_scalar(correction),
            keepdim, result);
      },
      py::arg("self_t"), py::arg("self_p"), py::arg("dim"),
      py::arg("correction"), py::arg("keepdim"), py::arg("result"));
  m.def(
      "mean_tangent",
      [](const at::Tensor& self_t, const at::Tensor& self_p,
         const py::object& dim, bool keepdim) {
        return mean_tangent(self_t, self_p, Dims(dim).ref(), keepdim);
      },
      py::arg("self_t"), py::arg("self_p"), py::arg("dim"),
      py::arg("keepdim"));
  m.def(
      "logsumexp_tangent",
      [](const at::Tensor& self_t, const at::Tensor& self_p,
         const py::object& dim, bool keepdim, const at::Tensor& result) {
        return logsumexp_tangent(
            self_t, self_p, Dims(dim).ref(), keepdim, result);
      },
      py::arg("self_t"), py::arg("self_p"), py::arg("dim"), py::arg("keepdim"),
      py::arg("result"));
  m.def(
      "prod_tangent", &prod_tangent, py::arg("self_t"), py::arg("self_p"),
      py::arg("dim"), py::arg("keepdim"), py::arg("result"));
  m.def(
      "evenly_read_tangent", &evenly_read_tangent, py::arg("self_t"),
      py::arg("self_p"), py::arg("result"));
  m.def(
      "renorm_tangent",
      [](const at::Tensor& self_t, const at::Tensor& self_p,
         const py::object& p, int64_t dim, const py::object& maxnorm) {
        return renorm_tangent(
            self_t, self_p, to_scalar(p), dim, to_scalar(maxnorm));
      },
      py::arg("self_t"), py::arg("self_p"),
      py::arg("p"), py::arg("dim"), py::arg("maxnorm"));
  m.def(
      "scan_tangent",
      [](const at::Tensor& self_t, const at::Tensor& self_p, int64_t dim,
         const std::string& kind) {
        return scan_tangent(self_t, self_p, dim, kind);
      },
      py::arg("self_t"), py::arg("self_p"), py::arg("dim"), py::arg("kind"));
  m.def(
      "gather_selected", &gather_selected, py::arg("t"), py::arg("dim"),
      py::arg("indices"));
}

}  // namespace dualgen::formulas
