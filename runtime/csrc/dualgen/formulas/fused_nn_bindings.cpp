#include "dualgen/formulas/bindings.h"
#include "dualgen/formulas/fused_nn.h"

namespace dualgen::formulas {

void bind_fused_nn(pybind11::module_& m) { (void)m; }

}  // namespace dualgen::formulas
