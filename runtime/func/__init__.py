"""`dualgen.func`: the forward transforms of `torch.func`, computed by dualgen.

    import dualgen.func as dfunc

    value, jvp_out = dfunc.jvp(f, (x,), (v,))
    jacobian = dfunc.jacfwd(f, argnums=(0, 1))(x, y)
    hess = dfunc.hessian(loss)(w)
    output, jvp_fn = dfunc.linearize(f, x)
    gradient, hvp_out = dfunc.hvp(loss, (w,), (v,))

The signatures, checks (exception types and messages), pytree handling and output
structures are torch.func's; the derivatives come from `dualgen.forward_ad`, one
dual level per transform, so transforms compose by nesting levels
(`jacfwd(jacfwd(f))`, jvp inside jvp, the hessian of a function that calls jvp).
`torch.func.functional_call` gives them an `nn.Module`'s parameters as a dict.

Under `torch.vmap` they work on the physical tensors (`vmap.py`); inside
`torch.func.grad` and the other differentiating torch.func transforms they raise,
saying to use `torch.autograd.grad` on their results instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch.utils._pytree import tree_flatten

from . import checks
from .jacobian import gradient, hessian, jacfwd
from .jvp import ArgNums, jvp_with_argnums

__all__ = ["hessian", "hvp", "jacfwd", "jvp", "linearize"]


def jvp(
    func: Callable[..., Any],
    primals: Any,
    tangents: Any,
    *,
    strict: bool = False,
    has_aux: bool = False,
) -> tuple[Any, ...]:
    """torch.func.jvp by dualgen: `(func(*primals), J @ tangents)`, and aux with
    `has_aux`, in the structure of func's output.

    `primals` is a tuple of pytrees of tensors, `tangents` the same structure.
    An output that does not depend on the primals gets a zero tangent, or with
    `strict=True` torch.func's error. (dualgen leaves a few tangents absent where
    native materialises zeros, docs/differences.md, and strict raises there.)
    """
    return jvp_with_argnums(func, primals, tangents, strict=strict, has_aux=has_aux)


def linearize(
    func: Callable[..., Any], *primals: Any
) -> tuple[Any, Callable[..., Any]]:
    """torch.func.linearize by dualgen: `(func(*primals), jvp_fn)`, where
    `jvp_fn(*tangents)` is the JVP at `primals`, with torch.func's checks of the
    tangents' structure, shapes, devices and dtypes.

    torch traces func once into a graph; dualgen evaluates func once here, and
    again under a dual level on each jvp_fn call. The primals are held, not
    copied: changing them in place changes later JVPs.
    """
    output = func(*primals)
    flat_primals, primals_spec = tree_flatten(primals)
    metas = tuple(checks.PrimalMeta.of(p) for p in flat_primals)

    def jvp_fn(*tangents: Any) -> Any:
        flat_tangents, tangents_spec = tree_flatten(tangents)
        checks.check_linearize_tangents(
            flat_tangents, tangents_spec, primals_spec, metas
        )
        return jvp_with_argnums(func, primals, tangents, api="linearize")[1]

    return output, jvp_fn


def hvp(
    func: Callable[..., Any], primals: Any, tangents: Any, *, argnums: ArgNums = 0
) -> tuple[Any, Any]:
    """The Hessian-vector product of a scalar function, forward over reverse:
    `(gradient, hvp)` as `torch.func.jvp(torch.func.grad(func, argnums), primals,
    tangents)` returns them (the gradient with respect to `primals[argnums]`,
    tangents for every primal).

    The gradient is torch.autograd.grad's inside a dual level, which gives its
    tangent; it has torch.func.grad's checks (func returns a scalar tensor).
    """
    return jvp_with_argnums(gradient(func, argnums), primals, tangents, api="hvp")
