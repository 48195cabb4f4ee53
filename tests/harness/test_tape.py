"""dualgen.harness.tape.Tape: reverse mode over the generated VJP kernels.

`tape.grad` must equal `torch.autograd.grad` on the same function (same random
cotangents), None where autograd's is None; where autograd refuses (in-place
writes over saved values), closed forms are the reference.
"""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from dualgen.harness.tape import Tape

F64, C128 = torch.float64, torch.complex128


def rand(*shape, dtype=F64, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g, dtype=F64)
    if dtype.is_complex:
        x = torch.complex(x, torch.randn(shape, generator=g, dtype=F64))
    return x.to(dtype)


def _tuple(value) -> tuple:
    return tuple(value) if isinstance(value, (list, tuple)) else (value,)


def _differentiable(t) -> bool:
    return isinstance(t, torch.Tensor) and (t.is_floating_point() or t.is_complex())


def cotangents(outputs, seed=1) -> list:
    """A random cotangent per differentiable output, None for the others."""
    result = []
    for k, o in enumerate(outputs):
        result.append(
            rand(*o.shape, dtype=o.dtype, seed=seed + k) if _differentiable(o) else None
        )
    return result


def tape_grad(func, inputs, seed=1):
    xs = [x.clone() for x in inputs]
    with Tape() as tape:
        tape.watch(*xs)
        outputs = _tuple(func(*xs))
    return tape.grad(outputs, xs, cotangents(outputs, seed))


def autograd_grad(func, inputs, seed=1):
    xs = [x.clone().requires_grad_() for x in inputs]
    outputs = _tuple(func(*xs))
    pairs = [
        (o, g)
        for o, g in zip(outputs, cotangents(outputs, seed))
        if g is not None and o.requires_grad
    ]
    return torch.autograd.grad(
        [o for o, _ in pairs], xs, [g for _, g in pairs], allow_unused=True
    )


def assert_grads_equal(ours, theirs):
    assert len(ours) == len(theirs)
    for k, (a, b) in enumerate(zip(ours, theirs)):
        if b is None:
            assert a is None, f"input {k}: autograd gives no gradient, the tape {a}"
        else:
            assert a is not None, f"input {k}: the tape gives no gradient"
            assert a.dtype == b.dtype
            assert_close(a, b)


# --------------------------------------------------------------------------------------
# functions both can differentiate


def view_inplace_then_base(x):
    b = x.clone()
    v = b[1:].t()
    v.mul_(2)
    v.add_(x[:2].t().sin())
    return b.exp()


def view_inplace_then_view_and_base(x):
    b = x.clone()
    row = b.select(0, 1)
    row.zero_()
    b[0].fill_(3.0)
    return b * x, row.exp()


def setitem_into_zeros(x):
    y = torch.zeros(5, 3, dtype=x.dtype)
    y[1:3] = x
    y[0] = x[0] * 2
    y[:, 2] = y[:, 1] * 2
    return y.sin()


def inplace_on_input_clone(x):
    y = x.clone()
    y.mul_(x)
    y.exp_()
    return y


def max_values_only(x):
    values, _ = x.max(1)
    return values.sin()


def max_with_indices(x):
    return x.max(0)


def under_no_grad(x, z):
    with torch.no_grad():
        c = z * 2 + x
    return x * c


def no_grad_only(x, z):
    with torch.no_grad():
        w = z.exp()
    return x.sin() + w


def unused_input(x, y):
    return x.sin()


def as_strided_read(x):
    return x.as_strided((2, 2), (1, 2), 1).exp()


def expand_broadcast(x):
    return x.expand(3, 4) * torch.arange(12.0, dtype=x.dtype).reshape(3, 4)


def cat_softmax(a, b):
    return torch.cat([a, b.unsqueeze(0)]).softmax(1)


def write_real_part_of_complex(z):
    w = z.clone()
    torch.view_as_real(w)[:, 0].mul_(3)  # scales the real parts in place
    return w * z.conj(), torch.view_as_real(z).sin()


