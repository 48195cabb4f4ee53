"""`gradcheck`, `adjoint_check` and `gradgradcheck`, with torch's parameters.

Forward mode differentiates through `dualgen.forward_ad`, backward mode through the
tape over the generated VJP kernels; native autograd computes nothing here.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from dataclasses import dataclass

import torch

from .. import torch_features
from . import batched, compare, fast_gradcheck, jacobians
from .compare import GradcheckError, matrix_mismatch, scalar_mismatch
from .problem import Problem, is_differentiable, random_like
from .tape import GradDtypeMismatch


@dataclass(frozen=True)
class CheckOptions:
    """The keywords gradcheck and gradgradcheck share with torch's pair (same
    names, defaults and meaning); gradgradcheck passes them on to each gradcheck it
    runs. Both show them in their signatures (`help`, `inspect.signature`)."""

    eps: float = 1e-6
    atol: float = 1e-5
    rtol: float = 1e-3
    raise_exception: bool = True
    nondet_tol: float = 0.0
    check_undefined_grad: bool = True
    check_grad_dtypes: bool = False
    check_batched_grad: bool = False
    fast_mode: bool = False

    @classmethod
    def of(cls, check: str, keywords: dict[str, float | bool]) -> CheckOptions:
        """The options given to `check` as `keywords`; a TypeError, as Python's
        own, for a keyword `check` does not take."""
        names = {f.name for f in dataclasses.fields(cls)}
        for name in keywords:
            if name not in names:
                raise TypeError(
                    f"{check}() got an unexpected keyword argument '{name}'"
                )
        return cls(**keywords)


def _shows_options(check: Callable[..., bool]) -> Callable[..., bool]:
    """`check`, whose signature shows CheckOptions' fields as keyword-only
    parameters in place of its `**options`."""
    signature = inspect.signature(check)
    own = [p for p in signature.parameters.values() if p.kind is not p.VAR_KEYWORD]
    shared = [
        inspect.Parameter(
            f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default, annotation=f.type
        )
        for f in dataclasses.fields(CheckOptions)
    ]
    positional = [p for p in own if p.kind is not p.KEYWORD_ONLY]
    keyword = [p for p in own if p.kind is p.KEYWORD_ONLY]
    check.__signature__ = signature.replace(parameters=positional + shared + keyword)
    return check


@_shows_options
def gradcheck(
    func,
    inputs,
    *,
    check_batched_forward_grad: bool = False,
    check_forward_ad: bool = False,
    check_backward_ad: bool = True,
    masked: bool | None = None,
    check_adjoint: bool = True,
    **options: float | bool,
) -> bool:
    """Check the derivatives dualgen computes for `func` at `inputs` against central
    differences, like `torch.autograd.gradcheck` (same parameters and meaning; the
    shared ones are CheckOptions').

    Inputs that are floating or complex tensors with `requires_grad=True` are
    differentiated. Forward mode (`check_forward_ad`) uses dualgen.forward_ad,
    backward mode (`check_backward_ad`) the generated VJP kernels. With both, the
    adjoint check (`check_adjoint`) also compares <v, J u> from the forward kernels
    with <J^T v, u> from the backward ones. Returns True, or raises GradcheckError
    (returns False when `raise_exception` is False).
    """
    shared = CheckOptions.of("gradcheck", options)
    torch_features.require("gradcheck", "custom_function")
    if not (check_forward_ad or check_backward_ad):
        raise AssertionError(
            "Expected at least one of check_forward_ad or check_backward_ad to be True"
        )
    if shared.check_batched_grad and not check_backward_ad:
        raise AssertionError(
            "Setting check_batched_grad=True requires check_backward_ad to be True"
        )
    if check_batched_forward_grad and not check_forward_ad:
        raise AssertionError(
            "Setting check_batched_forward_grad=True requires check_forward_ad to "
            "be True"
        )
    problem = Problem.make(
        func, inputs, masked=masked, finite_differences=True, forward=check_forward_ad
    )
    modes = {"forward": check_forward_ad, "backward": check_backward_ad}
    try:
        failures = (_fast if shared.fast_mode else _slow)(problem, shared, **modes)
    except GradDtypeMismatch as exc:
        failures = [f"{exc} (in {problem.name})"]
    if check_backward_ad:
        failures += _zero_cotangents(problem)
    if shared.check_undefined_grad:
        failures += _undefined(problem, check_forward_ad, check_backward_ad)
    if check_adjoint and check_forward_ad and check_backward_ad and not failures:
        failures += _adjoint(problem, rtol=None, atol=0.0)
    if check_batched_forward_grad:
        failures += batched.forward(problem)
    if shared.check_batched_grad:
        failures += batched.backward(problem)
    return _verdict(problem, failures, shared.raise_exception)


def adjoint_check(
    func,
    inputs,
    *,
    rtol: float | None = None,
    atol: float = 0.0,
    raise_exception: bool = True,
) -> bool:
    """Check that dualgen's forward and backward kernels agree, without finite
    differences: <v, J u> (one JVP per input) equals <J^T v, u> (one VJP per output
    part) for random u, v. `rtol` defaults to 1000 machine epsilons of the input's
    dtype, relative to the sizes of the two dot products' terms."""
    torch_features.require("gradcheck", "custom_function")
    problem = Problem.make(func, inputs, masked=None)
    return _verdict(problem, _adjoint(problem, rtol=rtol, atol=atol), raise_exception)


def _verdict(problem: Problem, failures: list[str], raise_exception: bool) -> bool:
    if not failures:
        return True
    if raise_exception:
        note = problem.numbering_note()
        raise GradcheckError("\n\n".join(failures + ([note] if note else [])))
    return False


def _not_reentrant(problem: Problem, key, difference: float, nondet_tol) -> str:
    i, part = key
    return (
        compare.NOT_REENTRANT.format(nondet_tol=nondet_tol)
        + f"\n  in {problem.name}: for {problem.output_name(part)} with respect to "
        f"input {problem.input_number(i)}, two runs differ by {difference:.3g} > "
        f"nondet_tol {nondet_tol:.3g}"
    )


def _slow(problem, options: CheckOptions, *, forward: bool, backward: bool):
    failures = []
    numerical = jacobians.numerical(problem, options.eps)
    modes = []
    check_grad_dtypes = options.check_grad_dtypes
    recording = (
        problem.recorded(check_grad_dtypes=check_grad_dtypes) if backward else None
    )
    if backward:
        modes.append(("backward", jacobians.backward(problem, recording=recording)))
    if forward:
        modes.append(("forward", jacobians.forward(problem)))
    for mode, analytical in modes:
        for key, expected in numerical.items():
            message = matrix_mismatch(
                problem,
                key,
                expected,
                analytical[key],
                options.atol,
                options.rtol,
                mode,
            )
            if message:
                failures.append(message)
    if backward and not failures:
        worst, where = jacobians.reentrant_difference(
            problem, modes[0][1], recording=recording
        )
        if worst > options.nondet_tol:
            failures.append(_not_reentrant(problem, where, worst, options.nondet_tol))
    return failures


def _fast(problem, options: CheckOptions, *, forward: bool, backward: bool):
    probes = fast_gradcheck.Probes.draw(problem)
    numerical = fast_gradcheck.numerical(problem, probes, options.eps)
    check_grad_dtypes = options.check_grad_dtypes
    failures = []
    failed_modes = set()
    computed = []
    if backward:
        computed.append(
            (
                "backward",
                fast_gradcheck.backward(
                    problem, probes, check_grad_dtypes=check_grad_dtypes
                ),
            )
        )
    if forward:
        computed.append(("forward", fast_gradcheck.forward(problem, probes)))
    for mode, analytical in computed:
        for key, expected in numerical.items():
            if not (problem.input(key[0]).numel() and key[1].numel):
                continue  # an empty Jacobian: nothing to compare
            adjusted = probes.adjusted_atol(options.atol, *key)
            message = scalar_mismatch(
                problem, key, expected, analytical[key], adjusted, options.rtol, mode
            )
            if message:
                failures.append(message)
                failed_modes.add(mode)
    if failed_modes:
        # Locate it: the slow check names the input, output and element.
        slow = _slow(
            problem,
            options,
            forward="forward" in failed_modes,
            backward="backward" in failed_modes,
        )
        failures.append(
            "Slow mode, run to locate the mismatch:\n" + "\n\n".join(slow)
            if slow
            else compare.FAST_FAILED_SLOW_PASSES
            + "\n  (dualgen: slow mode passes, the fast-mode mismatch is within the "
            "slow check's element-wise tolerance.)"
        )
    elif backward:
        again = fast_gradcheck.backward(
            problem, probes, check_grad_dtypes=check_grad_dtypes
        )
        for key, value in computed[0][1].items():
            difference = abs(again[key] - value)
            if difference > options.nondet_tol:
                failures.append(
                    _not_reentrant(problem, key, difference, options.nondet_tol)
                )
    return failures


def _zero_cotangents(problem: Problem) -> list[str]:
    """Native's "backward not multiplied by grad_output" (backward mode, always):
    zero cotangents on every output at once give zero gradients."""
    recording = problem.recorded()
    outputs = [recording.outputs[k] for k in sorted({p.output for p in problem.parts})]
    grads = recording.tape.grad(
        outputs, recording.watched, [torch.zeros_like(o) for o in outputs]
    )
    return [
        f"{compare.NOT_MULTIPLIED_BY_GRAD_OUTPUT} (in {problem.name}): zero "
        "cotangents on every output give a nonzero gradient for input "
        f"{problem.input_number(i)}"
        for i, g in zip(problem.inputs, grads)
        if g is not None and g.count_nonzero()
    ]


def _undefined(problem: Problem, forward: bool, backward: bool) -> list[str]:
    """Undefined gradients and tangents, as native's check_undefined_grad."""
    failures = _undefined_cotangents(problem) if backward else []
    if forward:
        failures += _undefined_tangents(problem)
    return failures


def _undefined_cotangents(problem: Problem) -> list[str]:
    """Zero in, zero out: a zero cotangent must give zero gradients, which catches
    formulas that divide by the gradient or make NaNs. The zero cotangent stands
    for an undefined gradient, which a Function that does not materialize grads
    gets as None, as in torch."""
    failures = []
    recording = problem.recorded()
    for part in problem.parts:
        output = recording.outputs[part.output]
        real = output.real if output.is_complex() else output
        where = f"in {problem.name}, for {problem.output_name(part)}"
        try:
            grads = recording.vjp(part, torch.zeros_like(real), undefined=True)
        except NotImplementedError:
            raise
        except RuntimeError as error:
            failures.append(f"{compare.UNDEFINED_GRAD_RAISES}\n  {where}: {error}")
            continue
        for i, g in zip(problem.inputs, grads):
            if g.count_nonzero():
                failures.append(
                    f"{compare.UNDEFINED_GRAD_NONZERO}\n  {where}: input "
                    f"{problem.input_number(i)} gets a nonzero gradient from an "
                    "undefined (zero) cotangent"
                )
    return failures


def _undefined_tangents(problem: Problem) -> list[str]:
    """Native's forward check, with native's calls: for each differentiable input
    in turn, the others carrying random tangents, the output tangents with a zero
    tangent on it and with none (undefined: a Function's jvp gets None where it does
    not materialize grads) must agree. With one differentiable input the first run
    has zero tangents only: beyond torch, its output tangents must be zero (zero
    in, zero out). Outputs that are themselves NaN or infinite may have such
    tangents and are not compared."""
    generator = torch.Generator().manual_seed(0)
    random = {
        i: random_like(problem.input(i), generator, real=False).reshape(
            problem.input(i).shape
        )
        for i in problem.inputs
    }
    outputs = problem.sample()
    compared = sorted({part.output for part in problem.parts})
    failures = []
    for i in problem.inputs:
        others = {j: u for j, u in random.items() if j != i}
        zero = {**others, i: torch.zeros_like(problem.input(i))}
        with_zero, with_none = problem.jvps([zero, others], absent_as_zeros=False)
        for k in compared:
            finite = outputs[k].isfinite()
            first, second = with_zero[k], with_none[k]
            if first is not None and not others and first[finite].count_nonzero():
                failures.append(
                    f"Forward mode of {problem.name} gives a nonzero tangent for "
                    f"output {problem.output_number(k)} from zero input tangents"
                )
            elif first is None or second is None:
                continue
            elif not torch.allclose(first[finite], second[finite]):
                message = compare.UNDEFINED_TANGENT_MISMATCH.format(
                    output=problem.output_number(k), input=problem.input_number(i)
                )
                difference = (first[finite] - second[finite]).abs().max().item()
                failures.append(
                    f"{message}\n  in {problem.name}: a zero tangent on input "
                    f"{problem.input_number(i)} and none (the other inputs' random) "
                    f"give tangents of output {problem.output_number(k)} that differ "
                    f"by up to {difference:.3g}"
                )
    return failures


def _adjoint(problem: Problem, *, rtol: float | None, atol: float) -> list[str]:
    probes = fast_gradcheck.Probes.draw(problem, seed=1)
    recording = problem.recorded()
    cotangent_grads = {
        part: recording.vjp(
            part,
            probes.v[part].reshape(recording.outputs[part.output].shape),
        )
        for part in problem.parts
    }
    failures = []
    for n, i in enumerate(problem.inputs):
        x = problem.input(i)
        u = probes.ur[i].to(x.dtype)
        if x.is_complex():
            u = u + 1j * probes.ui[i]
        tangents = problem.jvp({i: u})
        tolerance_scale = rtol
        if tolerance_scale is None:
            tolerance_scale = 1000 * torch.finfo(x.real.dtype).eps
        for part in problem.parts:
            if not (x.numel() and part.numel):
                continue  # an empty Jacobian: nothing to compare
            v = probes.v[part]
            column = part.of(tangents[part.output])
            g = cotangent_grads[part][n]
            by_forward = torch.dot(v, column).item()
            by_backward = torch.sum(
                torch.view_as_real(g.conj().resolve_conj() * u).select(-1, 0)
                if g.is_complex()
                else g * u
            ).item()
            size = (v.norm() * column.norm() + g.norm() * u.norm()).item()
            tolerance = atol + tolerance_scale * size
            if not abs(by_forward - by_backward) <= tolerance:
                failures.append(
                    "\n".join(
                        [
                            (
                                f"Adjoint mismatch for {problem.output_name(part)} with "
                                f"respect to input {problem.input_number(i)} in "
                                f"{problem.name}: the forward and backward formulas "
                                "disagree"
                            ),
                            f"  <v, J u> by forward mode:  {by_forward:.10g}",
                            f"  <J^T v, u> by backward mode: {by_backward:.10g}",
                            (
                                f"  |difference| = {abs(by_forward - by_backward):.3g} > "
                                f"{tolerance:.3g}"
                            ),
                        ]
                    )
                )
    return failures


@_shows_options
def gradgradcheck(
    func,
    inputs,
    grad_outputs=None,
    *,
    gen_non_contig_grad_outputs: bool = False,
    check_fwd_over_rev: bool = False,
    check_rev_over_rev: bool = True,
    check_fwd_over_fwd: bool = False,
    check_rev_over_fwd: bool = False,
    masked: bool = False,
    **options: float | bool,
) -> bool:
    """Second derivatives, like `torch.autograd.gradgradcheck` (same parameters and
    meaning; the shared ones are CheckOptions', passed on to each gradcheck):
    gradcheck of F(x, v) = v^T J(x) computed by dualgen's backward mode
    (reverse-over-reverse; forward-over-reverse with `check_fwd_over_rev`) and,
    beyond torch, of G(x, u) = J(x) u computed by dualgen.forward_ad
    (`check_fwd_over_fwd`, `check_rev_over_fwd`)."""
    CheckOptions.of("gradgradcheck", options)
    torch_features.require("gradcheck", "custom_function")
    if not (
        check_fwd_over_rev
        or check_rev_over_rev
        or check_fwd_over_fwd
        or check_rev_over_fwd
    ):
        raise AssertionError(
            "Expected at least one of check_fwd_over_rev, check_rev_over_rev, "
            "check_fwd_over_fwd or check_rev_over_fwd to be True"
        )
    raw = tuple(inputs) if isinstance(inputs, (list, tuple)) else (inputs,)
    problem = Problem.make(func, raw, masked=masked)
    outputs = problem.evaluate(problem.values)
    differentiable = [k for k, o in enumerate(outputs) if is_differentiable(o)]
    generator = torch.Generator().manual_seed(0)
    if grad_outputs is None:
        grad_outputs = [
            _random(outputs[k], generator, gen_non_contig_grad_outputs)
            for k in differentiable
        ]
    else:
        grad_outputs = list(
            grad_outputs if isinstance(grad_outputs, (list, tuple)) else (grad_outputs,)
        )
    passed = True
    count = len(raw)
    if check_rev_over_rev or check_fwd_over_rev:

        def first_order_vjp(*values):
            inner = Problem(
                func, problem.name, values[:count], problem.inputs, problem.parts
            )
            recording = inner.recorded()
            grads = recording.tape.grad(
                [recording.outputs[k] for k in differentiable],
                recording.watched,
                values[count:],
            )
            return tuple(
                torch.zeros_like(x) if g is None else g
                for g, x in zip(grads, recording.watched)
            )

        first_order_vjp.__name__ = f"backward of {problem.name}"
        cotangents = tuple(
            g.detach().requires_grad_() if isinstance(g, torch.Tensor) else g
            for g in grad_outputs
        )
        passed &= gradcheck(
            first_order_vjp,
            raw + cotangents,
            check_forward_ad=check_fwd_over_rev,
            check_backward_ad=check_rev_over_rev,
            masked=masked,
            **options,
        )
    if check_fwd_over_fwd or check_rev_over_fwd:
        positions = problem.inputs

        def first_order_jvp(*values):
            inner = Problem(
                func, problem.name, values[:count], positions, problem.parts
            )
            tangents = dict(zip(positions, values[count:]))
            return tuple(t for t in inner.jvp(tangents) if t is not None)

        first_order_jvp.__name__ = f"forward mode of {problem.name}"
        directions = tuple(
            _random(raw[i], generator, False).requires_grad_() for i in positions
        )
        passed &= gradcheck(
            first_order_jvp,
            raw + directions,
            check_forward_ad=check_fwd_over_fwd,
            check_backward_ad=check_rev_over_fwd,
            masked=masked,
            **options,
        )
    return passed


def _random(like: torch.Tensor, generator, non_contiguous: bool) -> torch.Tensor:
    real = like.real.dtype if like.is_complex() else like.dtype
    value = torch.randn(like.shape, generator=generator, dtype=torch.float64)
    if like.is_complex():
        value = torch.complex(
            value, torch.randn(like.shape, generator=generator, dtype=torch.float64)
        )
    value = value.to(like.dtype if like.is_complex() else real)
    if non_contiguous and value.dim():
        # Same values, every other element of a storage twice the size.
        wide = torch.empty(*value.shape[:-1], 2 * value.shape[-1], dtype=value.dtype)
        value = wide[..., ::2].copy_(value)
    return value.detach()
