#include "dualgen/formulas/bindings.h"
#include "dualgen/formulas/recurrent.h"

namespace dualgen::formulas {

void bind_recurrent(pybind11::module_& m) { (void)m; }

}  // namespace dualgen::formulas
