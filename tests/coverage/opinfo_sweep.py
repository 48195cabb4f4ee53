"""The OpInfo conformance sweep: every OpInfo that supports forward AD, every sample,
dualgen.forward_ad against torch.autograd.forward_ad.

    python tests/coverage/opinfo_sweep.py [--ops NAME ...] [--spec PATH] [--report PATH] [--hvp]

`--hvp` sweeps forward-over-reverse instead: the tangents of the gradients
torch.autograd.grad computes from dual inputs, which go through the forward
formulas of the backward ops (`*_backward`) autograd calls: Hessian-vector
products. It covers OpInfos that support forward-over-reverse (float64 only).

`--spec` sweeps with the kernels generated from that spec (in memory) instead of
the installed ones.

Each (op, dtype) is `pass` (every sample agrees: primal outputs and tangents),
`wrong` (a value differs), `error` (dualgen raises where native runs) or `n/a`
(native runs no sample). Seeded random tangents go on every floating and complex
tensor input, also inside lists.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import opinfo_reasons as why
import torch
import torch.autograd.forward_ad as native_fwAD

import dualgen.forward_ad as fwAD

DTYPES = (torch.float64, torch.complex128)


@dataclass
class OpResult:
    name: str
    dtype: str
    status: str = "n/a"  # pass, wrong, error, n/a
    samples: int = 0
    detail: str = ""
    failures: list = field(default_factory=list)


def forward_ad_ops():
    from torch.testing._internal.common_methods_invocations import op_db

    return [op for op in op_db if op.supports_forward_ad]


def dtypes_for(op) -> list[torch.dtype]:
    supported = op.supported_backward_dtypes("cpu")
    return [d for d in DTYPES if d in supported and d in op.supported_dtypes("cpu")]


def _is_diff(t) -> bool:
    return isinstance(t, torch.Tensor) and (t.is_floating_point() or t.is_complex())


def _map(value, fn):
    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_map(v, fn) for v in value)
    if isinstance(value, dict):
        return {k: _map(v, fn) for k, v in value.items()}
    return value


def flatten(value) -> list:
    """The tensors in `value` (nested lists, tuples, dicts), in traversal order."""
    flat = []
    _map(value, flat.append)
    return flat


def _tangents(sample, generator):
    """A seeded random tangent per differentiable tensor, in traversal order."""
    tangents = []

    def make(t):
        if _is_diff(t):
            tangents.append(
                torch.randn(t.shape, generator=generator, dtype=t.dtype)
                if not t.is_complex()
                else torch.complex(
                    torch.randn(t.shape, generator=generator, dtype=t.real.dtype),
                    torch.randn(t.shape, generator=generator, dtype=t.real.dtype),
                ).to(t.dtype)
            )
        return t

    _map((sample.input, sample.args, sample.kwargs), make)
    return tangents


def _run(op, sample, tangents, module):
    """The op under `module`'s forward AD: (primal outputs, tangents), flattened."""
    pending = iter(tangents)

    def dual(t):
        return module.make_dual(t, next(pending)) if _is_diff(t) else t

    with module.dual_level():
        args = _map((sample.input, sample.args, sample.kwargs), dual)
        result = []
        for o in flatten(op(args[0], *args[1], **args[2])):
            primal, tangent = module.unpack_dual(o) if _is_diff(o) else (o, None)
            result.append(
                (primal.clone(), None if tangent is None else tangent.clone())
            )
    return result


def _run_fx(op, sample, tangents, module):
    """The op's JVP program from dualgen.fx (the native module: native forward
    AD, the reference), flattened as `_run` gives it."""
    if module is native_fwAD:
        return _run(op, sample, tangents, module)
    from torch.testing._internal.common_utils import freeze_rng_state

    import dualgen.fx

    inputs = []
    _map(
        (sample.input, sample.args, sample.kwargs),
        lambda t: _is_diff(t) and inputs.append(t),
    )

    def f(*values):
        pending = iter(values)
        args = _map(
            (sample.input, sample.args, sample.kwargs),
            lambda t: next(pending) if _is_diff(t) else t,
        )
        return op(args[0], *args[1], **args[2])

    program = dualgen.fx.jvp(f, tuple(inputs), tuple(tangents))
    # OpInfo's random ops seed the generator inside the op (wrapper_set_seed,
    # 42); a traced program draws where the op drew, so it is called so seeded.
    with freeze_rng_state():
        torch.manual_seed(42)
        out, out_tangents = program(*inputs, *tangents)
    pairs = iter(flatten(out_tangents))
    return [(o, next(pairs) if _is_diff(o) else None) for o in flatten(out)]


