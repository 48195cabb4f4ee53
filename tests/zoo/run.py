"""Run one zoo case: native forward AD, torch.func.jvp and dualgen, with verdicts.

A case (see `cases/`) builds, from a `Ctx`, a function and its arguments; the
floating arguments get tangents (all but those wrapped in `Const`). Each run
rebuilds the case under the same seed, so modules with buffers (batch norm's
running statistics) and random ops (dropout) see the same state and draws under
every engine, and central finite differences see one function.

    python -m tests.zoo.run CASE [CASE ...]     # prints each case's verdicts
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

import torch
import torch.autograd.forward_ad as native_fwAD
from torch.utils._pytree import tree_flatten

import dualgen.forward_ad as dual_fwAD

SEED = 0
FD_EPS = 1e-6
# Tangents against native (same dtype) and against finite differences (float64
# reference; a float32 run is compared with it at float32 accuracy).
TOL = {
    torch.float32: {"rtol": 1e-4, "atol": 1e-4},
    torch.float64: {"rtol": 1e-7, "atol": 1e-7},
}
FD_TOL = {
    torch.float32: {"rtol": 1e-3, "atol": 1e-3},
    torch.float64: {"rtol": 1e-5, "atol": 1e-5},
}


class Const:
    """An argument that gets no tangent (a target, an index, a mask)."""

    def __init__(self, value):
        self.value = value


class Ctx:
    """What a case builds its inputs with: values are drawn in float64 from the
    seeded global generator and cast to the case's dtype, so a float32 case is the
    float64 one rounded (finite differences in float64 are its reference)."""

    def __init__(self, dtype: torch.dtype, channels_last: bool = False):
        self.dtype = dtype
        self.channels_last = channels_last

    def _fmt(self, t):
        if self.channels_last and t.dim() in (4, 5):
            fmt = torch.channels_last if t.dim() == 4 else torch.channels_last_3d
            t = t.contiguous(memory_format=fmt)
        return t

    def randn(self, *shape, scale=1.0):
        return self._fmt(
            (torch.randn(*shape, dtype=torch.float64) * scale).to(self.dtype)
        )

    def rand(self, *shape, low=0.0, high=1.0):
        t = torch.rand(*shape, dtype=torch.float64) * (high - low) + low
        return self._fmt(t.to(self.dtype))

    def tensor(self, data):
        return torch.tensor(data, dtype=torch.float64).to(self.dtype)

    def uniform_(self, t, low, high):
        """Fill a buffer in place (a module's running statistics) with values drawn
        in float64."""
        with torch.no_grad():
            t.copy_(torch.rand(t.shape, dtype=torch.float64) * (high - low) + low)
        return t

    def spd(self, *batch, n):
        a = torch.randn(*batch, n, n, dtype=torch.float64)
        return (a @ a.mT + n * torch.eye(n, dtype=torch.float64)).to(self.dtype)

    def mod(self, module, train=True):
        module = module.to(self.dtype).train(train)
        if self.channels_last:
            with torch.no_grad():
                for p in module.parameters():
                    if p.dim() in (4, 5):
                        p.data = self._fmt(p.data)
        return module

    def with_params(self, module, *inputs, call=None):
        """The module as a function of its inputs and then its parameters (every
        parameter gets a tangent); `call(module_fn, *inputs)` if given."""
        names = [n for n, _ in module.named_parameters()]
        params = [p.detach() for _, p in module.named_parameters()]
        n_in = len(inputs)

        def f(*args):
            ins, ps = args[:n_in], args[n_in:]
            state = dict(zip(names, ps))

            def fm(*a, **kw):
                return torch.func.functional_call(module, state, a, kw)

            return call(fm, *ins) if call else fm(*ins)

        return f, (*inputs, *params)


@dataclass
class Result:
    """A tangent computation: the outputs' primals and tangents, or the error."""

    primals: list | None = None
    tangents: list | None = None
    error: str | None = None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:160]


def _float_outputs(out):
    leaves, _ = tree_flatten(out)
    return [
        t
        for t in leaves
        if isinstance(t, torch.Tensor) and (t.is_floating_point() or t.is_complex())
    ]


