#include "dualgen/formulas/fused_nn.h"

namespace dualgen::formulas {}  // namespace dualgen::formulas
