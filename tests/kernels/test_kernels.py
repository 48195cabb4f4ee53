"""Every generated kernel against native PyTorch, on the spec's samples.

Each kernel runs on the cases `dualgen validate` draws from its entry's `sample:`
lines (kernel_harness.spec_cases): JVP kernels equal `torch.func.jvp` of the same
op for every combination of present tangents (so each zero-specialised branch
runs); VJP kernels equal `torch.autograd.grad`. float64 and complex128, wherever
torch runs the op.
"""

from __future__ import annotations

import contextlib

import pytest
import torch
from devices import DEVICE, fork_rng
from kernel_harness import (
    as_tuple,
    assert_matches,
    call,
    clone_tree,
    is_differentiable_value,
    outputs_of,
    random_like,
    spec_cases,
    subsets,
    tangents_for,
    zeros_like_tree,
)
from native_differences import native_difference

from dualgen.generated.registry import KERNELS
from dualgen.tools.validate.sandbox_dir import empty_cwd


@pytest.fixture(autouse=True)
def _writes_no_files():
    """Each case runs in a fresh, empty working directory and fails if the kernel
    (or anything it calls) leaves a file there."""
    with empty_cwd(prefix="dualgen-kernel-cwd-"):
        yield


def _cases(check: str) -> list:
    """Every runnable (kernel, case, dtype); a strict xfail where native is wrong
    or has no rule or where dualgen differs on purpose (native_differences):
    `dualgen validate` checks those against finite differences."""
    cases = []
    runnable, _ = spec_cases()
    for kernel_case in runnable:
        case = kernel_case.case
        reason = native_difference(
            kernel_case.info.name, check, case.values, kernel_case.dtype
        )
        if reason and not _has_input(kernel_case):
            continue  # empty inputs: nothing to compare where native differs
        if check == "vjp" and not (
            _diff_inputs(kernel_case.info, case.values)
            and kernel_case.info.differentiable_outputs
        ):
            continue  # no gradient to compare (the JVP test checks no tangent)
        marks = pytest.mark.xfail(strict=True, reason=reason) if reason else ()
        cases.append(pytest.param(kernel_case, id=kernel_case.id, marks=marks))
    return cases


def test_every_kernel_runs_on_some_sample():
    """A kernel whose samples torch refuses is tested on nothing."""
    runnable, refused = spec_cases()
    tested = {c.info.name for c in runnable if _has_input(c)}
    missing = {
        info.name: refused.get(info.name, ())[:2]
        for info in KERNELS.values()
        if info.name not in tested
    }
    assert not missing, (
        "torch runs none of these kernels' samples with an element; give the entry "
        f"(derivatives.yaml) a `sample:` torch accepts: {missing}"
    )


def _has_input(kernel_case) -> bool:
    """True unless every tensor of the case is empty (shapes, not values)."""
    tensors = [
        v
        for value in kernel_case.case.values.values()
        for v in (value if isinstance(value, list) else [value])
        if isinstance(v, torch.Tensor)
    ]
    return not tensors or any(t.numel() for t in tensors)


# What native raises where it has no rule, or refuses the dtype or the question:
# nothing to compare with. `dualgen validate` checks these kernels against finite
# differences in float64 and complex128.
_NATIVE_REFUSALS = (
    (NotImplementedError, "native has no rule"),
    (
        RuntimeError,
        "does not support automatic differentiation for outputs with complex",
    ),
    (RuntimeError, "is not implemented"),
    (RuntimeError, "ill-defined"),  # a gradient that depends on a phase (svd, eig)
    (RuntimeError, "cannot resize variables"),  # resize_ of a dual or of a leaf
    # a loss's weight or target: native's autograd refuses what dualgen differentiates
    (RuntimeError, "is not differentiable with respect to argument"),
    # _masked_softmax's backward refuses the masks of mask types 0 and 1
    (RuntimeError, "Mask shape should match grad shape"),
    # nested tensors: torch.func's forward AD reads sizes or strides, which they
    # have not (validate and tests/runtime/test_nested_tensors.py check these)
    (RuntimeError, "NestedTensorImpl doesn't support"),
)


@contextlib.contextmanager
def _native_refusal_is_xfail():
    try:
        yield
    except (NotImplementedError, RuntimeError) as exc:
        for kind, text in _NATIVE_REFUSALS:
            if isinstance(exc, kind) and (
                kind is NotImplementedError or text in str(exc)
            ):
                pytest.xfail(f"native refuses: {str(exc).splitlines()[0]}")
        raise


@contextlib.contextmanager
def _same_draws():
    """The same random numbers for native's call and ours (dropout's mask), and
    the global generator left as it was."""
    with fork_rng():
        torch.manual_seed(0)
        yield


def _diff_inputs(info, values) -> list[str]:
    return [n for n in info.differentiable_inputs if is_differentiable_value(values[n])]


def _run_native(op, info, values, diff, tangents):
    inplace = info.kind == "inplace"

    def f(*diff_values):
        vals = dict(values)
        vals.update(zip(diff, diff_values))
        if inplace:
            vals["self"] = vals["self"].clone()
        out = outputs_of(op, call(op, vals))
        return tuple(
            out[i]
            for i, o in enumerate(info.outputs)
            if o in info.differentiable_outputs and out[i] is not None
        )

    primals = tuple(values[n] for n in diff)
    return torch.func.jvp(f, primals, tuple(tangents[n] for n in diff))


