"""The jvp derived from backward, for a Function without one: backward is linear
in its grad arguments, so differentiating it in them gives J t."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.autograd.function import _SingleLevelFunction, once_differentiable

from ..tangents import is_differentiable_dtype
from .attach import marked_non_differentiable
from .call import NEEDS_INPUT_GRAD, RAW, Call, Record


def user_backward(cls: type) -> Callable | None:
    """backward, or vjp where that is the one overridden (as BackwardCFunction)."""
    if cls.vjp is not _SingleLevelFunction.vjp:
        return cls.vjp
    if cls.backward is not _SingleLevelFunction.backward:
        return cls.backward
    return None


# Every @once_differentiable wrapper runs this code (functools.wraps copies the
# name and qualname of the function it wraps, not its code).
ONCE_DIFFERENTIABLE_CODE = once_differentiable(lambda ctx: None).__code__


def _how_to_fix(name: str) -> str:
    return (
        f"Define a jvp staticmethod on {name}, or register one with "
        f"@dualgen.register_jvp({name}) (def rule(ctx, *input_tangents) -> output "
        f"tangents)."
    )


def derived_jvp(call: Call, ctx, record: Record, tangents: list, outs: tuple) -> tuple:
    """J t for a Function without jvp, from its backward: backward(ctx, *v) is
    linear in v, so the gradient of <backward(ctx, *v), t> with respect to v is
    J t (complex too: autograd's conjugate convention makes it the JVP)."""
    name = call.name
    nondiff = record.non_differentiable or ()
    if not any(
        isinstance(o, torch.Tensor)
        and is_differentiable_dtype(o)
        and not marked_non_differentiable(o, nondiff, call.inputs)
        for o in outs
    ):
        return (None,) * len(outs)  # no output has a tangent to derive
    backward = user_backward(call.cls)
    if backward is None:
        raise NotImplementedError(
            f"{name} has neither a jvp nor a backward: dualgen cannot compute its "
            f"forward derivative. {_how_to_fix(name)}"
        )
    if getattr(backward, "__code__", None) is ONCE_DIFFERENTIABLE_CODE:
        # @once_differentiable says backward has no derivative in what it saved;
        # it is still linear in its grads, and the function it wraps, run with
        # grad mode on, is differentiated in them (torch.distributions' _Dirichlet).
        # A body that hides its grads from autograd is refused below.
        backward = getattr(backward, "__wrapped__", None) or backward
    if getattr(backward, "__code__", None) is ONCE_DIFFERENTIABLE_CODE:
        raise NotImplementedError(
            f"{name} has no jvp, and its backward is @once_differentiable, so dualgen "
            f"cannot derive one from it (that differentiates backward). "
            f"{_how_to_fix(name)}"
        )
    with torch.enable_grad():
        seeds = [_seed(o, nondiff, call.inputs) for o in outs]
        grads = _call_backward(call, ctx, record, backward, seeds, tangents)
        pairs = [(g, t) for g, t in zip(grads, tangents) if t is not None]
        for k, (g, _) in enumerate(pairs):
            if g is not None and not (isinstance(g, torch.Tensor) and g.requires_grad):
                raise RuntimeError(
                    f"{name} has no jvp, and dualgen cannot derive one from its "
                    f"backward: the gradient it returns for an input with a tangent "
                    f"does not depend differentiably on grad_outputs (computed under "
                    f"no_grad, detached, or outside PyTorch; return None for inputs "
                    f"without gradient). {_how_to_fix(name)}"
                )
        pairs = [(g, t) for g, t in pairs if g is not None]
        wanted = [s for s in seeds if isinstance(s, torch.Tensor) and s.requires_grad]
        if not pairs or not wanted:
            # backward gives no gradient to the inputs with tangents: J t = 0
            return tuple(_zeros_if_wanted(s) for s in seeds)
        try:
            found = torch.autograd.grad(
                [g for g, _ in pairs],
                wanted,
                grad_outputs=[t for _, t in pairs],
                create_graph=call.grad_enabled,
                allow_unused=True,
            )
        except RuntimeError as error:
            raise RuntimeError(
                f"{name} has no jvp, and dualgen could not derive one from its "
                f"backward ({error}). {_how_to_fix(name)}"
            ) from error
    if all(f is None for f in found):
        raise RuntimeError(
            f"{name} has no jvp, and dualgen cannot derive one from its backward: "
            f"its gradients do not depend on grad_outputs. {_how_to_fix(name)}"
        )
    # An output that no gradient reaches gets zeros, as a jvp given native's zero
    # tangents for the inputs without tangent returns.
    by_seed = dict(zip(map(id, wanted), found))
    return tuple(
        by_seed.get(id(s)) if by_seed.get(id(s)) is not None else _zeros_if_wanted(s)
        for s in seeds
    )


def _zeros_if_wanted(seed):
    """Zeros for a differentiable output's seed; None for the others."""
    if isinstance(seed, torch.Tensor) and seed.requires_grad:
        return torch.zeros_like(seed, requires_grad=False)
    return None


def _seed(out, nondiff: tuple, inputs: tuple):
    """The dummy grad_output of an output: zeros requiring grad where it is
    differentiable, plain zeros where not (native materializes those), None for a
    non-tensor output."""
    if not isinstance(out, torch.Tensor):
        return None
    seed = torch.zeros_like(out)
    if is_differentiable_dtype(out) and not marked_non_differentiable(
        out, nondiff, inputs
    ):
        seed.requires_grad_()
    return seed


def _call_backward(
    call: Call, ctx, record: Record, backward, seeds: list, tangents: list
) -> tuple:
    """backward(ctx, *seeds), with `ctx.saved_tensors` what save_for_backward got
    and `ctx.needs_input_grad` true for the inputs that have tangents."""
    name = call.name
    needs = NEEDS_INPUT_GRAD.__get__(ctx)
    wanted = tuple(bool(n) or t is not None for n, t in zip(needs, tangents))
    saved = RAW["saved_for_forward"]
    # Copies: backward may write into its grads, which leaves may not.
    grad_args = [s.clone() if s is not None and s.requires_grad else s for s in seeds]
    NEEDS_INPUT_GRAD.__set__(ctx, wanted)
    saved.__set__(ctx, record.to_save or ())
    if getattr(call.cls, "boxed_grads_call", False):
        grad_args = [list(grad_args)]  # as BackwardCFunction.apply calls it
    try:
        grads = backward(ctx, *grad_args)
    except Exception as error:
        raise RuntimeError(
            f"{name} has no jvp, and dualgen could not derive one from its backward, "
            f"which raised {type(error).__name__}: {error}. {_how_to_fix(name)}"
        ) from error
    finally:
        saved.__set__(ctx, None)
        NEEDS_INPUT_GRAD.__set__(ctx, needs)
    grads = grads if isinstance(grads, tuple) else (grads,)
    n = len(tangents)
    if len(grads) < n or any(g is not None for g in grads[n:]):
        raise RuntimeError(
            f"function {name}Backward returned an incorrect number of gradients "
            f"(expected {n}, got {len(grads)}), so dualgen cannot derive a jvp for "
            f"{name} from it. {_how_to_fix(name)}"
        )
    return grads[:n]
