"""Source-to-source AD: derivatives as torch.fx programs of aten ops.

`jvp(f, primals, tangents)` traces `f` at the example values into an aten graph
without mutation (`trace.py`), then traces the program that runs each node's op
on the primals and its generated JVP kernel on the tangents present (`jvp.py`).
`vjp(f, primals)` traces the program that runs `f` and then, walking the graph in
reverse, the generated VJP kernels of the nodes a cotangent reaches (`vjp.py`).
Names and comments make both read like the formulas (`readable.py`). The
programs hold aten ops only: they run without dualgen, and `torch.compile` takes
them.

    gm = dualgen.fx.jvp(f, (x, y), (x_t, None))
    outputs, output_tangents = gm(x, y, x_t, None)   # as torch.func.jvp
    gm = dualgen.fx.vjp(f, (x, y))
    outputs, (x_grad, y_grad) = gm(x, y, cotangents)  # as torch.func.vjp
    gm = dualgen.fx.jet(f, (x,), order=3)      # Taylor mode (jet.py)
    outputs, series = gm(x, [[x1, x2, x3]])    # as dualgen.jet
"""

from __future__ import annotations

from .graph import NoRule
from .jet import jet
from .jvp import jvp
from .vjp import vjp

__all__ = ["NoRule", "jet", "jvp", "vjp"]
