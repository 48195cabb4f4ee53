#include "dualgen/formulas/bindings.h"
#include "dualgen/formulas/quantization.h"

namespace dualgen::formulas {

void bind_quantization(pybind11::module_& m) {
  m.def(
      "fake_quantize_learnable_per_tensor_tangent",
      &fake_quantize_learnable_per_tensor_tangent);
  m.def(
      "fake_quantize_learnable_per_channel_tangent",
      &fake_quantize_learnable_per_channel_tangent);
}

}  // namespace dualgen::formulas
