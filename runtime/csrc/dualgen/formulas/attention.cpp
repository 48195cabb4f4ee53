#include "dualgen/formulas/attention.h"

namespace dualgen::formulas {}  // namespace dualgen::formulas
