"""torch.autograd.Function subclasses built from their formulas: a test states a
Function's forward, jvp and backward as plain functions (or lambdas), and
`function` makes the class of staticmethods around them.

    Twice = function("Twice", lambda ctx, x: 2 * x, jvp=lambda ctx, t: 2 * t)

The style is the one torch reads from the class: `forward(ctx, ...)` saving what
it needs itself, or, where `setup_context` is given, `forward(...)` without ctx and
`setup_context(ctx, inputs, output)` (`keep_nothing` where nothing is kept).
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable

from torch.autograd import Function


def keep_nothing(ctx, inputs, output) -> None:
    """A setup_context that keeps nothing (the jvp and backward need no context)."""


def function(
    name: str,
    forward: Callable,
    *,
    setup_context: Callable | None = None,
    jvp: Callable | None = None,
    backward: Callable | None = None,
    vjp: Callable | None = None,
    doc: str | None = None,
    base: type = Function,
    **attributes,
) -> type:
    """The Function subclass `name` of `base` with these staticmethods (those not
    given are inherited, as for a class that does not define them) and class
    `attributes` (`generate_vmap_rule=True`, a `vmap` staticmethod, ...)."""
    methods = {
        "forward": forward,
        "setup_context": setup_context,
        "jvp": jvp,
        "backward": backward,
        "vjp": vjp,
    }
    namespace = {
        key: value if isinstance(value, staticmethod) else staticmethod(value)
        for key, value in methods.items()
        if value is not None
    }
    # Where a class statement would have put it: the calling test's module.
    module = sys._getframe(1).f_globals.get("__name__", __name__)
    namespace.update(__module__=module, __qualname__=name, __doc__=doc)
    namespace.update(attributes)
    # Through the metaclass (FunctionMeta), as a class statement does.
    return types.new_class(name, (base,), exec_body=lambda ns: ns.update(namespace))


def product_forward(materialize: bool) -> Callable:
    """forward(ctx, x, y) of x * y keeping x and y for the jvp, under
    `ctx.set_materialize_grads(materialize)` (False: None for a missing tangent)."""

    def forward(ctx, x, y):
        ctx.set_materialize_grads(materialize)
        ctx.save_for_forward(x, y)
        return x * y

    return forward
