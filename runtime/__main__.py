"""`python -m dualgen`: the `dualgen` command, for environments without its script
(or to pick the interpreter explicitly)."""

import sys

from dualgen.tools.cli import main

if __name__ == "__main__":
    sys.exit(main())
