"""Custom autograd.Functions under dualgen where native forward AD has no answer.

Native refuses a Function without `jvp`; dualgen derives one from `backward`, and
the result must equal native's with the jvp written out (a subclass adding it).
`dualgen.register_jvp(MyFunction)` overrides; nested levels (torch.func's nested
jvp of a Function gives 0 second derivatives, so the references are analytic and
the same program with aten ops); torch.utils.checkpoint.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch
import torch.autograd.forward_ad as native_fwAD
from test_custom_function import (  # noqa: F401 - clean_state is an autouse fixture
    CTX_HOOKS,
    DTYPE,
    STE,
    CtxMul,
    Diagonal,
    GradReverse,
    Identity,
    MulInPlace,
    SetupMul,
    SinCos,
    SortNonDiff,
    apply_dual,
    assert_same,
    assert_unpatched,
    clean_state,
    patched,
    randn,
    run_both,
    unpack_all,
)
from torch import nn
from torch.autograd.function import BackwardCFunction, Function, once_differentiable
from torch.testing import assert_close
from torch.utils.checkpoint import checkpoint

import dualgen
import dualgen.forward_ad as dual_fwAD

# --------------------------------------------------------------------------------------
# Functions with jvp


class MySin(Function):
    """sin with setup_context, save_for_forward and save_for_backward."""

    @staticmethod
    def forward(x):
        return x.sin()

    @staticmethod
    def setup_context(ctx, inputs, output):
        (x,) = inputs
        ctx.save_for_forward(x)
        ctx.save_for_backward(x)

    @staticmethod
    def jvp(ctx, t):
        (x,) = ctx.saved_tensors
        return t * x.cos()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * x.cos()


class GradClip(Function):
    """Identity forward (a copy), gradient clamped backward."""

    @staticmethod
    def forward(ctx, x, bound):
        ctx.bound = bound
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        return g.clamp(-ctx.bound, ctx.bound), None

    @staticmethod
    def jvp(ctx, t, _):
        return t


# --------------------------------------------------------------------------------------
# models, reverse-over-forward (functions with jvp, against native)


class Net(nn.Module):
    def __init__(self, middle):
        super().__init__()
        self.first = nn.Linear(4, 6, dtype=DTYPE)
        self.second = nn.Linear(6, 2, dtype=DTYPE)
        self.middle = middle

    def forward(self, x):
        return self.second(torch.tanh(self.middle(self.first(x))))


MIDDLES = {
    "grad-reverse": lambda h: GradReverse.apply(h, 0.5),
    "grad-clip": lambda h: GradClip.apply(h, 0.1),
    "ste": STE.apply,
    "sin": MySin.apply,
}


@pytest.mark.parametrize("middle", list(MIDDLES))
def test_model_with_input_and_parameter_tangents(middle):
    torch.manual_seed(0)
    net = Net(MIDDLES[middle])
    x, tx = randn(3, 4), randn(3, 4)
    tangents = {name: torch.randn_like(p) for name, p in net.named_parameters()}

    def program(fwAD):
        with fwAD.dual_level():
            params = {
                name: fwAD.make_dual(p.detach(), tangents[name])
                for name, p in net.named_parameters()
            }
            out = torch.func.functional_call(net, params, (fwAD.make_dual(x, tx),))
            return fwAD.unpack_dual(out)

    run_both(program)


@pytest.mark.parametrize("middle", list(MIDDLES))
def test_reverse_over_forward_through_a_model(middle):
    torch.manual_seed(0)
    net = Net(MIDDLES[middle])
    x, tx = randn(3, 4), randn(3, 4)

    def program(fwAD):
        params = list(net.parameters())
        with fwAD.dual_level():
            out = net(fwAD.make_dual(x, tx))
            primal, tangent = fwAD.unpack_dual(out)
            loss = (tangent**2).sum() + primal.sum()
            return primal, tangent, torch.autograd.grad(loss, params)

    run_both(program)


def test_reverse_over_forward_through_the_function_and_its_tangent():
    x, t = randn(4), randn(4)

    def program(fwAD):
        xr, tr = x.clone().requires_grad_(), t.clone().requires_grad_()
        with fwAD.dual_level():
            primal, tangent = fwAD.unpack_dual(MySin.apply(fwAD.make_dual(xr, tr)))
            (tangent * primal).sum().backward()
        return primal, tangent, xr.grad, tr.grad

    run_both(program)


def test_backward_of_a_function_applied_inside_a_level_is_the_users():
    x, t = randn(4) * 3, randn(4)

    def program(fwAD):
        xr = x.clone().requires_grad_()
        with fwAD.dual_level():
            out = STE.apply(fwAD.make_dual(xr, t))
            kind = type(out.grad_fn).__name__
            (out * torch.arange(4.0, dtype=DTYPE)).sum().backward()
        return kind, xr.grad

    kind, grad = run_both(program)
    assert kind == "STEBackward" and grad.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_no_grad_inside_the_level_still_gives_tangents():
    def program(fwAD):
        with torch.no_grad():
            return apply_dual(MySin.apply, (randn(3), randn(3)))(fwAD)

    run_both(program)


# --------------------------------------------------------------------------------------
# Functions with jvp and backward; dualgen derives the jvp of their twins without


def without_jvp(cls: type) -> type:
    """cls with the jvp taken away (native then refuses it)."""
    return type(f"{cls.__name__}NoJvp", (cls,), {"jvp": staticmethod(Function.jvp)})


class MulExp(Function):
    """(x * y, exp(x)); backward reads needs_input_grad and saved tensors."""

    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_forward(x, y)
        ctx.save_for_backward(x, y)
        return x * y, x.exp()

    @staticmethod
    def jvp(ctx, xt, yt):
        x, y = ctx.saved_tensors
        return xt * y + x * yt, xt * x.exp()

    @staticmethod
    def backward(ctx, g_prod, g_exp):
        x, y = ctx.saved_tensors
        gx = gy = None
        if ctx.needs_input_grad[0]:
            gx = g_prod * y.conj() + g_exp * x.exp().conj()
        if ctx.needs_input_grad[1]:
            gy = g_prod * x.conj()
        return gx, gy


class Scale(Function):
    """x * factor with non-tensor arguments and outputs, setup_context style."""

    @staticmethod
    def forward(x, factor, label):
        return x * factor, label, (x > 0).to(x.dtype)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.factor = inputs[1]
        ctx.mark_non_differentiable(output[2])

    @staticmethod
    def jvp(ctx, t, _, __):
        return t * ctx.factor, None, None

    @staticmethod
    def backward(ctx, g, _, __):
        return g * ctx.factor, None, None


class DoubleInPlace(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.mark_dirty(x)
        return x.mul_(2)

    @staticmethod
    def jvp(ctx, t):
        return t.mul_(2)

    @staticmethod
    def backward(ctx, g):
        return 2 * g


class FirstRow(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.shape = x.shape
        return x[0]

    @staticmethod
    def jvp(ctx, t):
        return t[0]

    @staticmethod
    def backward(ctx, g):
        grad = g.new_zeros(ctx.shape)
        grad[0] = g
        return grad


class SinVjp(Function):
    """Overrides vjp instead of backward."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_forward(x)
        ctx.save_for_backward(x)
        return x.sin()

    @staticmethod
    def jvp(ctx, t):
        (x,) = ctx.saved_tensors
        return t * x.cos()

    @staticmethod
    def vjp(ctx, g):
        (x,) = ctx.saved_tensors
        return g * x.cos()