def _run_hvp(op, sample, tangents, module):
    """Forward-over-reverse under `module`'s forward AD: the gradients of the op's
    differentiable outputs (seeded cotangents) with respect to its differentiable
    inputs, as (primal, tangent) pairs; an unused input gives (None, None)."""
    leaves = []

    def leaf(t):
        if _is_diff(t):
            leaves.append(t.detach().clone().requires_grad_())
            return leaves[-1]
        return t

    values = _map((sample.input, sample.args, sample.kwargs), leaf)
    pending = iter(tangents)
    generator = torch.Generator().manual_seed(1)
    with module.dual_level():
        args = _map(
            values,
            lambda t: (
                module.make_dual(t, next(pending))
                if _is_diff(t) and t.requires_grad
                else t
            ),
        )
        outputs = [
            o
            for o in flatten(op(args[0], *args[1], **args[2]))
            if _is_diff(o) and o.requires_grad
        ]
        if not outputs:
            return []
        cotangents = [_random_like(o, generator) for o in outputs]
        grads = torch.autograd.grad(outputs, leaves, cotangents, allow_unused=True)
        result = []
        for g in grads:
            if g is None:
                result.append((None, None))
                continue
            primal, tangent = module.unpack_dual(g)
            result.append(
                (
                    primal.detach().clone(),
                    None if tangent is None else tangent.detach().clone(),
                )
            )
    return result


def _random_like(t, generator):
    real = torch.randn(t.shape, generator=generator, dtype=t.real.dtype)
    if not t.is_complex():
        return real
    imag = torch.randn(t.shape, generator=generator, dtype=t.real.dtype)
    return torch.complex(real, imag)


def _differs(a, b) -> str | None:
    if (a is None) != (b is None):
        return f"tangent {'None' if a is None else 'present'} vs native {'None' if b is None else 'present'}"
    if a is None:
        return None
    if a.shape != b.shape or a.dtype != b.dtype:
        return f"shape/dtype {tuple(a.shape)} {a.dtype} vs native {tuple(b.shape)} {b.dtype}"
    if not torch.allclose(a, b, rtol=1e-7, atol=1e-7, equal_nan=True):
        worst = (a - b).abs().reshape(-1).nan_to_num(float("inf")).argmax()
        return (
            f"worst element {int(worst)}: {a.reshape(-1)[worst].item()} vs native "
            f"{b.reshape(-1)[worst].item()}"
        )
    return None


def _first_difference(got, expected, zero_is_none=False) -> str | None:
    if expected is None or got is None:
        return "no reference"
    for k, ((p, t), (ep, et)) in enumerate(zip(got, expected)):
        if zero_is_none and (t is None) != (et is None):
            # A gradient's tangent: native sometimes materialises zeros where
            # dualgen has none; the values agree.
            t, et = [x if x is not None else torch.zeros_like(p) for x in (t, et)]
        problem = None
        if isinstance(p, torch.Tensor):
            problem = _differs(p, ep) and f"primal: {_differs(p, ep)}"
        problem = problem or _differs(t, et)
        if problem:
            return f"output {k}: {problem}"
    return None


def _native_or_none(op, sample, tangents, run):
    try:
        return run(op, sample, tangents, native_fwAD)
    except Exception:  # noqa: BLE001 (whatever native raises, it has no reference)
        return None


def full_name(op) -> str:
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