def _build(case, dtype):
    torch.manual_seed(SEED)
    ctx = Ctx(dtype, channels_last=case.channels_last)
    f, args = case.fn(ctx)
    args = list(args)
    gen = torch.Generator().manual_seed(SEED + 1)
    tangents = []
    for a in args:
        if isinstance(a, torch.Tensor) and (a.is_floating_point() or a.is_complex()):
            t64 = torch.randn(a.shape, generator=gen, dtype=torch.float64)
            if a.is_complex():
                t64 = torch.complex(
                    t64, torch.randn(a.shape, generator=gen, dtype=torch.float64)
                )
            tangents.append(torch.empty_like(a).copy_(t64))
        else:
            tangents.append(None)
    plain = [a.value if isinstance(a, Const) else a for a in args]
    return f, plain, tangents


def _with_seed(f, *args):
    # The draws of random ops (dropout) after the build are the same in every run.
    torch.manual_seed(SEED + 2)
    return f(*args)


def run_fwad(case, dtype, api) -> Result:
    f, args, tangents = _build(case, dtype)
    try:
        with api.dual_level():
            duals = [
                api.make_dual(a, t) if t is not None else a
                for a, t in zip(args, tangents)
            ]
            out = _with_seed(f, *duals)
            outs = _float_outputs(out)
            unpacked = [api.unpack_dual(o) for o in outs]
            primals = [u.primal.detach().clone() for u in unpacked]
            tans = [
                (
                    u.tangent.detach().clone()
                    if u.tangent is not None
                    else torch.zeros_like(u.primal)
                )
                for u in unpacked
            ]
        return Result(primals, tans)
    except Exception as exc:  # noqa: BLE001 - a verdict, not a crash
        return Result(error=_first_line(exc))


def run_func_jvp(case, dtype) -> Result:
    f, args, tangents = _build(case, dtype)
    idx = [i for i, t in enumerate(tangents) if t is not None]

    def g(*xs):
        full = list(args)
        for i, x in zip(idx, xs):
            full[i] = x
        return tuple(_float_outputs(_with_seed(f, *full)))

    try:
        out, tans = torch.func.jvp(
            g, tuple(args[i] for i in idx), tuple(tangents[i] for i in idx)
        )
        return Result([o.detach() for o in out], [t.detach() for t in tans])
    except Exception as exc:  # noqa: BLE001
        return Result(error=_first_line(exc))


def run_fd(case) -> Result:
    """Central finite differences in float64 along the same tangents."""
    vals = []
    for sign in (1.0, -1.0):
        f, args, tangents = _build(case, torch.float64)
        moved = [
            a + sign * FD_EPS * t if t is not None else a
            for a, t in zip(args, tangents)
        ]
        try:
            with torch.no_grad():
                vals.append([o.detach() for o in _float_outputs(_with_seed(f, *moved))])
        except Exception as exc:  # noqa: BLE001
            return Result(error=_first_line(exc))
    f, args, _ = _build(case, torch.float64)
    with torch.no_grad():
        primals = _float_outputs(_with_seed(f, *args))
    tans = [(p - m) / (2 * FD_EPS) for p, m in zip(*vals)]
    return Result(primals, tans)


def run_plain(case, dtype) -> Result:
    """The outputs without tangents (the primals every engine should give)."""
    f, args, _ = _build(case, dtype)
    try:
        with torch.no_grad():
            return Result([o.detach() for o in _float_outputs(_with_seed(f, *args))])
    except Exception as exc:  # noqa: BLE001
        return Result(error=_first_line(exc))


def _primals_differ(res: Result, plain: Result, tol) -> str | None:
    if plain.error is not None:
        return None
    if len(res.primals) != len(plain.primals):
        return f"{len(res.primals)} float outputs, plain call has {len(plain.primals)}"
    for i, (a, b) in enumerate(zip(res.primals, plain.primals)):
        try:
            torch.testing.assert_close(
                a, b, rtol=tol["rtol"], atol=tol["atol"], equal_nan=True
            )
        except AssertionError:
            return f"output {i}: primal differs from the plain call (max abs error {(a - b).abs().max().item():.3g})"
    return None


