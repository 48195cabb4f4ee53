"""The nested OpInfo sweep: second and third derivatives of every OpInfo that
supports forward AD, judged by finite differences (torch.func's nested jvp reads
saved statistics and LU factors as constants at outer levels, as dualgen's levels
did: it cannot be the reference). docs/opinfo_nested.md has the details.

    python tests/coverage/opinfo_nested.py [--ops NAME ...] [--modes MODE ...]
        [--samples N] [--spec PATH] [--known] [--report PATH]

Modes, per (op, dtype) and the first --samples samples (seeded random directions
u, v, w on every floating and complex input; random cotangent c):

- order2: two dualgen levels, u inner, v outer: the outer tangent of the inner
  tangent, D2 f[u, v]. Oracle: central differences along v of dualgen's first-order
  JVP along u (checked against native by opinfo_sweep.py); confirmed by the mixed
  second difference of f itself. The nested first-order tangents must equal the
  single-level ones.
- order3: three levels: D3 f[u, v, w]. Oracle: central differences along w of
  dualgen's order-2 result, which must agree with second differences of the
  first-order JVP as well (an order-2 bug would otherwise vouch for itself).
- fwd_over_rev (float64): the tangent along v of torch.autograd.grad's gradient
  from dual inputs, H_c v. Oracle: central differences along v of native's VJP;
  confirmed by <c, D2 f[u, v]> against the result's projection on u.
- rev_over_fwd (float64): the gradient with respect to the primal inputs of
  <J u, c>, H_c u. Oracle: central differences along u of native's VJP; confirmed
  by central differences along v of <J u, c> against the projection on v.

Each sample is `pass` (dualgen agrees with the oracle at some step; order3: with
the confirmation too), `wrong` (dualgen is off the oracle at every step, by more
than MARGINAL, while oracle and confirmation agree), `unjudged` (the oracles
disagree: kinks, ill-conditioned points), or `error` (dualgen raises where the
first-order reference runs). An (op, dtype, mode) is wrong or error if any sample
is, pass if a sample passes and none is wrong, unjudged otherwise, n/a without a
sample. Ops that draw random numbers are left out (RANDOM); outputs without a
first-order tangent are not compared, inputs that differences do not see as the
JVP does are held constant (nested_oracles.py).
"""

from __future__ import annotations

import argparse
import re
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import torch
from nested_oracles import (
    Problem,
    Verdict,
    central,
    directions,
    forward_over_reverse,
    hold_non_smooth_inputs,
    inner,
    judge,
    jvp,
    keep_differentiable_outputs,
    mixed,
    nested2,
    reverse_over_forward,
    second_order,
    third_order,
    vjp,
)
from opinfo_sweep import (
    _differs,
    _random_like,
    dtypes_for,
    forward_ad_ops,
    full_name,
    one_thread,
    run_all,
    write_table,
)

MODES = ("order2", "order3", "fwd_over_rev", "rev_over_fwd")
SAMPLES = 3  # per (op, dtype, mode): keeps the suite to minutes (docs/opinfo_nested.md)

# Ops whose values depend on random draws (OpInfo has no flag for it; seeded
# wrappers make some repeatable, but their derivatives are not what is tested).
RANDOM = re.compile(
    r"dropout|rrelu|fractional_max_pool|bernoulli|multinomial|_lowrank$"
    r"|(^|\.)(normal|poisson|rand\w*|uniform|cauchy|exponential|geometric)$"
)


class NoReference(Exception):
    """The first-order reference cannot run on this sample: nothing to judge."""


def _reference(fn, *args):
    try:
        return fn(*args)
    except Exception as exc:  # whatever it raises: no reference
        raise NoReference(f"{type(exc).__name__}: {exc}") from exc


def _cotangents(p, generator):
    """A random cotangent per output that requires grad, zeros for the others."""
    leaves = [x.detach().clone().requires_grad_() for x in p.at()]
    return [
        (
            _random_like(o, generator)
            if o.requires_grad
            else torch.zeros_like(o.detach())
        )
        for o in _reference(p, leaves)
    ]