@contextlib.contextmanager
def one_thread():
    """torch on one thread: kernels that write one place from several (max_unpool
    with repeated indices) then pick the same winner for the primal and the
    tangent, and reductions give the same bits on every call."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def check(op, dtype, hvp=False, fx=False) -> OpResult:
    with one_thread():
        return _check(op, dtype, hvp, fx)


def _check(op, dtype, hvp, fx=False) -> OpResult:
    run = _run_hvp if hvp else _run_fx if fx else _run
    result = OpResult(full_name(op), str(dtype).removeprefix("torch."))
    result.key = (op.name, op.variant_test_name, result.dtype)
    result.mode = "hvp" if hvp else "fx" if fx else "jvp"
    generator = torch.Generator().manual_seed(0)
    torch.manual_seed(0)  # OpInfo samples draw from the global generator
    for n, sample in _samples(op, dtype, fx):
        tangents = _tangents(sample, generator)
        if not tangents:
            continue
        expected = _native_or_none(op, sample, tangents, run)
        if expected is None:
            continue  # native refuses this sample: nothing to compare
        result.samples += 1
        try:
            got = run(op, sample, tangents, fwAD)
        except Exception as exc:  # noqa: BLE001 (a dualgen failure is the verdict)
            result.failures.append(
                ("error", f"sample {n}: {type(exc).__name__}: {exc}")
            )
            continue
        if len(got) != len(expected):
            result.failures.append(
                ("wrong", f"sample {n}: {len(got)} outputs vs {len(expected)}")
            )
            continue
        # (dualgen.fx gives zeros where native has no tangent, as torch.func.jvp)
        problem = _first_difference(got, expected, hvp or fx)
        if problem and _first_difference(
            _native_or_none(op, sample, tangents, run), expected, hvp or fx
        ):
            # Native disagrees with itself (max_unpool with repeated indices, ...):
            # this sample has no reference value.
            result.samples -= 1
            continue
        if problem:
            result.failures.append(("wrong", f"sample {n}, {problem}"))
    if result.failures:
        kinds = {k for k, _ in result.failures}
        result.status = "error" if "error" in kinds else "wrong"
        result.detail = result.failures[0][1].splitlines()[0][:300]
    elif result.samples:
        result.status = "pass"
    return result


# A JVP program is traced once per sample; the kernels under it meet every sample
# in the jvp mode already. Ops with a thousand samples (max_pool2d: 1,440) trace
# an evenly spread FX_SAMPLES of them.
FX_SAMPLES = 64


def _samples(op, dtype, fx):
    samples = op.sample_inputs("cpu", dtype, requires_grad=False)
    if not fx:
        yield from enumerate(samples)
        return
    samples = list(samples)
    stride = -(-len(samples) // FX_SAMPLES)
    yield from list(enumerate(samples))[::stride]


def hvp_ops():
    return [op for op in forward_ad_ops() if op.supports_fwgrad_bwgrad]


def hvp_dtypes_for(op) -> list[torch.dtype]:
    return [d for d in dtypes_for(op) if d == torch.float64]


def sweep(names=None, progress=True, hvp=False, fx=False) -> list[OpResult]:
    ops = [
        op
        for op in (hvp_ops() if hvp else forward_ad_ops())
        if names is None or op.name in names or full_name(op) in names
    ]
    todo = [
        (op, dtype, hvp, fx)
        for op in ops
        for dtype in (hvp_dtypes_for(op) if hvp else dtypes_for(op))
    ]
    return run_all(todo, check, progress)


def run_all(todo, check_one, progress=True) -> list:
    """check_one(op, *rest) for each (op, *rest) in todo, counting on stderr."""
    results = []
    for i, case in enumerate(todo):
        results.append(check_one(*case))
        if progress:
            print(f"\r{i + 1}/{len(todo)} {case[0].name:30}", end="", file=sys.stderr)
    if progress:
        print(file=sys.stderr)
    return results


def summary(results: list[OpResult]) -> str:
    lines = []
    for dtype in ("float64", "complex128"):
        rows = [r for r in results if r.dtype == dtype and r.status != "n/a"]
        passed = sum(r.status == "pass" for r in rows)
        lines.append(f"{dtype}: {passed}/{len(rows)} ops pass")
    return "; ".join(lines)


def reason(result: OpResult) -> str:
    """Why an (op, dtype) fails, in one short line."""
    known = why.NATIVE_WRONG.get((*result.key, result.mode))
    if known is None and result.mode == "fx":  # the program computes what the mode does
        known = why.NATIVE_WRONG.get((*result.key, "jvp"))
    if known:
        return known
    kind, detail = result.failures[0]
    if result.mode == "fx":
        for pattern, limit in why.FX_LIMITS.items():
            if pattern == result.key[:2] or (
                isinstance(pattern, str) and re.search(pattern, detail)
            ):
                return limit
    missing = re.search(r"rule for (\S+?);", detail)
    if missing:
        return f"no rule for {missing.group(1)} yet"
    return f"{kind}: {detail.splitlines()[0][:160]}"


def write_known(results: list[OpResult], mode: str = "jvp") -> None:
    """Replace `mode`'s rows of KNOWN in opinfo_known.py with these results'
    failures; the other modes' rows stay."""
    from opinfo_known import KNOWN

    rows = {k: v for k, v in KNOWN.items() if k[3] != mode}
    for r in results:
        if r.status in ("wrong", "error"):
            rows[(*r.key, mode)] = reason(r)
    order = list(_REPORTS)  # the modes' rows in sweep order, one mode after another
    rows = dict(sorted(rows.items(), key=lambda row: order.index(row[0][3])))
    path = Path(__file__).with_name("opinfo_known.py")
    write_table(path, "KNOWN", rows, named=True)


