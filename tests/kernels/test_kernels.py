"""Every generated kernel against native PyTorch.

JVP kernels equal `torch.func.jvp` of the same op for every combination of present
tangents (so each zero-specialised branch runs); VJP kernels equal
`torch.autograd.grad`. float64 always, complex128 where the op supports it.
"""

from __future__ import annotations

import pytest
import torch
from kernel_harness import (
    as_tuple,
    call,
    clone_tree,
    is_differentiable_value,
    outputs_of,
    random_like,
    sample_values,
    subsets,
    zeros_like_tree,
)
from samples import DIFFERS_FROM_NATIVE, NATIVE_WRONG, samples_for

from dualgen.generated.registry import KERNELS
from dualgen.tools.sandbox_dir import empty_cwd


@pytest.fixture(autouse=True)
def _writes_no_files():
    """Each case runs in a fresh, empty working directory and fails if the kernel
    (or anything it calls) leaves a file there."""
    with empty_cwd(prefix="dualgen-kernel-cwd-"):
        yield


def _cases(check: str) -> list:
    """Every (kernel, sample, dtype); a strict xfail where native is wrong or has
    no rule (samples.NATIVE_WRONG) or where dualgen differs on purpose
    (samples.DIFFERS_FROM_NATIVE): `dualgen validate` checks those against finite
    differences."""
    cases = []
    for op, info in KERNELS.items():
        wrong = NATIVE_WRONG.get((info.name, check))
        differs = DIFFERS_FROM_NATIVE.get((info.name, check))
        marks = ()
        if wrong:
            marks = pytest.mark.xfail(strict=True, reason=wrong)
        elif differs:
            marks = pytest.mark.xfail(strict=True, reason=differs)
        for i, sample in enumerate(samples_for(info.name, info.derived_from)):
            for dtype in (torch.float64, torch.complex128):
                if not (sample.complex_ok if dtype.is_complex else sample.real_ok):
                    continue
                cases.append(
                    pytest.param(
                        op,
                        info,
                        sample,
                        dtype,
                        id=f"{info.name}-{i}-{str(dtype)[6:]}",
                        marks=marks,
                    )
                )
    return cases


def test_every_kernel_has_samples():
    missing = [
        info.name
        for info in KERNELS.values()
        if not samples_for(info.name, info.derived_from)
    ]
    assert not missing, f"add samples in tests/samples.py for: {missing}"


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
            if o in info.differentiable_outputs
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
        torch.testing.assert_close(
            expected,
            torch.zeros_like(expected),
            msg=lambda m: f"{where}: kernel gave no tangent\n{m}",
        )
        return
    assert (
        got.shape == result.shape
    ), f"{where}: tangent shape {tuple(got.shape)}, output {tuple(result.shape)}"
    assert (
        got.dtype == expected.dtype
    ), f"{where}: tangent dtype {got.dtype}, torch.func.jvp gives {expected.dtype}"
    torch.testing.assert_close(got, expected, msg=lambda m: f"{where}\n{m}")


def _values_or_skip(op, info, sample, dtype):
    """The sample's values; complex samples of ops torch refuses for complex are skipped."""
    values = sample_values(op, sample, dtype, seed=0)
    if dtype.is_complex or info.derived_from is not None:
        try:
            call(op, {k: clone_tree(v) for k, v in values.items()})
        except RuntimeError as exc:
            # complex, or a broadcasting sample of the functional op that cannot run in place
            pytest.skip(f"torch does not run {info.name} on this sample: {exc}")
    return values


@pytest.mark.parametrize("op, info, sample, dtype", _cases("jvp"))
def test_jvp_kernel_matches_torch_func_jvp(op, info, sample, dtype):
    values = _values_or_skip(op, info, sample, dtype)
    diff = _diff_inputs(info, values)
    if not diff:
        outputs = outputs_of(op, call(op, dict(values)))
        primals = [values[a.name] for a in op._schema.arguments]
        tangents = [None] * len(info.differentiable_inputs)
        got = as_tuple(info.jvp(*primals, *tangents, *outputs))
        assert all(g is None for g in got), f"{info.name}: tangent out of no tangent in"
        return
    gen = torch.Generator().manual_seed(1)
    full = {n: random_like(values[n], gen) for n in diff}
    inplace = info.kind == "inplace"
    for present in subsets(diff):
        tangents = {
            n: full[n] if n in present else zeros_like_tree(values[n]) for n in diff
        }
        _, expected = _run_native(op, info, values, diff, tangents)
        call_values = dict(values)
        if inplace:
            call_values["self"] = values["self"].clone()
        outputs = outputs_of(op, call(op, call_values))
        primals = [values[a.name] for a in op._schema.arguments]
        tangent_args = []
        for name in info.differentiable_inputs:
            tangent_args.append(clone_tree(full[name]) if name in present else None)
        got = outputs_of(op, info.jvp(*primals, *tangent_args, *outputs))
        expected_iter = iter(expected)
        for i, name in enumerate(info.outputs):
            if name not in info.differentiable_outputs:
                assert (
                    got[i] is None
                ), f"{info.name}: non-differentiable output {name} got a tangent"
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


@pytest.mark.parametrize("op, info, sample, dtype", _cases("vjp"))
def test_vjp_kernel_matches_autograd(op, info, sample, dtype):
    values = _values_or_skip(op, info, sample, dtype)
    diff = _diff_inputs(info, values)
    if not diff or not info.differentiable_outputs:
        pytest.skip("nothing differentiable")
    leaves, inputs = _leaves(values, diff)
    if info.kind == "inplace":
        inputs["self"] = (
            leaves["self"].clone() if "self" in leaves else values["self"].clone()
        )
    outputs = outputs_of(op, call(op, inputs))
    gen = torch.Generator().manual_seed(2)
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
            g.shape == leaf.shape
        ), f"{info.name}: gradient shape {tuple(g.shape)}, input {tuple(leaf.shape)}"
        torch.testing.assert_close(
            g.to(e.dtype), e, msg=lambda m: f"{info.name} {dtype} gradient\n{m}"
        )
        assert (
            g.dtype == leaf.dtype
        ), f"{info.name}: gradient dtype {g.dtype}, input {leaf.dtype}"
