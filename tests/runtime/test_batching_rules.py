"""The element-wise batching rules dualgen gives torch's legacy vmap
(csrc/dualgen/batching.cpp) compute what legacy vmap's loop computes: every op
they are registered for, on arguments batched in each position, nested vmaps,
0-d arguments batched and not (type promotion as each element sees it), against
the same call with the rules removed (torch's for-loop fallback)."""

from __future__ import annotations

import itertools

import pytest
import torch
from devices import DEVICE
from torch._vmap_internals import _vmap

from dualgen import cpp
from dualgen.hot_path import policy as hot_path

pytestmark = pytest.mark.skipif(
    cpp.state() != "built", reason="C++ extension not built"
)


@pytest.fixture(scope="module", autouse=True)
def _cpp_backend(cpp_kernels_for_module):
    """The C++ kernels, whose batching rules these tests hold (conftest)."""


# The tensor arguments' shapes, in turn: broadcasting logical ranks and sizes;
# for ops that take one shape only (gelu_backward), that shape.
SHAPES = ((3, 4), (4,), (3, 1), ())
ONE_SHAPE = ((3, 4),) * 4


def _value(argument, dtype, gen, shape):
    """A value for one schema argument: tensors of `dtype` and `shape` (masks
    and conditions boolean), numbers for scalars, defaults elsewhere."""
    kind = str(argument.type)
    if kind.startswith("Tensor"):
        if argument.name in ("mask", "condition") or dtype == torch.bool:
            return torch.rand(shape, generator=gen) > 0.5
        if dtype.is_floating_point:
            return torch.rand(shape, generator=gen, dtype=dtype) + 0.5
        return torch.randint(1, 5, shape, generator=gen, dtype=dtype)
    if kind.startswith("Scalar") or kind in ("float", "number"):
        return 0.75 if dtype.is_floating_point else (dtype != torch.bool) + 1
    if kind == "int":
        return 2
    if argument.has_default_value():
        return argument.default_value
    return None


def _invoke(op, values):
    """op called with one value per schema argument (keyword-only ones by name)."""
    arguments = op._schema.arguments
    args = [v for a, v in zip(arguments, values) if not a.kwarg_only]
    kwargs = {a.name: v for a, v in zip(arguments, values) if a.kwarg_only}
    return op(*args, **kwargs)


def _is_tensor(argument) -> bool:
    return str(argument.type).startswith("Tensor")


def _call(op, floating=torch.float64):
    """Arguments torch takes for `op` (`floating`, else int64, else bool; shapes
    that broadcast, else one shape), and which of them are tensors; None if none
    of these works."""
    schema = op._schema
    for dtype, shape_set in itertools.product(
        (floating, torch.int64, torch.bool), (SHAPES, ONE_SHAPE)
    ):
        gen = torch.Generator(DEVICE).manual_seed(0)
        shapes = iter(shape_set)
        args = [
            _value(a, dtype, gen, next(shapes) if _is_tensor(a) else None)
            for a in schema.arguments
        ]
        positions = [i for i, v in enumerate(args) if isinstance(v, torch.Tensor)]
        if not positions:
            return None
        try:
            _invoke(op, args)
        except (RuntimeError, TypeError, ValueError, NotImplementedError):
            continue
        return args, positions
    return None


def _batched(op, args, batched_positions, nested: bool):
    """op under vmap, the arguments at `batched_positions` batched (size 2,
    and size 3 in an outer vmap when nested)."""
    sizes = (3, 2) if nested else (2,)
    gen = torch.Generator(DEVICE).manual_seed(1)
    batches = {}
    for i in batched_positions:
        value = args[i]
        stacked = torch.stack([value * (1 + 0.1 * k) for k in range(6)])
        if value.dtype == torch.bool:
            stacked = torch.rand(6, *value.shape, generator=gen) > 0.5
        batches[i] = stacked[: sizes[0] * (sizes[1] if nested else 1)].reshape(
            *sizes, *value.shape
        )

    def run(*values):
        full = list(args)
        for i, v in zip(batches, values):
            full[i] = v
        return _invoke(op, full)

    fn = _vmap(_vmap(run)) if nested else _vmap(run)
    return fn(*batches.values())