def _assert_tangent(got, expected, result, where):
    if isinstance(result, (list, tuple)):  # a Tensor[] output, piece by piece
        assert got is None or len(got) == len(result), f"{where}: {len(got)} tangents"
        for i, (e, r) in enumerate(zip(expected, result)):
            _assert_tangent(None if got is None else got[i], e, r, f"{where}[{i}]")
        return
    if got is None:
        # A NaN output (the mean of nothing) has no tangent to speak of.
        torch.testing.assert_close(
            expected.masked_fill(result.isnan(), 0),
            torch.zeros_like(expected),
            msg=lambda m: f"{where}: kernel gave no tangent\n{m}",
        )
        return
    # shaped as the output, typed and valued as torch.func.jvp's tangent
    shape = None if result.is_nested else result.shape
    assert_matches(got, expected, f"{where} tangent", shape=shape)


@pytest.mark.parametrize("kernel_case", _cases("jvp"))
def test_jvp_kernel_matches_torch_func_jvp(kernel_case):
    op, info, dtype = kernel_case.op, kernel_case.info, kernel_case.dtype
    values = kernel_case.values()
    diff = _diff_inputs(info, values)
    if not diff:
        outputs = outputs_of(op, call(op, dict(values)))
        primals = [values[a.name] for a in op._schema.arguments]
        tangents = [None] * len(info.differentiable_inputs)
        got = as_tuple(info.jvp(*primals, *tangents, *outputs))
        assert all(g is None for g in got), f"{info.name}: tangent out of no tangent in"
        return
    full = tangents_for(kernel_case, values, diff, seed=1)
    inplace = info.kind == "inplace"
    for present in subsets(diff):
        tangents = {
            n: full[n] if n in present else zeros_like_tree(values[n]) for n in diff
        }
        with _native_refusal_is_xfail(), _same_draws():
            _, expected = _run_native(op, info, values, diff, tangents)
        call_values = dict(values)
        if inplace:
            call_values["self"] = values["self"].clone()
        with _same_draws():
            outputs = outputs_of(op, call(op, call_values))
        primals = [values[a.name] for a in op._schema.arguments]
        tangent_args = []
        for name in info.differentiable_inputs:
            tangent_args.append(clone_tree(full[name]) if name in present else None)
        got = outputs_of(op, info.jvp(*primals, *tangent_args, *outputs))
        expected_iter = iter(expected)
        for i, name in enumerate(info.outputs):
            if name not in info.differentiable_outputs or outputs[i] is None:
                # not differentiable, or not computed (output_mask)
                assert got[i] is None, f"{info.name}: output {name} got a tangent"
                continue
            where = f"{info.name} {dtype} tangents of {list(present)}, output {name}"
            _assert_tangent(got[i], next(expected_iter), outputs[i], where)
        if not present:
            assert all(
                g is None for g in got
            ), f"{info.name}: tangent out of no tangent in"


def _leaves(values, diff):
    leaves, inputs = {}, dict(values)
    for n in diff:
        v = values[n]
        if isinstance(v, list):
            leaves[n] = [t.detach().clone().requires_grad_() for t in v]
        else:
            leaves[n] = v.detach().clone().requires_grad_()
        inputs[n] = leaves[n]
    return leaves, inputs


def _flat(tree):
    return [x for item in tree for x in (item if isinstance(item, list) else [item])]


@pytest.mark.parametrize("kernel_case", _cases("vjp"))
# Native's backward of an op taking a complex input to a real output (cumsum with
# a real dtype) casts its gradient back with torch's notice.
@pytest.mark.filterwarnings(
    "ignore:Casting complex values to real discards the imaginary part:UserWarning"
)
def test_vjp_kernel_matches_autograd(kernel_case):
    op, info, dtype = kernel_case.op, kernel_case.info, kernel_case.dtype
    values = kernel_case.values()
    diff = _diff_inputs(info, values)
    leaves, inputs = _leaves(values, diff)
    if info.kind == "inplace":
        inputs["self"] = (
            leaves["self"].clone() if "self" in leaves else values["self"].clone()
        )
    with _native_refusal_is_xfail():  # requires_grad inputs: native may refuse
        outputs = outputs_of(op, call(op, inputs))
    gen = torch.Generator(DEVICE).manual_seed(2)
    grads = [
        (
            random_like(o, gen)
            if n in info.differentiable_outputs and o is not None
            else None
        )
        for o, n in zip(outputs, info.outputs)
    ]
    pairs = [(o, g) for o, g in zip(outputs, grads) if g is not None]
    flat_leaves = _flat([leaves[n] for n in diff])
    with _native_refusal_is_xfail():
        expected = torch.autograd.grad(
            _flat([o for o, _ in pairs]),
            flat_leaves,
            _flat([g for _, g in pairs]),
            allow_unused=True,
        )
    detached = tuple(
        (
            [x.detach() for x in o]
            if isinstance(o, list)
            else None if o is None else o.detach()
        )
        for o in outputs
    )
    arguments = [values[a.name] for a in op._schema.arguments]
    grad_arg = grads[0] if len(outputs) == 1 else tuple(grads)
    got = info.vjp(grad_arg, *arguments, *detached)
    by_name = dict(zip(info.differentiable_inputs, got))
    got_flat = _flat(
        [
            by_name[n] if not isinstance(values[n], list) else list(by_name[n])
            for n in diff
        ]
    )
    for g, e, leaf in zip(got_flat, expected, flat_leaves):
        e = torch.zeros_like(leaf) if e is None else e
        assert (
            g.dtype == leaf.dtype
        ), f"{info.name}: gradient dtype {g.dtype}, input {leaf.dtype}"
        if leaf.is_nested:  # (strided: component by component)
            assert_matches(g, e.to(g.dtype), f"{info.name} {dtype} gradient")
            continue
        assert (
            g.shape == leaf.shape
        ), f"{info.name}: gradient shape {tuple(g.shape)}, input {tuple(leaf.shape)}"
        torch.testing.assert_close(
            g.to(e.dtype), e, msg=lambda m: f"{info.name} {dtype} gradient\n{m}"
        )
