"""`python -m dualgen.tools.cli`: the `dualgen` command."""

import sys

from . import main

sys.exit(main())