def _compare(res: Result, ref: Result, tol) -> str | None:
    """None when res's tangents match ref's, else why not."""
    if len(res.tangents) != len(ref.tangents):
        return f"{len(res.tangents)} float outputs, reference has {len(ref.tangents)}"
    for i, (a, b) in enumerate(zip(res.tangents, ref.tangents)):
        if a.shape != b.shape:
            return f"output {i}: tangent shape {tuple(a.shape)} != {tuple(b.shape)}"
        b = b.to(a.dtype)
        scale = max(1.0, b.abs().max().item()) if b.numel() else 1.0
        try:
            torch.testing.assert_close(
                a, b, rtol=tol["rtol"], atol=tol["atol"] * scale, equal_nan=True
            )
        except AssertionError:
            err = (a - b).abs().max().item()
            return f"output {i}: max abs error {err:.3g} (scale {scale:.3g})"
    return None


@dataclass
class Verdict:
    case: str
    dtype: torch.dtype
    native: str  # "ok" or the error's first line (torch.autograd.forward_ad)
    func_jvp: str  # "ok" or the error's first line (torch.func.jvp)
    dualgen: str  # "ok" or why not
    reference: str  # what dualgen was compared with
    notes: list = field(default_factory=list)

    @property
    def dualgen_ok(self) -> bool:
        return self.dualgen == "ok"


def run_case(case, dtype, fd=None) -> Verdict:
    """The verdicts of one case in one dtype. `fd`: the finite differences, if
    already computed (they are float64 whatever the dtype)."""
    nat = run_fwad(case, dtype, native_fwAD)
    jvp = run_func_jvp(case, dtype)
    dg = run_fwad(case, dtype, dual_fwAD)
    if case.no_fd:
        fd = Result(error=f"not a reference: {case.no_fd}")
    elif fd is None:
        fd = run_fd(case)
    v = Verdict(
        case.name,
        dtype,
        native="ok" if nat.error is None else nat.error,
        func_jvp="ok" if jvp.error is None else jvp.error,
        dualgen="ok",
        reference="",
    )
    # Native results whose primals are not the plain call's (torch.func draws other
    # random numbers) or that finite differences contradict (float64) are not
    # references.
    plain = run_plain(case, dtype)
    natives = []
    for label, res in (("forward_ad", nat), ("func.jvp", jvp)):
        if res.error is not None:
            continue
        why = _primals_differ(res, plain, TOL[dtype])
        if why is not None:
            v.notes.append(f"native {label} not a reference: {why}")
            continue
        if fd.error is None and dtype == torch.float64:
            why = _compare(res, fd, FD_TOL[dtype])
            if why is not None:
                v.notes.append(
                    f"native {label} disagrees with finite differences: {why}"
                )
                continue
        natives.append((label, res))
    if dg.error is not None:
        v.dualgen = dg.error
        return v
    why = _primals_differ(dg, plain, TOL[dtype])
    if why is not None:
        v.dualgen = why
        return v
    refs = []
    for label, res in natives:
        why = _compare(dg, res, TOL[dtype])
        refs.append(label)
        if why is not None:
            v.dualgen = f"differs from native {label}: {why}"
            v.reference = label
            return v
    if fd.error is None:
        why = _compare(dg, fd, FD_TOL[dtype])
        refs.append("finite differences")
        if why is not None:
            v.dualgen = f"differs from finite differences: {why}"
    elif not case.no_fd:
        v.notes.append(f"finite differences failed: {fd.error}")
    v.reference = ", ".join(refs)
    if not refs:
        v.dualgen = "no reference"
    return v


def main(argv):
    from .cases import CASES

    names = argv or list(CASES)
    for name in names:
        case = CASES[name]
        fd = None if case.no_fd else run_fd(case)
        for dt in case.dtypes:
            v = run_case(case, dt, fd)
            print(
                f"{name} [{str(dt)[6:]}]: native={v.native} | func.jvp={v.func_jvp} | dualgen={v.dualgen} ({v.reference})"
            )
            for n in v.notes:
                print("   note:", n)


if __name__ == "__main__":
    # Run as tests.zoo.run (not __main__), so cases and runner share `Const`.
    from tests.zoo.run import main as _main

    _main(sys.argv[1:])
