"""Every op runs exactly once inside a dual level.

A dual forward must leave every mutated argument, every module buffer and the
random-number state exactly as a plain forward leaves them: the mode may not run
an op a second time (for formulas that read the op's outputs while autograd is
tracking), which would update running statistics twice or draw random numbers
twice. Each case runs from the same seed (a) plain and (b) under
`dualgen.forward_ad.dual_level()` with tangents, once with primals requiring grad
(autograd tracking) and once without, and compares bitwise (NaN-aware).

1. Every generated kernel whose schema writes an argument, or that draws random
   numbers, on its spec samples (the kernel tests' cases, kernel_harness.spec_cases).
2. `torch.nn` modules with buffers or random draws, in train and eval mode, with
   parameters requiring grad or detached, the tangent on the input; and through
   `torch.func.functional_call` with tangents on the parameters.
3. The modules' tangents against native `torch.autograd.forward_ad` (float64).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch
import torch.autograd.forward_ad as native_fwAD
from devices import DEVICE, fork_rng
from kernel_harness import (
    call,
    is_differentiable_value,
    random_like,
    spec_cases,
)
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

import dualgen.forward_ad as dual_fwAD
from dualgen.generated.registry import KERNELS

DTYPE = torch.float64
aten = torch.ops.aten


# --------------------------------------------------------------------------------------
# comparison


def _tensors(value, path: str):
    """(path, tensor or other value) for every leaf of a nested output/argument."""
    if isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from _tensors(v, f"{path}[{i}]")
    else:
        yield path, value


def _snapshot(value):
    """A frozen copy (no autograd history, no tangent) of a value or a list of them."""
    if isinstance(value, (list, tuple)):
        return [_snapshot(v) for v in value]
    if isinstance(value, torch.Tensor):
        return value.detach().clone(memory_format=torch.preserve_format)
    return value


def _assert_identical(got, expected, where: str, check_stride: bool = True) -> None:
    """Same structure, shapes, dtypes, strides and bits (NaN equal to NaN)."""
    got_items = list(_tensors(got, where))
    expected_items = list(_tensors(expected, where))
    assert len(got_items) == len(expected_items), f"{where}: structure differs"
    for (path, g), (_, e) in zip(got_items, expected_items):
        if not isinstance(e, torch.Tensor):
            assert g == e, f"{path}: {g!r}, plain run gives {e!r}"
            continue
        assert isinstance(g, torch.Tensor), f"{path}: {g!r}, plain run gives a tensor"
        torch.testing.assert_close(
            g,
            e,
            rtol=0,
            atol=0,
            equal_nan=True,
            check_stride=check_stride,
            msg=lambda m, path=path, g=g, e=e: (
                f"{path} differs from the plain run\n{m}{_listing(g, e)}"
            ),
        )
        # assert_close takes -0.0 for 0.0: compare the bits too, NaN for NaN.
        got_bits, expected_bits = _bits(g), _bits(e)
        assert torch.equal(got_bits, expected_bits), (
            f"{path}: same values as the plain run, other bits (signed zeros or NaN "
            f"payloads){_listing(g, e)}"
        )


_SAME_SIZE_INT = {8: torch.int64, 4: torch.int32, 2: torch.int16, 1: torch.int8}


def _bits(t: torch.Tensor) -> torch.Tensor:
    """The bit patterns of a float or complex tensor (a NaN is any NaN)."""
    t = t.resolve_conj().resolve_neg()
    if t.is_complex():
        t = torch.view_as_real(t)
    if not t.is_floating_point():
        return t
    t = torch.where(torch.isnan(t), torch.nan, t).contiguous()
    return t.view(_SAME_SIZE_INT[t.element_size()])


def _listing(got: torch.Tensor, expected: torch.Tensor) -> str:
    if expected.numel() > 24:
        return ""
    return f"\ndual run:  {got.tolist()}\nplain run: {expected.tolist()}"


def _assert_same_rng(got: torch.Tensor, expected: torch.Tensor, where: str) -> None:
    assert torch.equal(got, expected), (
        f"{where}: the random-number state differs from a plain run's "
        "(random numbers drawn a different number of times)"
    )


# --------------------------------------------------------------------------------------
# 1. ops


def _written(op) -> tuple[str, ...]:
    return tuple(
        a.name
        for a in op._schema.arguments
        if a.alias_info is not None and a.alias_info.is_write
    )


def _is_out_variant(op) -> bool:
    return any(a.is_out for a in op._schema.arguments)


# Ops that mutate an argument their schema does not mark as written.
_HIDDEN_WRITES = {
    aten.native_batch_norm.default: "updates running_mean and running_var in "
    "training, but its schema declares no write",
}


def _selected() -> list:
    """(op, info, why) for every kernel with a side effect."""
    chosen = []
    for op, info in KERNELS.items():
        if _is_out_variant(op):
            continue
        written = _written(op)
        if written:
            why = f"writes {', '.join(written)}"
        elif torch.Tag.nondeterministic_seeded in op.tags:
            why = "draws random numbers"
        elif op in _HIDDEN_WRITES:
            why = _HIDDEN_WRITES[op]
        else:
            continue
        chosen.append((op, info, why))
    return chosen


def _differentiable(info, values) -> list[str]:
    return [n for n in info.differentiable_inputs if is_differentiable_value(values[n])]


def _map(f, value):
    if isinstance(value, list):
        return [None if v is None else f(v) for v in value]
    return f(value)


def _non_leaf_requiring_grad(t: torch.Tensor) -> torch.Tensor:
    # A clone of a leaf: in-place ops may write into it.
    return t.detach().clone().requires_grad_().clone()


@dataclass
class _Effects:
    arguments: dict  # name -> snapshot after the op
    outputs: object
    rng: torch.Tensor


def _run_op(op, info, kernel_case, track: bool, dual: bool) -> _Effects:
    values = kernel_case.values()
    diff = _differentiable(info, values)
    gen = torch.Generator(DEVICE).manual_seed(1)
    tangents = {n: random_like(values[n], gen) for n in diff}
    if track:
        for n in diff:
            values[n] = _map(_non_leaf_requiring_grad, values[n])
    passed = dict(values)
    torch.manual_seed(0)
    if dual:
        with dual_fwAD.dual_level():
            for n in diff:
                if isinstance(values[n], list):
                    passed[n] = [
                        v if v is None else dual_fwAD.make_dual(v, t)
                        for v, t in zip(values[n], tangents[n])
                    ]
                else:
                    passed[n] = dual_fwAD.make_dual(values[n], tangents[n])
            out = call(op, passed)
    else:
        out = call(op, passed)
    rng = torch.get_rng_state()
    # Read after the level: dual tensors are plain again; in-place view ops
    # (t_, squeeze_) changed the geometry of the tensor passed, not of its base.
    arguments = {
        a.name: _snapshot(passed[a.name])
        for a in op._schema.arguments
        if isinstance(passed[a.name], (torch.Tensor, list))
    }
    return _Effects(arguments, _snapshot(out), rng)


def _runs(op, info, kernel_case, track) -> str | None:
    """None if the op runs plainly on the case, else why not."""
    try:
        with fork_rng():
            _run_op(op, info, kernel_case, track, dual=False)
    except Exception as exc:  # noqa: BLE001 - any refusal means: not this case
        return f"{type(exc).__name__}: {str(exc).splitlines()[0][:100]}"
    return None


def _op_cases():
    cases, refused = [], {}
    selected = {info.name: why for _, info, why in _selected()}
    runnable, _ = spec_cases()
    for kernel_case in runnable:
        op, info = kernel_case.op, kernel_case.info
        why = selected.get(info.name)
        if why is None:
            continue
        # With nothing differentiable, requiring grad changes nothing.
        differentiable = _differentiable(info, kernel_case.case.values)
        for track in (True, False) if differentiable else (False,):
            reason = _runs(op, info, kernel_case, track)
            if reason is not None:
                refused.setdefault(info.name, []).append(
                    (kernel_case.id, track, reason)
                )
                continue
            grad = "grad" if track else "nograd"
            cases.append(
                pytest.param(
                    op, info, kernel_case, track, why, id=f"{kernel_case.id}-{grad}"
                )
            )
    return cases, refused


_OP_CASES, _REFUSED = _op_cases()


def _refused_for_requiring_grad(name: str) -> bool:
    """Whether torch refused every tracked case of the op because an argument
    requires grad (autograd's own refusal, as for resize_)."""
    tracked = [why for _, track, why in _REFUSED.get(name, []) if track]
    return bool(tracked) and all(
        "require grad" in why or "not differentiable with respect to argument" in why
        for why in tracked
    )


def test_every_op_with_a_side_effect_is_covered():
    """Each selected op runs on some case, tracked and untracked (the cases
    torch refuses are in `_REFUSED`)."""
    covered: dict[str, set] = {}
    for case in _OP_CASES:
        _, info, _, track, _ = case.values
        covered.setdefault(info.name, set()).add(track)
    runnable, _ = spec_cases()
    missing = []
    for op, info, _ in _selected():
        values = [c.case.values for c in runnable if c.info.name == info.name]
        wanted = {False} | (
            {True} if any(_differentiable(info, v) for v in values) else set()
        )
        if _refused_for_requiring_grad(info.name):
            wanted.discard(True)  # autograd refuses the op on such tensors: resize_
        lacking = wanted - covered.get(info.name, set())
        if lacking:
            missing.append((info.name, sorted(lacking), _REFUSED.get(info.name)))
    assert not missing, f"no runnable case (tracked?) for: {missing}"


def test_selection_includes_the_known_side_effects():
    names = {info.name for _, info, _ in _selected()}
    for name in (
        "native_batch_norm",
        "_native_batch_norm_legit",
        "_batch_norm_with_update",
        "native_dropout",
        "rrelu_with_noise",
        "bernoulli_.float",
        "add_.Tensor",
    ):
        assert name in names


def _tangent_refuses_complex_autograd(info, kernel_case) -> bool:
    values = kernel_case.case.values
    return (
        info.name == "index_reduce_"
        and values["reduce"] == "prod"
        and values["self"].is_complex()
    )


@pytest.mark.parametrize("op, info, kernel_case, track, why", _OP_CASES)
def test_op_runs_once(op, info, kernel_case, track, why):
    plain = _run_op(op, info, kernel_case, track, dual=False)
    if track and _tangent_refuses_complex_autograd(info, kernel_case):
        # index_reduce_ records complex outputs; its functional form, which prod's
        # tangent reads, refuses them: a clear error, not a wrong gradient.
        with pytest.raises(RuntimeError, match="outputs with complex dtype"):
            _run_op(op, info, kernel_case, track, dual=True)
        return
    dual = _run_op(op, info, kernel_case, track, dual=True)
    where = f"{info.name} ({why}), {'tracked' if track else 'untracked'}"
    written = _written(op)
    # Written arguments first, so a failure names what was written twice.
    for name in sorted(plain.arguments, key=lambda n: n not in written):
        _assert_identical(
            dual.arguments[name], plain.arguments[name], f"{where}: argument {name}"
        )
    _assert_identical(dual.outputs, plain.outputs, f"{where}: output")
    _assert_same_rng(dual.rng, plain.rng, where)


# --------------------------------------------------------------------------------------
# 2./3. modules


@dataclass(frozen=True)
class ModuleCase:
    name: str
    make: Callable[[], nn.Module]  # float64
    shape: tuple[int, ...]
    lazy: bool = False
    attention: bool = False  # called as m(x, x, x)

    def __str__(self) -> str:
        return self.name


def _f64(cls, *args, **kwargs):
    return lambda: cls(*args, **kwargs, dtype=DTYPE)


_NORM_SHAPES = {1: (4, 3, 2), 2: (2, 3, 3, 2), 3: (2, 3, 2, 2, 2)}

MODULES = [
    ModuleCase("BatchNorm1d", _f64(nn.BatchNorm1d, 3), (4, 3)),
    ModuleCase("BatchNorm1d-3d_input", _f64(nn.BatchNorm1d, 3), _NORM_SHAPES[1]),
    # Cumulative average: the update reads num_batches_tracked.
    ModuleCase(
        "BatchNorm1d-momentum_None", _f64(nn.BatchNorm1d, 3, momentum=None), (4, 3)
    ),
    ModuleCase("BatchNorm2d", _f64(nn.BatchNorm2d, 3), _NORM_SHAPES[2]),
    ModuleCase("BatchNorm3d", _f64(nn.BatchNorm3d, 3), _NORM_SHAPES[3]),
    *(
        ModuleCase(
            f"InstanceNorm{d}d",
            _f64(
                getattr(nn, f"InstanceNorm{d}d"),
                3,
                affine=True,
                track_running_stats=True,
            ),
            _NORM_SHAPES[d],
        )
        for d in (1, 2, 3)
    ),
    *(
        ModuleCase(
            f"LazyBatchNorm{d}d",
            _f64(getattr(nn, f"LazyBatchNorm{d}d")),
            _NORM_SHAPES[d],
            lazy=True,
        )
        for d in (1, 2, 3)
    ),
    # No buffers: controls.
    ModuleCase("GroupNorm", _f64(nn.GroupNorm, 2, 4), (2, 4, 3)),
    ModuleCase("LayerNorm", _f64(nn.LayerNorm, 4), (2, 3, 4)),
    # Random draws in training.
    ModuleCase("Dropout", lambda: nn.Dropout(0.5), (3, 4)),
    ModuleCase("Dropout2d", lambda: nn.Dropout2d(0.5), (2, 3, 2, 2)),
    ModuleCase("AlphaDropout", lambda: nn.AlphaDropout(0.5), (3, 4)),
    ModuleCase("FeatureAlphaDropout", lambda: nn.FeatureAlphaDropout(0.5), (2, 3, 4)),
    ModuleCase("RReLU", lambda: nn.RReLU(0.1, 0.3), (3, 4)),
    ModuleCase(
        "TransformerEncoderLayer",
        _f64(nn.TransformerEncoderLayer, 4, 2, 8, dropout=0.5, batch_first=True),
        (2, 3, 4),
    ),
    ModuleCase(
        "MultiheadAttention",
        _f64(nn.MultiheadAttention, 4, 2, dropout=0.5, batch_first=True),
        (2, 3, 4),
        attention=True,
    ),
]

STEPS = 2  # two forwards: the second reads the buffers the first updated


def _has_parameters(case: ModuleCase) -> bool:
    return case.lazy or any(True for _ in case.make().parameters())


@contextlib.contextmanager
def _composite_attention():
    """The attention modules' fused kernels (the MHA fast path, CPU flash attention)
    have no forward-AD formula, natively or in dualgen: run their composite form."""
    fastpath = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        with sdpa_kernel(SDPBackend.MATH):
            yield
    finally:
        torch.backends.mha.set_fastpath_enabled(fastpath)


@dataclass
class _Forward:
    outputs: list  # per step, flattened
    tangents: list  # per step, flattened (None: no tangent)
    buffers: dict
    parameters: dict
    rng: torch.Tensor


def _module(case: ModuleCase, train: bool, detached: bool, x: torch.Tensor):
    torch.manual_seed(0)
    m = case.make()
    if case.lazy and detached:
        # Parameters of a lazy module exist after a forward (eval: no update).
        m.eval()
        with torch.no_grad():
            m(x)
    m.train(train)
    if detached:
        m.requires_grad_(False)
    return m


def _flat(out) -> list:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _forward(case, train: bool, grad: str, api, functional: bool) -> _Forward:
    """`grad`: "params" (parameters require grad), "detached" (nothing does) or
    "input" (parameters detached, the input a non-leaf requiring grad).
    `api`: None (plain), dualgen's or native forward AD. `functional`: tangents on
    the parameters through functional_call, else on the input."""
    gen = torch.Generator(DEVICE).manual_seed(1)
    xs = [torch.randn(case.shape, generator=gen, dtype=DTYPE) for _ in range(STEPS)]
    m = _module(case, train, grad != "params", xs[0].clone())
    if functional and case.lazy:
        with torch.no_grad():
            m.eval()(xs[0].clone())
            m.train(train)
    if grad == "input":
        xs = [_non_leaf_requiring_grad(x) for x in xs]
    x_tangents = [torch.randn(x.shape, generator=gen, dtype=DTYPE) for x in xs]
    outputs, tangents = [], []
    torch.manual_seed(0)
    with contextlib.ExitStack() as stack:
        if case.attention or "Transformer" in case.name:
            stack.enter_context(_composite_attention())
        if api is not None:
            stack.enter_context(api.dual_level())
        for x, t in zip(xs, x_tangents):
            if functional:
                params = dict(m.named_parameters())
                if api is not None:
                    p_gen = torch.Generator(DEVICE).manual_seed(2)
                    params = {
                        n: api.make_dual(
                            p, torch.randn(p.shape, generator=p_gen, dtype=p.dtype)
                        )
                        for n, p in params.items()
                    }
                inputs = (x,) * (3 if case.attention else 1)
                out = torch.func.functional_call(m, params, inputs)
            else:
                x_in = x if api is None else api.make_dual(x, t)
                out = m(*(x_in,) * (3 if case.attention else 1))
            for o in _flat(out):
                if api is None:
                    outputs.append(_snapshot(o))
                    tangents.append(None)
                else:
                    primal, tangent = api.unpack_dual(o)
                    outputs.append(_snapshot(primal))
                    tangents.append(_snapshot(tangent))
    rng = torch.get_rng_state()
    return _Forward(
        outputs,
        tangents,
        {n: _snapshot(b) for n, b in m.named_buffers()},
        {n: _snapshot(p) for n, p in m.named_parameters()},
        rng,
    )


def _assert_same_effects(got: _Forward, plain: _Forward, where: str) -> None:
    assert sorted(got.buffers) == sorted(plain.buffers), f"{where}: buffers differ"
    for name in plain.buffers:
        _assert_identical(got.buffers[name], plain.buffers[name], f"{where}: {name}")
    for name in plain.parameters:
        _assert_identical(
            got.parameters[name], plain.parameters[name], f"{where}: {name}"
        )
    _assert_identical(got.outputs, plain.outputs, f"{where}: outputs")
    _assert_same_rng(got.rng, plain.rng, where)


def _assert_tangents_match(got: _Forward, native: _Forward, where: str) -> None:
    assert len(got.tangents) == len(native.tangents)
    for i, (g, e) in enumerate(zip(got.tangents, native.tangents)):
        if e is None and g is None:
            continue
        ref = e if e is not None else torch.zeros_like(g)
        torch.testing.assert_close(
            g if g is not None else torch.zeros_like(e),
            ref,
            msg=lambda m, i=i: f"{where}: tangent of output {i} vs native\n{m}",
        )


def _module_cases(functional: bool) -> list:
    cases = []
    for case in MODULES:
        params = _has_parameters(case)
        if functional and not params:
            continue
        grads = ["params", "detached"]
        if not functional:
            grads = (grads if params else ["detached"]) + ["input"]
        for train in (True, False):
            for grad in grads:
                mode = "train" if train else "eval"
                cases.append(
                    pytest.param(case, train, grad, id=f"{case.name}-{mode}-{grad}")
                )
    return cases


def _check_module(case, train, grad, functional):
    plain = _forward(case, train, grad, None, functional)
    dual = _forward(case, train, grad, dual_fwAD, functional)
    native = _forward(case, train, grad, native_fwAD, functional)
    mode = "train" if train else "eval"
    where = f"{case.name} {mode}, {grad} requiring grad"
    # The reference itself: native forward AD has no side effects of its own.
    _assert_same_effects(native, plain, f"{where}, native forward AD")
    _assert_same_effects(dual, plain, f"{where}, dualgen")
    _assert_tangents_match(dual, native, where)


@pytest.mark.parametrize("case, train, grad", _module_cases(functional=False))
def test_module_runs_once_tangent_on_input(case, train, grad):
    _check_module(case, train, grad, functional=False)


@pytest.mark.parametrize("case, train, grad", _module_cases(functional=True))
def test_module_runs_once_tangents_on_parameters(case, train, grad):
    _check_module(case, train, grad, functional=True)