def _order2(p, g) -> Verdict:
    us, vs = directions(p, g), directions(p, g)
    value = _reference(p, p.at())
    ju, jv = _reference(jvp, p, p.at(), us), _reference(jvp, p, p.at(), vs)
    got = nested2(p, p.at(), us, vs)
    for k, parts in enumerate(got):
        for what, a, b in zip(
            ("primal", "J u", "J v"), parts, (value[k], ju[k], jv[k])
        ):
            problem = _differs(a, b)
            if problem:
                detail = f"output {k}: nested {what} differs from one level: {problem}"
                return Verdict("wrong", float("inf"), detail)
    return judge(
        [r[3] for r in got],
        lambda h: central(lambda s: jvp(p, p.at((s, vs)), us), h),
        lambda h: mixed(lambda s, t: p(p.at((s, us), (t, vs))), h),
    )


def _order3(p, g) -> Verdict:
    us, vs, ws = directions(p, g), directions(p, g), directions(p, g)
    _reference(jvp, p, p.at(), us)
    _reference(second_order, p, p.at(), us, vs)  # order 2's errors are its own
    got = third_order(p, p.at(), us, vs, ws)
    return judge(
        got,
        lambda h: central(lambda s: second_order(p, p.at((s, ws)), us, vs), h),
        lambda h: mixed(lambda s, t: jvp(p, p.at((s, vs), (t, ws)), us), h),
        confirm=True,
    )


def _free(p, per_input):
    """The entries of the inputs not held constant: a held input's gradient is
    not what the differences along the others judge (cov's float32 aweights)."""
    return [x for x, held in zip(per_input, p.held) if not held]


def _fwd_over_rev(p, g) -> Verdict:
    us, vs = directions(p, g), directions(p, g)
    cots = _cotangents(p, g)
    _reference(vjp, p, p.at(), cots)
    got = _free(p, forward_over_reverse(p, p.at(), vs, cots))
    return judge(
        got,
        lambda h: _free(p, central(lambda s: vjp(p, p.at((s, vs)), cots), h)),
        lambda h: inner(cots, mixed(lambda s, t: p(p.at((s, us), (t, vs))), h)),
        project=lambda xs: inner(_free(p, us), xs),
    )


def _rev_over_fwd(p, g) -> Verdict:
    us, vs = directions(p, g), directions(p, g)
    cots = _cotangents(p, g)
    _reference(vjp, p, p.at(), cots)
    _reference(jvp, p, p.at(), us)
    got = _free(p, reverse_over_forward(p, p.at(), us, cots))
    return judge(
        got,
        lambda h: _free(p, central(lambda s: vjp(p, p.at((s, us)), cots), h)),
        lambda h: inner(cots, central(lambda s: jvp(p, p.at((s, vs)), us), h)),
        project=lambda xs: inner(_free(p, vs), xs),
    )


_RUNS = {
    "order2": _order2,
    "order3": _order3,
    "fwd_over_rev": _fwd_over_rev,
    "rev_over_fwd": _rev_over_fwd,
}


@dataclass
class NestedResult:
    name: str
    dtype: str
    mode: str
    key: tuple = ()
    status: str = "n/a"  # pass, wrong, error, unjudged, n/a
    samples: int = 0  # judged: passed or wrong
    unjudged: int = 0
    held: int = 0  # inputs held constant (hold_non_smooth_inputs), all samples
    error: float = 0.0  # worst relative error among wrong samples
    failures: list = field(default_factory=list)  # (kind, detail)
    notes: list = field(default_factory=list)  # why samples went unjudged

    @property
    def detail(self) -> str:
        first = (self.failures[0][1] if self.failures else "") or (
            self.notes[0] if self.notes else ""
        )
        return first.splitlines()[0][:300] if first else ""


def nested_ops():
    return [op for op in forward_ad_ops() if not RANDOM.search(op.name)]


