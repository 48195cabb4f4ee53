"""`jet(fun, primals, series)`: Taylor mode, with JAX's `jax.experimental.jet`
conventions. `series[i]` is `[x1, ..., xK]` (None for a zero one), the
derivatives at t = 0 of the curve x(t) = x0 + x1 t + x2 t²/2! + ... through `primals[i]` = x0; the result is
fun's output at x0 and, per output tensor, the K derivatives of fun(x(t)).
"""

from __future__ import annotations

import math

import torch
from torch.utils._pytree import tree_flatten, tree_unflatten

from .. import torch_features
from ..functions import hooks  # (a module: functions import this package too)
from ..taylor_series import JetTensor, callers_dispatch_keys, coefficient


def jet(fun, primals, series):
    """(fun(*primals), derivatives of fun along the curve, as `series` gives them)."""
    torch_features.require("taylor")
    primals, series = tuple(primals), tuple(series)
    order = _order(primals, series)
    inputs = [
        JetTensor([x0] + [_normalised(x, k) for k, x in enumerate(terms, start=1)])
        for x0, terms in zip(primals, series)
    ]
    hooks.install("series")  # custom Functions apply their jvp to series
    try:
        with callers_dispatch_keys():
            out = fun(*inputs)
    finally:
        hooks.uninstall("series")
    leaves, spec = tree_flatten(out)
    values, derivatives = [], []
    for leaf in leaves:
        if not isinstance(leaf, torch.Tensor):
            raise TypeError(
                f"jet: fun returned a {type(leaf).__name__}; it must return tensors"
            )
        values.append(coefficient(leaf, 0))
        derivatives.append([_derivative(leaf, k) for k in range(1, order + 1)])
    return tree_unflatten(values, spec), tree_unflatten(derivatives, spec)


def _normalised(x, k: int):
    return x if x is None or k == 1 else x / math.factorial(k)


def _derivative(leaf: torch.Tensor, k: int) -> torch.Tensor:
    c = coefficient(leaf, k) if isinstance(leaf, JetTensor) else None
    if c is None:  # fun's output does not depend on the inputs
        return torch.zeros_like(coefficient(leaf, 0))
    return c * math.factorial(k)


def _order(primals, series) -> int:
    if len(primals) != len(series):
        raise ValueError(
            f"jet: {len(primals)} primals but {len(series)} series; give one list "
            "of derivatives per primal"
        )
    if not primals:
        raise ValueError("jet: give at least one primal")
    orders = {len(s) for s in series}
    if len(orders) != 1:
        raise ValueError(
            f"jet: every series must have the same order, got lengths {sorted(orders)}"
        )
    (order,) = orders
    if order < 1:
        raise ValueError("jet: a series needs at least one derivative (order >= 1)")
    for i, (x0, terms) in enumerate(zip(primals, series)):
        if not isinstance(x0, torch.Tensor):
            raise TypeError(f"jet: primals[{i}] is not a tensor")
        if not (x0.is_floating_point() or x0.is_complex()):
            raise TypeError(f"jet: primals[{i}] has dtype {x0.dtype}, not a float")
        for k, x in enumerate(terms, start=1):
            if x is None:
                continue  # a zero coefficient, which costs nothing
            if not isinstance(x, torch.Tensor):
                raise TypeError(f"jet: series[{i}][{k - 1}] is not a tensor or None")
            if x.shape != x0.shape or x.dtype != x0.dtype:
                raise ValueError(
                    f"jet: series[{i}][{k - 1}] has shape {tuple(x.shape)} and dtype "
                    f"{x.dtype}; primals[{i}] has {tuple(x0.shape)} and {x0.dtype}"
                )
    return order
