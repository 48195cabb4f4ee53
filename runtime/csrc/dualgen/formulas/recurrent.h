// C++ twins of dualgen.formulas.recurrent (same names, same meaning).
#pragma once

#include "dualgen/formulas/common.h"

namespace dualgen::formulas {}  // namespace dualgen::formulas