def run_twins(program, cls, seed=0):
    """program(fwAD, F): dualgen with cls's jvp derived from its backward equals
    native with cls's jvp."""
    torch.manual_seed(seed)
    expected = program(native_fwAD, cls)
    torch.manual_seed(seed)
    actual = program(dual_fwAD, without_jvp(cls))
    assert_same(actual, expected)
    return actual


def on_pairs(fn, *pairs):
    """program(fwAD, F) applying F through fn to duals made from pairs."""
    return lambda fwAD, F: apply_dual(lambda *a: fn(F, *a), *pairs)(fwAD)


# --------------------------------------------------------------------------------------
# the jvp derived from backward


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128])
@pytest.mark.parametrize("which", ["x", "y", "both"])
def test_derived_jvp_with_several_inputs_and_outputs(dtype, which):
    x, y = randn(3, dtype=dtype), randn(3, dtype=dtype)
    tx = randn(3, dtype=dtype) if which != "y" else None
    ty = randn(3, dtype=dtype) if which != "x" else None
    program = on_pairs(lambda F, a, b: F.apply(a, b), (x, tx), (y, ty))
    prod, exp = run_twins(program, MulExp)
    assert prod[1] is not None and exp[1] is not None  # zeros where y alone


def test_derived_jvp_of_a_straight_through_estimator():
    x, t = randn(5) * 3, randn(5)
    _, tangent = apply_dual(without_jvp(STE).apply, (x, t))(dual_fwAD)
    assert_close(tangent, t)


