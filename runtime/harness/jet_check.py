"""`jetcheck`: Taylor mode (dualgen.jet) against dualgen's nested levels.

Along a curve x(t) = x0 + x1 t + ... + xK t^K / K! through the inputs (x1..xK
random, none zero, on every floating or complex input that requires grad), the
K derivatives of each output of `func` from `dualgen.jet` must equal those that
K nested forward levels give along t (d/dt of d/dt ... of func(x(t)) at t = 0).
The nested levels use the same first-order kernels, which gradcheck proves; what
this proves is the Taylor machinery: each op's rule read off its formula (linear,
Leibniz's, or the formula in series arithmetic), and the integration order by
order. (tests/coverage/opinfo_jet.py sweeps every OpInfo the same way.)
"""

from __future__ import annotations

import math

import torch

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
    from ..taylor import jet

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
        out = func(*filled)
        return tuple(out) if isinstance(out, (tuple, list)) else (out,)

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
            if not torch.allclose(a[k - 1], b.to(a[k - 1].dtype), rtol, atol):
                error = float((a[k - 1] - b).abs().max())
                failures.append(
                    f"output {n}, derivative {k}: jet and nested levels differ by "
                    f"{error:.3g}"
                )
    if failures and raise_exception:
        raise GradcheckError("Jet mismatch: " + "; ".join(failures))
    return not failures


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
