"""Every generated kernel with batched tangents: which run batched, which loop.

The vectorized forward-mode jacobians (`dualgen.functional.jacobian(...,
vectorize=True)`) push the standard basis through each op as one tangent batched
by torch's legacy vmap. A kernel's formula then runs each aten op it calls on the
batch at once where legacy vmap has a batching rule for it, and one batch
element at a time (its for-loop fallback) where it has none; ops it refuses
(random ones) fail. For each kernel, on its first spec sample in float64, this
runs the op through `dualgen.forward_ad` with a batch of tangents and records:

- the aten ops that fell back to the loop (legacy vmap's fallback warnings);
- a refusal (the error), if the batched run failed;
- whether each batch element's tangent equals the same op run with that
  element's tangent alone (it must: a difference is a wrong tangent).

    python -m tests.kernels.batched_survey   # the table, as in docs/api.md
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch._vmap_internals import _vmap

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from devices import DEVICE, fork_rng
from kernel_harness import (
    call,
    is_differentiable_value,
    outputs_of,
    random_like,
    spec_cases,
)

import dualgen.forward_ad as fwAD

BATCH = 3
_FALLBACK = re.compile(r"batching rule for (aten::[\w.]+?)\.? You are using")


@dataclass
class Outcome:
    kernel: str
    loops_over: set[str] = field(default_factory=set)  # ops without a batching rule
    refusal: str | None = None
    wrong: str | None = None  # where a batch element's tangent differs


def _first_cases():
    """One float64 case per kernel (the first sample without nested tensors, which
    vmap does not take), in spec order."""
    seen = set()
    for kernel_case in spec_cases()[0]:
        name = kernel_case.info.name
        if name in seen or kernel_case.dtype != torch.float64:
            continue
        if _nested_case(kernel_case):
            continue
        seen.add(name)
        yield kernel_case


def _nested_case(kernel_case) -> bool:
    """Whether the case's inputs or the op's outputs are nested tensors."""
    values = kernel_case.values()
    tensors = [
        v
        for value in values.values()
        for v in (value if isinstance(value, list) else [value])
        if isinstance(v, torch.Tensor)
    ]
    if any(t.is_nested for t in tensors):
        return True
    with fork_rng():
        outputs = outputs_of(kernel_case.op, call(kernel_case.op, values))
    return any(isinstance(o, torch.Tensor) and o.is_nested for o in outputs)


def _differentiable(kernel_case, values) -> list[str]:
    return [
        n
        for n in kernel_case.info.differentiable_inputs
        if is_differentiable_value(values[n])
    ]


def _tangent_outputs(kernel_case, values, names, flat_tangents):
    """Run the op with `names` made dual (their tangents `flat_tangents`, lists
    flattened) and return the differentiable outputs' tangents, zeros where
    none reached an output."""
    info, op = kernel_case.info, kernel_case.op
    with fwAD.dual_level():
        given = iter(flat_tangents)
        duals = dict(values)
        for name in names:
            value = values[name]
            if isinstance(value, list):
                duals[name] = [
                    fwAD.make_dual(v.clone(), next(given).clone()) for v in value
                ]
            else:  # (clones: an in-place op updates its tangent in place)
                duals[name] = fwAD.make_dual(value.clone(), next(given).clone())
        if info.kind == "inplace" and "self" not in names:
            duals["self"] = values["self"].clone()
        outs = outputs_of(op, call(op, duals))
        tangents = []
        for i, name in enumerate(info.outputs):
            if name not in info.differentiable_outputs:
                continue
            for out in outs[i] if isinstance(outs[i], (list, tuple)) else [outs[i]]:
                if not isinstance(out, torch.Tensor) or not (
                    out.is_floating_point() or out.is_complex()
                ):
                    continue
                tangent = fwAD.unpack_dual(out).tangent
                tangents.append(torch.zeros_like(out) if tangent is None else tangent)
        return tuple(tangents)


@contextlib.contextmanager
def _fallback_warnings():
    """Legacy vmap's fallback warnings while inside, into the list it yields
    (one text): torch writes them to the process's stderr (c10's warning
    handler), not to Python's warnings."""
    text: list[str] = []
    torch._C._debug_only_display_vmap_fallback_warnings(True)
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+") as captured:
        sys.stderr.flush()
        os.dup2(captured.fileno(), 2)
        try:
            yield text
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            torch._C._debug_only_display_vmap_fallback_warnings(False)
            captured.seek(0)
            text.append(captured.read())


def survey_one(kernel_case) -> Outcome | None:
    """The kernel's outcome, or None if no input of its first case takes a
    tangent."""
    info = kernel_case.info
    values = kernel_case.values()
    names = _differentiable(kernel_case, values)
    if not names:
        return None
    outcome = Outcome(info.name)
    gen = torch.Generator(DEVICE).manual_seed(0)
    flat = []  # per dual tensor, a batch of tangents
    for name in names:
        value = values[name]
        for v in value if isinstance(value, list) else [value]:
            flat.append(torch.stack([random_like(v, gen) for _ in range(BATCH)]))

    def run(*tangents):
        with fork_rng():
            torch.manual_seed(0)  # the same draws batched and alone
            return _tangent_outputs(kernel_case, values, names, tangents)

    try:
        with _fallback_warnings() as warned:
            batched = _vmap(run)(*flat)
    except Exception as exc:  # noqa: BLE001 - what legacy vmap refuses
        outcome.refusal = f"{type(exc).__name__}: {str(exc).splitlines()[0][:100]}"
        return outcome
    outcome.loops_over = set(_FALLBACK.findall("".join(warned)))
    for b in range(BATCH):
        alone = run(*(t[b] for t in flat))
        for k, (got, expected) in enumerate(zip(batched, alone)):
            try:
                torch.testing.assert_close(got[b], expected, equal_nan=True)
            except AssertionError as exc:
                outcome.wrong = f"output {k}, element {b}: {str(exc).splitlines()[0]}"
                return outcome
    return outcome


def survey() -> list[Outcome]:
    outcomes = []
    for kernel_case in _first_cases():
        outcome = survey_one(kernel_case)
        if outcome is not None:
            outcomes.append(outcome)
    return outcomes


def report(outcomes: list[Outcome]) -> str:
    batched = [o for o in outcomes if not o.refusal and not o.loops_over]
    looping = [o for o in outcomes if not o.refusal and o.loops_over]
    refused = [o for o in outcomes if o.refusal]
    wrong = [o for o in outcomes if o.wrong]
    ops = Counter(op for o in looping for op in o.loops_over)
    summary = (
        f"{len(outcomes)} kernels with tangents: {len(batched)} run batched, "
        f"{len(looping)} loop over the batch in some op, {len(refused)} refused, "
        f"{len(wrong)} wrong."
    )
    lines = [
        summary,
        "",
        "| op without a batching rule | kernels whose formula calls it |",
        "|---|---|",
    ]
    for op, _ in sorted(ops.items(), key=lambda item: (-item[1], item[0])):
        users = sorted(o.kernel for o in looping if op in o.loops_over)
        lines.append(f"| `{op}` | {', '.join(users)} |")
    lines += ["", "| refused kernel | why |", "|---|---|"]
    lines += [f"| {o.kernel} | {o.refusal} |" for o in refused]
    lines += [f"WRONG: {o.kernel}: {o.wrong}" for o in wrong]
    return "\n".join(lines)


if __name__ == "__main__":
    print(report(survey()))
