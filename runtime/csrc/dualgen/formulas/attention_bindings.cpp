#include "dualgen/formulas/bindings.h"
#include "dualgen/formulas/attention.h"

namespace dualgen::formulas {

void bind_attention(pybind11::module_& m) { (void)m; }

}  // namespace dualgen::formulas
