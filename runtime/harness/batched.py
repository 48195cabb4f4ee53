"""gradcheck's batched checks: derivatives computed under vmap against a loop.

As native's `_test_batched_grad_forward_ad` and `_test_batched_grad`: a few random
tangents (cotangents) at once under vmap must give what they give one at a time.
Forward mode runs dualgen.forward_ad with batched tangents, backward mode the tape
with batched cotangents; like native, both use the vmap of
`torch._vmap_internals`, which `torch.autograd.functional.jacobian` uses too.
"""

from __future__ import annotations

import warnings

import torch
from torch._vmap_internals import _vmap

from .problem import Problem

BATCH = 2  # tangents per check, as native

FORWARD_ADVICE = (
    "gradcheck failed while testing batched gradient computation with forward-mode "
    "AD: the forward-mode (JVP) formulas must work on batched tangents under vmap. "
    "Disable this check with `check_batched_forward_grad=False`."
)
BACKWARD_ADVICE = (
    "gradcheck or gradgradcheck failed while testing batched gradient computation: "
    "the backward (VJP) formulas must work on batched cotangents under vmap. "
    "Disable this check with `check_batched_grad=False`."
)


def forward(problem: Problem) -> list[str]:
    """For each differentiable input, the output tangents of a batch of random
    tangents under vmap against the same tangents one at a time."""
    outputs = sorted({part.output for part in problem.parts})
    failures = []
    for i in problem.inputs:

        def jvp(tangent, i=i):
            return _present(problem.jvp({i: tangent}))

        tangents = [torch.randn_like(problem.input(i)) for _ in range(BATCH)]
        pairs = [(problem.output_number(k), problem.input_number(i)) for k in outputs]
        failures += _compare(jvp, tangents, problem.name, pairs, FORWARD_ADVICE)
    return failures


def backward(problem: Problem) -> list[str]:
    """For each differentiable output, the gradients of every differentiable
    input for a batch of random cotangents under vmap against the same
    cotangents one at a time."""
    recording = problem.recorded()
    failures = []
    for k in sorted({part.output for part in problem.parts}):
        output = recording.outputs[k]

        def vjp(cotangent, output=output):
            grads = recording.tape.grad(output, recording.watched, cotangent)
            return tuple(
                _zeros_like(x) if g is None else g
                for g, x in zip(grads, recording.watched)
            )

        cotangents = [torch.randn_like(output) for _ in range(BATCH)]
        pairs = [
            (problem.output_number(k), problem.input_number(i)) for i in problem.inputs
        ]
        failures += _compare(vjp, cotangents, problem.name, pairs, BACKWARD_ADVICE)
    return failures


def _present(tangents: tuple) -> tuple:
    """Output tangents without the None of non-differentiable outputs (vmap
    returns tensors only)."""
    return tuple(t for t in tangents if t is not None)


def _zeros_like(x: torch.Tensor) -> torch.Tensor:
    # An expanded zero, as native: it stays plain under vmap and is stacked.
    return torch.zeros((), dtype=x.dtype, device=x.device).expand(x.shape)


def _compare(fn, vectors, name: str, pairs: list, advice: str) -> list[str]:
    """fn of each vector in turn against vmap(fn) of them stacked, in native's
    words; `pairs`: the (output, input) each result of fn is for, numbered as
    native numbers them."""
    expected = [torch.stack(shards) for shards in zip(*(fn(v) for v in vectors))]
    with warnings.catch_warnings():
        # vmap's fallback for ops without a batching rule is expected here.
        warnings.filterwarnings("ignore", message="There is a performance drop")
        try:
            result = _vmap(fn)(torch.stack(vectors))
        except RuntimeError as error:
            message = f"While computing batched gradients, got: {error}"
            return [f"{message}\n\n(in {name}) {advice}"]
    result = result if isinstance(result, tuple) else (result,)
    return [
        f"For output {k} and input {i} (in {name}):\n\n{advice}\n\n"
        f"Got:\n{res}\n\nExpected:\n{exp}"
        for (k, i), res, exp in zip(pairs, result, expected)
        if not torch.allclose(res, exp)
    ]