def _ops():
    return sorted(hot_path.batching_ops(), key=str)


def test_the_rules_cover_the_element_wise_ops_legacy_vmap_loops_over():
    names = {str(op) for op in hot_path.batching_ops()}
    assert "aten.tanh_backward.default" in names
    assert "aten.where.self" in names
    assert len(names) > 100


# float32 too: CPU kernels take other paths there (gelu_backward's through
# oneDNN, which does not broadcast the batch dimensions).
@pytest.mark.parametrize("floating", [torch.float64, torch.float32], ids=str)
@pytest.mark.parametrize("op", _ops(), ids=str)
def test_a_rule_computes_what_the_loop_computes(op, floating):
    found = _call(op, floating)
    if found is None:
        pytest.skip("no float64, int64 or bool arguments torch takes")
    args, positions = found
    patterns = [[p] for p in positions] + [positions]
    for batched_positions in patterns:
        for nested in (False, True):
            hot_path.set_batching_rules(False)
            try:
                expected = _batched(op, args, batched_positions, nested)
            except RuntimeError:
                continue  # legacy vmap refuses this pattern either way
            finally:
                hot_path.set_batching_rules(True)
            got = _batched(op, args, batched_positions, nested)
            torch.testing.assert_close(got, expected, equal_nan=True)


@pytest.mark.parametrize("nested", [False, True])
def test_a_batched_0d_argument_promotes_as_each_element_does(nested):
    """A batched 0-d float64 against a float32 tensor: each element's result is
    float32 (a 0-d tensor does not promote a dimensioned one), as the loop's;
    nested, the float32 tensor batched by the outer vmap."""
    xs = torch.rand(2, 3, dtype=torch.float32)
    grads = torch.rand(4, dtype=torch.float64)  # a batch of 0-d values

    def run():
        if nested:
            inner = lambda x: _vmap(lambda g: torch.ops.aten.tanh_backward(g, x))(grads)
            return _vmap(inner)(xs)
        return _vmap(lambda g: torch.ops.aten.tanh_backward(g, xs[0]))(grads)

    out = run()
    hot_path.set_batching_rules(False)
    try:
        expected = run()
    finally:
        hot_path.set_batching_rules(True)
    assert out.dtype == expected.dtype == torch.float32
    torch.testing.assert_close(out, expected)


@pytest.mark.parametrize("dims", [(0, -1), (1, 2), (-2, -1), (0, 0), (2, 2)])
@pytest.mark.parametrize("nested", [False, True])
def test_flatten_of_a_batch_is_each_elements(dims, nested):
    """flatten, a view legacy vmap's loop refuses (the max-pooling kernels'
    formulas call it): each element flattened, and still a view of the batch."""
    start, end = dims
    batch = torch.randn(3, 2, 4, 5, 6, dtype=torch.float64)

    def flat(t):
        return t.flatten(start, end)

    if nested:
        got = _vmap(_vmap(flat))(batch)
        expected = torch.stack(
            [torch.stack([e.flatten(start, end) for e in row]) for row in batch]
        )
    else:
        batch = batch[0]
        got = _vmap(flat)(batch)
        expected = torch.stack([e.flatten(start, end) for e in batch])
    torch.testing.assert_close(got, expected, rtol=0, atol=0)
    same_memory = got.untyped_storage().data_ptr() == batch.untyped_storage().data_ptr()
    assert same_memory, "not a view of the batch"


def test_flatten_of_a_batch_of_0d_values():
    got = _vmap(lambda t: t.flatten())(torch.arange(4.0))
    torch.testing.assert_close(got, torch.arange(4.0).reshape(4, 1))