def write_table(path: Path, variable: str, rows: dict, named=False) -> None:
    """Rewrite the dict `variable` at the end of `path` with `rows` (the head of the
    file stays); with `named`, a reason opinfo_reasons holds is written as its name
    (the head imports it as `why`)."""
    names = {
        text: f"why.{name}"
        for name, text in vars(why).items()
        if named and name.isupper() and isinstance(text, str)
    }
    text = path.read_text()
    lines = [text[: text.index(f"{variable} = {{")] + f"{variable} = {{"]
    for key, reason_ in rows.items():
        lines.append(f"    {key!r}: {names.get(reason_, repr(reason_))},")
    lines.append("}")
    import black

    path.write_text(black.format_str("\n".join(lines) + "\n", mode=black.Mode()))


# mode -> (report title, sweep flags of its report, what the report compares)
_REPORTS = {
    "jvp": (
        "# OpInfo forward-AD conformance",
        "--report docs/opinfo.md",
        [
            "OpInfo that supports forward AD, every sample, dualgen.forward_ad against",
            "torch.autograd.forward_ad (primal outputs and tangents, float64 tolerances).",
        ],
    ),
    "fx": (
        "# OpInfo forward-AD conformance of dualgen.fx.jvp",
        "--fx --report docs/opinfo_fx.md",
        [
            "OpInfo that supports forward AD, every sample, the JVP program of",
            "dualgen.fx.jvp against torch.autograd.forward_ad (primal outputs and",
            "tangents, float64 tolerances; zeros where native has no tangent).",
        ],
    ),
    "hvp": (
        "# OpInfo forward-over-reverse (HVP) conformance",
        "--hvp --report docs/opinfo_hvp.md",
        [
            "OpInfo that supports forward-over-reverse, every sample: tangents of the",
            "gradients under dualgen against native (float64 tolerances).",
        ],
    ),
}


def report(results: list[OpResult]) -> str:
    title, command, what = _REPORTS[results[0].mode if results else "jvp"]
    lines = [
        title,
        "",
        f"Generated by `python tests/coverage/opinfo_sweep.py {command}`: every",
        *what,
        "",
        f"**{summary(results)}.**",
        "",
        "| op | dtype | status | samples | first failure |",
        "|---|---|---|---|---|",
    ]
    for r in results:
        detail = (reason(r) if r.failures else "").replace("|", "/")
        lines.append(f"| {r.name} | {r.dtype} | {r.status} | {r.samples} | {detail} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", nargs="+")
    parser.add_argument("--report", help="write a Markdown table here")
    parser.add_argument("--spec", help="use the kernels generated from this spec")
    parser.add_argument(
        "--known",
        action="store_true",
        help="rewrite this mode's rows of tests/coverage/opinfo_known.py: "
        "the failing (op, dtype) pairs and why",
    )
    parser.add_argument(
        "--hvp", action="store_true", help="sweep forward-over-reverse instead"
    )
    parser.add_argument(
        "--fx", action="store_true", help="sweep the JVP programs of dualgen.fx.jvp"
    )
    args = parser.parse_args()
    names = set(args.ops) if args.ops else None
    if args.spec:
        from dualgen.rules import using_kernels
        from dualgen.tools.cli import generate_files
        from dualgen.tools.validate import load_kernels

        kernels = load_kernels(generate_files(Path(args.spec)).files)
        with using_kernels(kernels):
            results = sweep(names, hvp=args.hvp, fx=args.fx)
    else:
        results = sweep(names, hvp=args.hvp, fx=args.fx)
    for r in results:
        if r.status in ("wrong", "error"):
            print(f"{r.status.upper():5} {r.name} [{r.dtype}]: {r.detail}")
    print(summary(results))
    if args.known:
        write_known(results, "hvp" if args.hvp else "fx" if args.fx else "jvp")
    if args.report:
        Path(args.report).parent.mkdir(parents=True, exist_ok=True)
        Path(args.report).write_text(report(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