def write_complex_view_of_real(x):
    y = x.clone()
    c = torch.view_as_complex(y)
    c.mul_(torch.view_as_complex(x.flip(0).contiguous()))
    return y.exp(), c.imag


def read_real_and_imag_after_write(z):
    w = z.clone()
    re, im = w.real, w.imag
    w.mul_(1j)
    return re * im, w.abs()


MASK = torch.tensor([True, False, True])

CASES = {
    "chain": (lambda x: (x.sin() * x).tanh().sum(0) / 3, (rand(3, 4),)),
    "matmul": (lambda a, b: (a @ b).log_softmax(1), (rand(2, 3), rand(3, 4, seed=2))),
    "reductions": (lambda x: x.amax(1) + x.mean(0)[:3] * x.sum(), (rand(3, 4),)),
    "view_inplace_then_base": (view_inplace_then_base, (rand(3, 2),)),
    "view_inplace_then_view_and_base": (view_inplace_then_view_and_base, (rand(3, 2),)),
    "setitem_into_zeros": (setitem_into_zeros, (rand(2, 3),)),
    "inplace_on_input_clone": (inplace_on_input_clone, (rand(3),)),
    "max_values_only": (max_values_only, (rand(3, 4),)),
    "max_with_indices": (max_with_indices, (rand(3, 4),)),
    "under_no_grad": (under_no_grad, (rand(3), rand(3, seed=2))),
    "no_grad_only": (no_grad_only, (rand(3), rand(3, seed=2))),
    "unused_input": (unused_input, (rand(3), rand(3, seed=2))),
    "as_strided": (as_strided_read, (rand(6),)),
    "expand": (expand_broadcast, (rand(4),)),
    "cat_softmax": (cat_softmax, (rand(2, 3), rand(3, seed=2))),
    "stack_where": (
        lambda a, b: torch.stack([torch.where(MASK, a, b * b), a], 1),
        (rand(3), rand(3, seed=2)),
    ),
    "complex_chain": (
        lambda z, x: (z.exp() * x).sum(0) * z[0].conj(),
        (rand(3, 2, dtype=C128), rand(3, 2, seed=2)),
    ),
    "complex_to_real": (lambda z: (z * z).abs() + z.abs(), (rand(3, dtype=C128),)),
    "write_real_part_of_complex": (
        write_real_part_of_complex,
        (rand(3, 2, dtype=C128),),
    ),
    "write_complex_view_of_real": (write_complex_view_of_real, (rand(3, 2),)),
    "read_real_and_imag_after_write": (
        read_real_and_imag_after_write,
        (rand(4, dtype=C128),),
    ),
    "complex_view_inplace": (
        lambda z: z.clone().t().mul_(z.t().sin()).exp(),
        (rand(2, 3, dtype=C128),),
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_tape_grad_equals_autograd(name):
    func, inputs = CASES[name]
    ours, theirs = tape_grad(func, inputs), autograd_grad(func, inputs)
    assert_grads_equal(ours, theirs)


def test_no_grad_cuts_the_path_through_a_watched_value():
    # c = 3 x computed under no_grad is a constant: d(x * c)/dx = c, not 6 x.
    x = rand(3)

    def func(x):
        return under_no_grad(x, x)

    (g,) = tape_grad(func, (x,))
    assert_grads_equal((g,), autograd_grad(func, (x,)))
    assert_close(g, cotangents([x])[0] * 3 * x)


def test_grad_of_several_outputs_and_absent_cotangents():
    x = rand(2, 3)
    with Tape() as tape:
        tape.watch(x)
        a, b = x.sin(), x.exp()
    ga, gb = rand(2, 3, seed=3), rand(2, 3, seed=4)
    (both,) = tape.grad((a, b), (x,), (ga, gb))
    assert_close(both, ga * x.cos() + gb * x.exp())
    (only_b,) = tape.grad((a, b), (x,), (None, gb))
    assert_close(only_b, gb * x.exp())
    # Running backwards again gives the same.
    (again,) = tape.grad((a, b), (x,), (ga, gb))
    assert torch.equal(again, both)


def test_integer_output_cotangent_is_ignored():
    x = rand(3, 4)
    with Tape() as tape:
        tape.watch(x)
        values, indices = x.max(1)
    g = rand(3, seed=3)
    (gx,) = tape.grad((values, indices), x, (g, torch.ones(3)))
    expected = torch.zeros_like(x)
    expected[torch.arange(3), x.argmax(1)] = g
    assert_close(gx, expected)
    (none,) = tape.grad(indices, x, torch.ones(3))
    assert none is None


# --------------------------------------------------------------------------------------
# in-place writes autograd refuses: closed forms


def test_inplace_over_a_saved_value():
    # exp_ saves its result, which mul_ then overwrites: autograd raises, the tape
    # copies the saved value before the write.
    x = rand(4)

    def func(x):
        y = x.clone()
        y.exp_()
        y.mul_(x)
        return y

    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        autograd_grad(func, (x,))
    (g,) = tape_grad(func, (x,))
    cotangent = cotangents([x])[0]
    assert_close(g, cotangent * x.exp() * (1 + x))


def test_write_through_a_view_over_a_saved_value():
    x = rand(3)

    def func(x):
        y = x.clone()
        s = y.sin()  # saves y
        y[0].mul_(3)
        return s + y

    (g,) = tape_grad(func, (x,))
    cotangent = cotangents([x])[0]
    assert_close(g, cotangent * (x.cos() + torch.tensor([3.0, 1.0, 1.0], dtype=F64)))


def test_inplace_on_a_watched_input_differentiates_its_original_value():
    x = rand(3)
    watched = x.clone()
    with Tape() as tape:
        tape.watch(watched)
        watched.mul_(2)
        y = watched.sin()
    g = rand(3, seed=3)
    (gx,) = tape.grad(y, watched, g)
    assert_close(gx, g * 2 * (2 * x).cos())


# --------------------------------------------------------------------------------------
# errors


def test_grad_of_an_unwatched_input_raises():
    x, other = rand(3), rand(3, seed=2)
    with Tape() as tape:
        tape.watch(x)
        y = x.sin() * other
    with pytest.raises(ValueError, match="not watched"):
        tape.grad(y, (x, other), torch.ones(3, dtype=F64))
    with pytest.raises(ValueError, match="not watched"):
        tape.grad(y, x.clone(), torch.ones(3, dtype=F64))  # equal, not the same


def test_watch_rejects_integer_tensors_and_shared_memory():
    x = rand(2, 3)
    with Tape() as tape:
        with pytest.raises(TypeError, match="floating point and complex"):
            tape.watch(torch.arange(3))
        tape.watch(x)
        with pytest.raises(ValueError, match="share memory"):
            tape.watch(x[0])


def test_op_without_vjp_on_a_watched_path_raises():
    x = rand(3).abs() + 1
    with Tape() as tape:
        tape.watch(x)
        constant = torch.special.zeta(x.detach().clone() + 1, x.detach().clone())
        assert constant.shape == (3,)  # no watched value reaches it: fine
        with pytest.raises(NotImplementedError, match="special_zeta"):
            torch.special.zeta(x, x + 1)


@pytest.mark.parametrize(
    "func",
    [
        pytest.param(lambda x: torch.where(x > 0, x, x.exp()), id="comparison"),
        pytest.param(lambda x: x * x.argmax(), id="argmax"),
    ],
)
def test_non_differentiable_outputs_need_no_rule(func):
    x = rand(4)
    assert_grads_equal(tape_grad(func, (x,)), autograd_grad(func, (x,)))


def test_watch_a_tensor_made_inside_the_tape():
    x = rand(3)
    with Tape() as tape:
        y = x.clone()
        tape.watch(y)
        z = y.sin()
    (g,) = tape.grad(z, y, torch.ones(3, dtype=F64))
    assert_close(g, x.cos())
