"""`jetcheck`: Taylor mode (dualgen.jet) against dualgen's nested levels.

Along a curve x(t) = x0 + x1 t + ... + xK t^K / K! through the inputs (x1..xK
random, none zero, on every floating or complex input that requires grad), the
K derivatives of each output of `func` from `dualgen.jet` must equal those that
K nested forward levels give along t (d/dt of d/dt ... of func(x(t)) at t = 0);
where they differ, the jet passes if finite differences of func along the curve
agree with it (nested levels read some values as constants at outer levels).
The nested levels use the same first-order kernels, which gradcheck proves; what
this proves is the Taylor machinery: each op's rule read off its formula (linear,
Leibniz's, or the formula in series arithmetic), and the integration order by
order. (tests/coverage/opinfo_jet.py sweeps every OpInfo the same way.)
"""

from __future__ import annotations

import math

import torch
import torch.utils._pytree as pytree

from .compare import GradcheckError


def jetcheck(
    func,
    inputs,
    *,
    order: int = 3,
    atol: float = 1e-7,
    rtol: float = 1e-6,
    seed: int = 0,
    raise_exception: bool = True,
) -> bool:
    """True if dualgen.jet of `func` at `inputs` agrees with nested levels to
    `order`; else raises GradcheckError (returns False if not `raise_exception`)."""
    from ..func import jvp
    from ..taylor_mode import jet  # as users call it

    inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    moving = [
        i
        for i, x in enumerate(inputs)
        if isinstance(x, torch.Tensor)
        and x.requires_grad
        and (x.is_floating_point() or x.is_complex())
    ]
    if not moving:
        return True
    generator = torch.Generator().manual_seed(seed)
    primals = [inputs[i].detach() for i in moving]
    series = [[_random_like(x, generator) for _ in range(order)] for x in primals]

    def along(*values):
        filled = list(inputs)
        for i, v in zip(moving, values):
            filled[i] = v
        # The tensors among the outputs, lists flattened (None: an output the
        # op did not compute).
        return tuple(
            t for t in pytree.tree_leaves(func(*filled)) if isinstance(t, torch.Tensor)
        )

    _, got = jet(along, primals, series)

    def curve(t):
        return along(
            *(
                x + sum(c * t**k / math.factorial(k) for k, c in enumerate(s, 1))
                for x, s in zip(primals, series)
            )
        )

    t0 = torch.zeros((), dtype=torch.float64)
    derivative = curve
    failures = []
    for k in range(1, order + 1):
        derivative = _next(derivative, jvp)
        expected = derivative(t0)
        for n, (a, b) in enumerate(zip(got, expected)):
            a = a[k - 1]
            if torch.allclose(a, b.to(a.dtype), rtol, atol, equal_nan=True):
                continue
            if _differences_agree(curve, n, k, a):
                # Nested levels read some value as a constant at outer levels
                # (statistics recomputed outside any mode, as `dualgen validate`
                # recomputes a norm's): finite differences, which share nothing
                # with either, side with the jet.
                continue
            error = float((a - b).abs().max())
            failures.append(
                f"output {n}, derivative {k}: jet and nested levels differ by "
                f"{error:.3g}, and finite differences side with neither"
            )
    if failures and raise_exception:
        raise GradcheckError("Jet mismatch: " + "; ".join(failures))
    return not failures


# Central differences of order k at step h: {offset: weight} / h^k (error O(h^2)).
_STENCILS = {
    1: {1: 0.5, -1: -0.5},
    2: {1: 1.0, 0: -2.0, -1: 1.0},
    3: {2: 0.5, 1: -1.0, -1: 1.0, -2: -0.5},
    4: {2: 1.0, 1: -4.0, 0: 6.0, -1: -4.0, -2: 1.0},
}


def _differences_agree(curve, output: int, k: int, got: torch.Tensor) -> bool:
    """Whether finite differences of the curve's output `output` give `got` as
    its k-th derivative, at one of a few steps."""
    stencil = _STENCILS.get(k)
    if stencil is None:
        return False
    double = got.dtype in (torch.float64, torch.complex128)
    # Single precision (ops torch runs in float32 only): larger steps, and a
    # tolerance for its rounding, still far below the differences it judges.
    steps, tolerance = (
        ((1e-2, 3e-3, 1e-3), 1e-4) if double else ((3e-2, 1e-2, 5e-3), 5e-2)
    )
    scale = float(got.abs().max()) + 1.0
    for h in steps:
        with torch.no_grad():
            estimate = (
                sum(
                    w * curve(torch.tensor(s * h, dtype=torch.float64))[output]
                    for s, w in stencil.items()
                )
                / h**k
            )
        if float((estimate - got).abs().max()) <= tolerance * scale:
            return True
    return False


def _next(fn, jvp):
    """t -> d/dt fn(t), by one more forward level."""

    def derivative(t):
        return jvp(fn, (t,), (torch.ones_like(t),))[1]

    return derivative


def _random_like(x: torch.Tensor, generator) -> torch.Tensor:
    if x.is_complex():
        real = torch.randn(x.shape, dtype=x.real.dtype, generator=generator)
        imag = torch.randn(x.shape, dtype=x.real.dtype, generator=generator)
        return torch.complex(real, imag).to(x.device)
    return torch.randn(x.shape, dtype=x.dtype, generator=generator).to(x.device)
