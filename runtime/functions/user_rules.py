"""User-registered jvp rules for Functions, and the Functions run as plain code
while a level is active (torch.utils.checkpoint's reentrant one)."""

from __future__ import annotations

from collections.abc import Callable

import torch

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


def transparent() -> dict[type, Callable]:
    from torch.utils.checkpoint import CheckpointFunction

    return {CheckpointFunction: _checkpoint_transparent}