@pytest.mark.parametrize(
    "cls, shape",
    [(Scale, (4,)), (DoubleInPlace, (4,)), (FirstRow, (2, 3)), (SinVjp, (4,))],
    ids=["non-tensors", "mark_dirty", "view", "vjp"],
)
def test_derived_jvp_equals_the_written_one(cls, shape):
    args = (3.0, "label") if cls is Scale else ()

    def program(fwAD, F):
        with fwAD.dual_level():
            x = fwAD.make_dual(randn(*shape), randn(*shape)).clone()
            tangent_before = fwAD.unpack_dual(x).tangent
            out = F.apply(x, *args)
            result = unpack_all(fwAD, out)
            return result, fwAD.unpack_dual(x).tangent is tangent_before

    run_twins(program, cls)


def test_function_without_differentiable_outputs_needs_no_jvp():
    class Order(Function):  # neither jvp nor backward: no tangent to derive
        @staticmethod
        def forward(ctx, x):
            return x.argmax(), x.sort().indices

    argmax, indices = apply_dual(Order.apply, (randn(4), randn(4)))(dual_fwAD)
    assert argmax[1] is None and indices[1] is None


def test_reverse_over_derived_forward():
    x, y, tx, ty = randn(3), randn(3), randn(3), randn(3)

    def program(fwAD, F):
        leaves = [v.clone().requires_grad_() for v in (x, y, tx, ty)]
        with fwAD.dual_level():
            a = fwAD.make_dual(leaves[0], leaves[2])
            b = fwAD.make_dual(leaves[1], leaves[3])
            prod, exp = F.apply(a, b)
            tangents = fwAD.unpack_dual(prod).tangent, fwAD.unpack_dual(exp).tangent
            loss = (tangents[0] * tangents[1]).sum() + (prod * exp).sum()
            return tangents, torch.autograd.grad(loss, leaves)

    run_twins(program, MulExp)


def test_derived_jvp_under_no_grad():
    def program(fwAD, F):
        with torch.no_grad():
            return apply_dual(F.apply, (randn(4), randn(4)))(fwAD)

    run_twins(program, SinVjp)