def mode_dtypes(op, mode) -> list[torch.dtype]:
    """Forward modes: float64 and complex128; the reverse ones need
    forward-over-reverse support and real inputs (float64), as opinfo_sweep --hvp."""
    dtypes = dtypes_for(op)
    if mode in ("fwd_over_rev", "rev_over_fwd"):
        ok = op.supports_fwgrad_bwgrad
        return [d for d in dtypes if d == torch.float64] if ok else []
    return dtypes


def _sample_inputs(op, dtype):
    """op.sample_inputs, made on a fresh thread: torch's sample tracking walks the
    caller's stack with inspect.stack (reading every frame's source), 0.2 s a call
    under pytest's deep stack, a third of the suite's time; a new thread's stack
    is a few frames. The samples are the same."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(op.sample_inputs, "cpu", dtype, requires_grad=False).result()


def _judgeable(p) -> bool:
    """Inputs with elements, and a finite output element (no empty samples, no
    NaN-valued ones as __rpow__'s negative base)."""
    return any(x.numel() for x in p.inputs) and any(
        torch.isfinite(o).any() for o in p(p.at())
    )


def _deterministic(p) -> bool:
    a, b = p(p.at()), p(p.at())
    return all(
        x.shape == y.shape and torch.equal(x.nan_to_num(0), y.nan_to_num(0))
        for x, y in zip(a, b)
    )


def check(op, dtype, mode, samples=SAMPLES) -> NestedResult:
    # One thread: the same bits on every call (the differences read 1e-10 changes).
    with one_thread():
        return _check(op, dtype, mode, samples)


def _check(op, dtype, mode, samples) -> NestedResult:
    short = str(dtype).removeprefix("torch.")
    result = NestedResult(full_name(op), short, mode)
    result.key = (op.name, op.variant_test_name, short, mode)
    generator = torch.Generator().manual_seed(0)
    torch.manual_seed(0)  # OpInfo samples draw from the global generator
    for n, sample in enumerate(_sample_inputs(op, dtype)):
        # `samples` judged, or twice as many tried: unjudged ones (ill-conditioned
        # points) leave room for the next.
        if result.samples >= samples or result.samples + result.unjudged >= 2 * samples:
            break
        p = Problem(op, sample)
        if not p.inputs:
            continue
        try:
            if not _reference(_judgeable, p):
                continue
            if not _reference(_deterministic, p):
                result.unjudged += 1
                result.notes.append(f"sample {n}: two calls differ")
                continue
            _reference(keep_differentiable_outputs, p, generator)
            if not any(p.kept):
                continue  # no output has a tangent: nothing to differentiate
            _reference(hold_non_smooth_inputs, p, generator)
            result.held += sum(p.held)
            if all(p.held):
                result.unjudged += 1
                result.notes.append(f"sample {n}: differences see no input smooth")
                continue
            verdict = _RUNS[mode](p, generator)
        except NoReference:
            continue
        except Exception as exc:  # noqa: BLE001 (dualgen raising is the verdict)
            result.samples += 1
            result.failures.append(
                ("error", f"sample {n}: {type(exc).__name__}: {exc}")
            )
            continue
        if verdict.status == "unjudged":
            result.unjudged += 1
            result.notes.append(f"sample {n}: {verdict.detail}")
            continue
        result.samples += 1
        if verdict.status == "wrong":
            result.error = max(result.error, verdict.error)
            result.failures.append(("wrong", f"sample {n}: {verdict.detail}"))
    if result.failures:
        kinds = {k for k, _ in result.failures}
        result.status = "error" if "error" in kinds else "wrong"
    elif result.samples:
        result.status = "pass"
    elif result.unjudged:
        result.status = "unjudged"
    return result


def cases(names=None, modes=MODES):
    """(op, dtype, mode) in sweep order."""
    for op in nested_ops():
        if names is None or op.name in names or full_name(op) in names:
            for mode in modes:
                for dtype in mode_dtypes(op, mode):
                    yield op, dtype, mode


def sweep(names=None, modes=MODES, samples=SAMPLES, progress=True):
    todo = [(op, dtype, mode, samples) for op, dtype, mode in cases(names, modes)]
    return run_all(todo, check, progress)


def summary(results) -> str:
    parts = []
    for mode in MODES:
        for dtype in ("float64", "complex128"):
            rows = [r for r in results if (r.mode, r.dtype) == (mode, dtype)]
            if rows:
                count = {s: sum(r.status == s for r in rows) for s in _STATUSES}
                parts.append(
                    f"{mode} {dtype}: "
                    + ", ".join(f"{n} {s}" for s, n in count.items() if n)
                )
    return "; ".join(parts)


_STATUSES = ("pass", "wrong", "error", "unjudged", "n/a")


def reason(result) -> str:
    """Why an (op, dtype, mode) is not `pass`, in one line (the known table's
    reasons are written by hand and kept by `write_known`)."""
    if result.status == "unjudged":
        return f"unjudged on all {result.unjudged} samples: {result.notes[0]}"
    kind, detail = result.failures[0]
    return f"{kind}: {detail.splitlines()[0][:200]}"


def write_known(results) -> None:
    """Update KNOWN_NESTED in opinfo_known_nested.py with these results: rows that
    pass now go, new failures come in with `reason`, the written reasons of the
    rows that stay are kept; ops in IN_PROGRESS stay out (the suite fails on them
    until their fix lands)."""
    from opinfo_known_nested import IN_PROGRESS, KNOWN_NESTED

    known = dict(KNOWN_NESTED)
    for r in results:
        if r.status in ("pass", "n/a") or r.key[0] in IN_PROGRESS:
            known.pop(r.key, None)
        else:
            known.setdefault(r.key, reason(r))
    path = Path(__file__).with_name("opinfo_known_nested.py")
    write_table(path, "KNOWN_NESTED", dict(sorted(known.items())))


MARKER = "<!-- Generated below by: python tests/coverage/opinfo_nested.py --report -->"


def report(results) -> str:
    lines = [f"- {part}" for part in summary(results).split("; ")]
    lines += [
        "",
        (
            "| op | dtype | mode | status | judged | unjudged | held | worst error "
            "| first failure or note |"
        ),
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        detail = r.detail.replace("|", "/")
        error = f"{r.error:.2g}" if r.status == "wrong" else ""
        lines.append(
            f"| {r.name} | {r.dtype} | {r.mode} | {r.status} | {r.samples} "
            f"| {r.unjudged} | {r.held} | {error} | {detail} |"
        )
    return "\n".join(lines) + "\n"


def write_report(results, path: Path) -> None:
    """Replace what follows MARKER in `path` (the prose above it stays)."""
    text = path.read_text() if path.exists() else ""
    head = text[: text.index(MARKER)] if MARKER in text else text
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(head + MARKER + "\n\n" + report(results))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", nargs="+")
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    parser.add_argument("--samples", type=int, default=SAMPLES)
    parser.add_argument("--spec", help="use the kernels generated from this spec")
    parser.add_argument(
        "--report", help="write the table into this Markdown file, below MARKER"
    )
    parser.add_argument(
        "--known",
        action="store_true",
        help="update KNOWN_NESTED in opinfo_known_nested.py with these results",
    )
    args = parser.parse_args()
    names = set(args.ops) if args.ops else None
    if args.spec:
        from dualgen.rules import using_kernels
        from dualgen.tools.cli import generate_files
        from dualgen.tools.validate import load_kernels

        kernels = load_kernels(generate_files(Path(args.spec)).files)
        with using_kernels(kernels):
            results = sweep(names, args.modes, args.samples)
    else:
        results = sweep(names, args.modes, args.samples)
    for r in results:
        if r.status not in ("pass", "n/a"):
            print(f"{r.status.upper():8} {r.name} [{r.dtype} {r.mode}]: {r.detail}")
    print(summary(results))
    if args.known:
        write_known(results)
    if args.report:
        write_report(results, Path(args.report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
