"""User-registered jvp rules for Functions, and the Functions run as plain code
while a level is active (torch.utils.checkpoint's reentrant one, flex attention's
autograd Function)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from .custom_ops import closed_over

RULES: dict[type, Callable] = {}


def register_function_jvp(cls: type) -> Callable[[Callable], Callable]:
    """`dualgen.register_jvp(MyFunction)`: a decorator registering `rule(ctx,
    *tangents)` as MyFunction's jvp for dualgen (it takes precedence over the
    class's own `jvp`, and over the one derived from `backward`). It is called as
    native calls `jvp`: with the ctx (`ctx.saved_tensors` is what was given to
    `save_for_forward`) and one tangent per input (zeros for a tensor input
    without one, unless `ctx.set_materialize_grads(False)`; None for the others)."""
    if not (isinstance(cls, type) and issubclass(cls, torch.autograd.Function)):
        raise TypeError(f"expected a torch.autograd.Function subclass, got {cls!r}")

    def decorate(rule: Callable) -> Callable:
        RULES[cls] = rule
        return rule

    return decorate


def unregister_function_jvp(cls: type) -> None:
    """Remove a rule registered with `register_function_jvp`."""
    RULES.pop(cls, None)


def _checkpoint_transparent(run_function, preserve_rng_state, *args):
    """torch.utils.checkpoint's reentrant Function has no jvp, and its backward is
    not differentiable in its grads (native raises). Its forward is just
    `run_function(*args)`: while a level is active, run that directly (without the
    memory saving), so the mode differentiates it (closure tensors with tangents
    too) and reverse mode still works."""
    return run_function(*args)


def _flex_attention_transparent(*args):
    from ..dispatch.higher_order import flex_attention_transparent

    return flex_attention_transparent(*args)


def _index_transparent(x, indices):
    """flex attention's ModIndex (score_mod's `bias[h, q, k]` in eager) is
    aten.index; its vmapped twin's jvp cannot take a list input's tangent."""
    return torch.ops.aten.index(x, indices)


# Functions run as plain code while a level is active, by (module, name): found
# without importing their modules (flex attention's are imported late, if at all).
_TRANSPARENT = {
    ("torch.utils.checkpoint", "CheckpointFunction"): _checkpoint_transparent,
    (
        "torch._higher_order_ops.flex_attention",
        "FlexAttentionAutogradOp",
    ): _flex_attention_transparent,
    ("torch._dynamo._trace_wrapped_higher_order_op", "ModIndex"): _index_transparent,
}
# The module of functorch's vmapped twins of Functions (`Vmapped<Name>`).
_VMAPPED = "torch._functorch.autograd_function"


def transparent_for(cls: type) -> Callable | None:
    """The plain code `cls.apply` runs as while a level is active, or None. A
    Function vmap made of a transparent one runs its forward (the original's,
    under vmap) as plain code too."""
    found = _TRANSPARENT.get((cls.__module__, cls.__qualname__))
    if found is None and cls.__module__ == _VMAPPED:
        original = closed_over(cls.forward, "autograd_function")
        if original is not None and transparent_for(original):
            return cls.forward
    return found