def with_backward(backward, once=False):
    class Broken(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

    if backward is not None:
        Broken.backward = staticmethod(
            once_differentiable(backward) if once else backward
        )
    return Broken


def numpy_backward(ctx, g):
    return torch.from_numpy(np.asarray(g.detach()) * 2)


def raising_backward(ctx, g):
    raise ValueError("backward failed")


CANNOT_DERIVE = {
    "no-backward": (
        with_backward(None),
        NotImplementedError,
        "neither a jvp nor a backward",
    ),
    "once_differentiable": (
        with_backward(lambda ctx, g: 2 * g, once=True),
        NotImplementedError,
        "its backward is @once_differentiable",
    ),
    "detached": (
        with_backward(lambda ctx, g: 2 * g.detach()),
        RuntimeError,
        "does not depend differentiably on grad_outputs",
    ),
    "numpy": (
        with_backward(numpy_backward),
        RuntimeError,
        "does not depend differentiably on grad_outputs",
    ),
    "raises": (
        with_backward(raising_backward),
        RuntimeError,
        "which raised ValueError: backward failed",
    ),
    "wrong-count": (
        with_backward(lambda ctx, g: (g, g)),
        RuntimeError,
        r"returned an incorrect number of gradients \(expected 1, got 2\)",
    ),
}


@pytest.mark.parametrize("case", list(CANNOT_DERIVE))
def test_underivable_backward_names_the_function_and_the_fixes(case):
    fn, error, reason = CANNOT_DERIVE[case]
    with dual_fwAD.dual_level():
        x = dual_fwAD.make_dual(randn(3), randn(3))
        with pytest.raises(error, match=reason) as info:
            fn.apply(x)
    message = str(info.value)
    assert "Broken" in message and "jvp" in message
    assert "@dualgen.register_jvp(Broken)" in message
    # native refuses every Function without jvp
    with native_fwAD.dual_level(), pytest.raises(NotImplementedError, match="jvp"):
        fn.apply(native_fwAD.make_dual(randn(3), randn(3)))


# --------------------------------------------------------------------------------------
# dualgen.register_jvp


@pytest.fixture
def registered():
    """Functions given a rule in the test; unregistered after it."""
    classes = []
    yield classes
    for cls in classes:
        dualgen.unregister_jvp(cls)


def test_registered_rule_overrides_the_jvp_until_unregistered(registered):
    x, t = randn(4) * 3, randn(4)

    @dualgen.register_jvp(STE)
    def rule(ctx, tangent):
        return 2 * tangent

    registered.append(STE)
    _, tangent = apply_dual(STE.apply, (x, t))(dual_fwAD)
    assert_close(tangent, 2 * t)
    dualgen.unregister_jvp(STE)
    _, tangent = apply_dual(STE.apply, (x, t))(dual_fwAD)
    assert_close(tangent, t)


def test_registered_rule_for_a_function_without_jvp_or_backward(registered):
    received = []

    class Cube(Function):
        @staticmethod
        def forward(ctx, x, y):
            ctx.save_for_forward(x)
            return x**3 + y

    @dualgen.register_jvp(Cube)
    def rule(ctx, xt, yt):
        received.append([xt is None, yt is None])
        (x,) = ctx.saved_tensors
        return 3 * x**2 * xt + yt

    registered.append(Cube)
    x, t, y = randn(4), randn(4), randn(4)
    _, tangent = apply_dual(Cube.apply, (x, t), (y, None))(dual_fwAD)
    assert_close(tangent, 3 * x**2 * t)
    assert received == [[False, False]]  # zeros for y, as native passes to jvp


def test_registered_rule_overrides_the_derived_jvp(registered):
    ste = without_jvp(STE)

    @dualgen.register_jvp(ste)
    def rule(ctx, tangent):
        return torch.zeros_like(tangent)

    registered.append(ste)
    _, tangent = apply_dual(ste.apply, (randn(3), randn(3)))(dual_fwAD)
    assert_close(tangent, torch.zeros(3, dtype=DTYPE))


# --------------------------------------------------------------------------------------
# nested levels


class CtxExp(Function):
    """forward(ctx, ...) saving its output: usable at nested levels."""

    @staticmethod
    def forward(ctx, x):
        y = x.exp()
        ctx.save_for_forward(y)
        return y

    @staticmethod
    def jvp(ctx, t):
        (y,) = ctx.saved_tensors
        return t * y


class CtxExpInternal(Function):
    """forward(ctx, ...) saving a tensor computed inside forward."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_forward(x.exp())
        return x.exp()

    @staticmethod
    def jvp(ctx, t):
        (y,) = ctx.saved_tensors
        return t * y


NESTED = {
    "setup_context": (MySin.apply, torch.sin, (5,)),
    "ctx-saves-output": (CtxExp.apply, torch.exp, (5,)),
    "ctx-saves-inputs": (
        lambda x: CtxMul.apply(x, x.cos(), 3.0),
        lambda x: x * x.cos() * 3.0,
        (5,),
    ),
    "kwargs": (
        lambda x: SetupMul.apply(x, x.cos(), shift=x),
        lambda x: x * x.cos() * 2.0 + x,
        (5,),
    ),
    "ste": (STE.apply, lambda x: x.detach().round() + (x - x.detach()), (5,)),
    "view": (Diagonal.apply, torch.diagonal, (3, 3)),
    "input-as-is": (Identity.apply, lambda x: x.view_as(x), (5,)),
    "non-tensor-outputs": (lambda x: SinCos.apply(x, "label")[2], torch.cos, (5,)),
    "index-saved": (lambda x: SortNonDiff.apply(x)[0], lambda x: x.sort()[0], (5,)),
    "derived": (without_jvp(MySin).apply, torch.sin, (5,)),
    "derived-several": (
        lambda x: sum(without_jvp(MulExp).apply(x, x.sin())),
        lambda x: x * x.sin() + x.exp(),
        (5,),
    ),
    "derived-view": (without_jvp(FirstRow).apply, lambda x: x[0], (2, 3)),
    "derived-mark_dirty": (
        lambda x: without_jvp(DoubleInPlace).apply(x.clone()),
        lambda x: 2 * x,
        (5,),
    ),
}


def nested(f, x, u, v):
    """f at x with tangent u at level 0 and v at level 1: the output, its two
    tangents and the level-0 tangent of the level-1 tangent (f'' u v)."""
    with dual_fwAD.dual_level():
        with dual_fwAD.dual_level():
            outer = dual_fwAD.make_dual(x, u, level=0) if u is not None else x
            inner = dual_fwAD.make_dual(outer, v, level=1) if v is not None else outer
            y = f(inner)
            y_v = dual_fwAD.unpack_dual(y, level=1).tangent
        y_u = dual_fwAD.unpack_dual(y, level=0).tangent
        y_uv = dual_fwAD.unpack_dual(y_v, level=0).tangent if y_v is not None else None
        return y.detach(), y_u, y_v, y_uv


@pytest.mark.parametrize("tangents", ["both", "outer", "inner"])
@pytest.mark.parametrize("case", list(NESTED))
def test_nested_levels_equal_the_same_program_in_aten_ops(case, tangents):
    function, aten_ops, shape = NESTED[case]
    x, u, v = randn(*shape) * 2, randn(*shape), randn(*shape)
    u = None if tangents == "inner" else u
    v = None if tangents == "outer" else v
    assert_same(nested(function, x, u, v), nested(aten_ops, x, u, v))


def test_nested_second_derivative_is_analytic():
    x, u, v = randn(5), randn(5), randn(5)
    _, y_u, y_v, y_uv = nested(MySin.apply, x, u, v)
    assert_close(y_u, x.cos() * u)
    assert_close(y_v, x.cos() * v)
    assert_close(y_uv, -x.sin() * u * v)


def test_three_levels_give_the_third_derivative():
    x, u, v, w = randn(4), randn(4), randn(4), randn(4)
    with dual_fwAD.dual_level(), dual_fwAD.dual_level(), dual_fwAD.dual_level():
        a = dual_fwAD.make_dual(x, u, level=0)
        b = dual_fwAD.make_dual(a, v, level=1)
        y = MySin.apply(dual_fwAD.make_dual(b, w, level=2))
        y_w = dual_fwAD.unpack_dual(y, level=2).tangent
        y_wv = dual_fwAD.unpack_dual(y_w, level=1).tangent
        y_wvu = dual_fwAD.unpack_dual(y_wv, level=0).tangent
    assert_close(y_wvu, -x.cos() * u * v * w)


@pytest.mark.parametrize(
    "function",
    [CtxExpInternal.apply, lambda x: MulInPlace.apply(x.clone(), x.sin())],
    ids=["save_for_forward", "mark_dirty"],
)
def test_nested_forward_ctx_saving_an_internal_tensor_asks_for_setup_context(function):
    with pytest.raises(NotImplementedError, match="nested dual levels.*setup_context"):
        nested(function, randn(3), randn(3), randn(3))
    # outer-level tangents only: fine
    nested(function, randn(3), randn(3), None)


# --------------------------------------------------------------------------------------
# torch.utils.checkpoint


def block(x, weight):
    return (torch.tanh(x @ weight) * x.sin()).cumsum(-1)


@pytest.mark.parametrize("closure", [False, True], ids=["arguments", "closure"])
@pytest.mark.parametrize("reentrant", [True, False], ids=["reentrant", "non-reentrant"])
def test_checkpoint_tangents_and_gradients_equal_the_direct_call(reentrant, closure):
    """Also with the weight (with its tangent) read from the function's closure,
    which native's reentrant checkpoint drops (and it has no jvp)."""
    x, tx, w, tw = randn(3, 4), randn(3, 4), randn(4, 4), randn(4, 4)

    def program(fwAD, use_checkpoint):
        leaf = w.clone().requires_grad_()
        with fwAD.dual_level():
            inputs = [fwAD.make_dual(x, tx), fwAD.make_dual(leaf, tw)]
            fn = block
            if closure:
                weight = inputs.pop()
                fn = lambda a: block(a, weight)
            if use_checkpoint:
                out = checkpoint(fn, *inputs, use_reentrant=reentrant)
            else:
                out = fn(*inputs)
            primal, tangent = fwAD.unpack_dual(out)
            (grad,) = torch.autograd.grad((primal + tangent**2).sum(), leaf)
            return primal, tangent, grad

    expected = program(native_fwAD, False)
    assert_same(program(dual_fwAD, True), expected)
    if not reentrant:
        assert_same(program(native_fwAD, True), expected)


# --------------------------------------------------------------------------------------
# the patch on Function.apply


def test_apply_is_patched_only_while_a_level_is_active():
    assert_unpatched()
    with dual_fwAD.dual_level():
        assert patched()
        with dual_fwAD.dual_level():
            pass
        assert patched()
    assert_unpatched()
    with pytest.raises(ValueError), dual_fwAD.dual_level():
        raise ValueError
    assert_unpatched()


class DoubleMarked(Function):
    """Saves, marks and materializes: touches every hooked ctx field."""

    @staticmethod
    def forward(ctx, x, y):
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(y)
        x.mul_(2)
        ctx.mark_dirty(x)
        n = y.argmax()
        ctx.mark_non_differentiable(n)
        return x, n

    @staticmethod
    def backward(ctx, g, _):
        (y,) = ctx.saved_tensors
        return 2 * g * torch.ones_like(y), None


def test_ctx_hooks_are_inert_without_a_level():
    """The ctx class is hooked for good after the first level: with no level,
    Functions save, mark and differentiate as in plain torch."""
    with dual_fwAD.dual_level():
        pass
    assert all(name in BackwardCFunction.__dict__ for name in CTX_HOOKS)
    x = randn(3, requires_grad=True)
    out, n = DoubleMarked.apply(x.clone(), randn(3))
    assert not n.requires_grad
    (grad,) = torch.autograd.grad(out.sum(), x)
    assert_close(grad, torch.full_like(x, 2.0))
    assert "_dualgen_record" not in out.grad_fn.__dict__


def test_patch_stays_while_another_thread_has_a_level():
    """The patch is process-wide: it stays until every thread's levels are gone,
    and a thread without level runs Functions as plain torch."""
    entered, go_on, tangents = threading.Event(), threading.Event(), []
    x, t = randn(3) * 3, randn(3)

    def worker():
        with dual_fwAD.dual_level():
            entered.set()
            go_on.wait()
            tangents.append(dual_fwAD.unpack_dual(STE.apply(dual_fwAD.make_dual(x, t))))

    thread = threading.Thread(target=worker)
    thread.start()
    entered.wait()
    with dual_fwAD.dual_level():
        pass
    assert patched()
    out = STE.apply(randn(3, requires_grad=True))  # this thread has no level
    assert type(out.grad_fn).__name__ == "STEBackward"
    go_on.set()
    thread.join()
    assert_close(tangents[0].tangent, t)
    assert_unpatched()
