#include "dualgen/formulas/recurrent.h"

namespace dualgen::formulas {}  // namespace dualgen::formulas
