"""Backward differentiability of tangents: reverse over forward and forward over
reverse, against native and torch.func.

See forward_ad_checks.py for how the runs are compared.
"""

from __future__ import annotations

import pytest
import torch
import torch.autograd.forward_ad as native_fwAD
from devices import DEVICE
from forward_ad_checks import (
    assert_same,
    mlp,
    no_level_left_behind,  # noqa: F401 - autouse
    randn,
    run_both,
)
from torch.testing import assert_close

import dualgen.forward_ad as dual_fwAD

# --------------------------------------------------------------------------------------
# 9. backward differentiability


ROF = {
    "exp": lambda x: x.exp(),
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "sqrt": lambda x: (x * x + 1).sqrt(),
    "mul_sin": lambda x: x * x.sin(),
    "div_pow": lambda x: x / (x * x + 1) + x**3,
    "relu": lambda x: torch.relu(x) * x,
    "mm_sum": lambda x: (x @ x.t()).sum(0),
    "inplace_without_self": lambda x: x.t().clone().add_(x.t().exp())[1:],
    "inplace_exp": lambda x: x.clone().exp_() * 2,
    "amax_mean": lambda x: x.amax(1) + x.mean(0).sum(),
}


def reverse_over_forward(fwAD, f, x, u, w):
    with fwAD.dual_level():
        y = f(fwAD.make_dual(x, u))
        primal, tangent = fwAD.unpack_dual(y)
        grads = torch.autograd.grad(
            (tangent * w).sum(), (x, u), allow_unused=True, retain_graph=True
        )
        (primal_grad,) = torch.autograd.grad((primal * w).sum(), x)
    return primal.detach(), tangent.detach(), grads, primal_grad


@pytest.mark.parametrize("name", ROF)
def test_reverse_over_forward(name):
    f = ROF[name]

    def fn(fwAD):
        x, u = randn(3, 3, requires_grad=True), randn(3, 3, requires_grad=True)
        w = randn(*f(x.detach()).shape)
        return reverse_over_forward(fwAD, f, x, u, w)

    run_both(fn)


ROF_INPLACE = {
    "mul_": lambda x: x.clone().mul_(x.exp()),
    "sin_": lambda x: x.clone().sin_(),
    "div_": lambda x: x.clone().div_(x * x + 1),
    "views_mul_": lambda x: x.t().clone().mul_(x.t().exp())[1:],
}


@pytest.mark.parametrize("name", ROF_INPLACE)
def test_reverse_over_forward_through_inplace_ops(name):
    f = ROF_INPLACE[name]
    torch.manual_seed(0)
    x, u = randn(3, 3, requires_grad=True), randn(3, 3, requires_grad=True)
    w = randn(*f(x.detach()).shape)

    def weighted_tangent(x, u):
        return (torch.func.jvp(f, (x,), (u,))[1] * w).sum()

    expected = torch.func.grad(weighted_tangent, argnums=(0, 1))(x.detach(), u.detach())
    native = reverse_over_forward(native_fwAD, f, x, u, w)
    assert_same(list(native[2]), list(expected))  # native is right
    ours = reverse_over_forward(dual_fwAD, f, x, u, w)
    assert_same(ours, native)


def test_inplace_op_autograd_takes_only_in_place():
    """Native autograd refuses the functional complex scatter_reduce but records
    scatter_reduce_: tracked inside a level, the in-place op runs as natively, with
    native's tangent and gradient."""
    gen = torch.Generator(DEVICE).manual_seed(0)
    index = torch.randint(0, 3, (2, 4), generator=gen)

    def run(fwAD):
        torch.manual_seed(0)
        x = torch.randn(3, 4, dtype=torch.complex128, requires_grad=True)
        src = torch.randn(2, 4, dtype=torch.complex128)
        tangent = torch.randn(3, 4, dtype=torch.complex128)
        with fwAD.dual_level():
            y = fwAD.make_dual(x.clone(), tangent)
            y.scatter_reduce_(0, index, src, "mean")
            primal, out_tangent = fwAD.unpack_dual(y)
            (grad,) = torch.autograd.grad(primal.abs().sum(), x)
        return primal.detach(), out_tangent, grad

    assert_same(run(dual_fwAD), run(native_fwAD))


def test_autograd_inplace_check_still_works_inside_a_level():
    for fwAD in (native_fwAD, dual_fwAD):
        a = randn(3, requires_grad=True)
        with fwAD.dual_level():
            b = a.exp()  # saves its result
            b.add_(1)
            with pytest.raises(RuntimeError, match="modified by an inplace operation"):
                torch.autograd.grad(b.sum(), a)


SOFTMAX = {
    "softmax": lambda x: torch.softmax(x, -1),
    "log_softmax": lambda x: torch.log_softmax(x, 0),
    "softmax_chain": lambda x: torch.softmax(torch.tanh(x) @ x, 1).exp(),
}


@pytest.mark.parametrize("name", SOFTMAX)
def test_reverse_over_forward_softmax_against_torch_func(name):
    f = SOFTMAX[name]
    torch.manual_seed(0)
    x, u = randn(3, 3, requires_grad=True), randn(3, 3, requires_grad=True)
    w = randn(3, 3)

    def weighted_tangent(x, u):
        return (torch.func.jvp(f, (x,), (u,))[1] * w).sum()

    expected = torch.func.grad(weighted_tangent, argnums=(0, 1))(x.detach(), u.detach())
    _, tangent, grads, primal_grad = reverse_over_forward(dual_fwAD, f, x, u, w)
    assert_close(tangent, torch.func.jvp(f, (x.detach(),), (u.detach(),))[1])
    assert_same(list(grads), list(expected))
    assert_close(primal_grad, torch.func.grad(lambda x: (f(x) * w).sum())(x.detach()))


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_native_reverse_over_forward_softmax_fails_documented(name):
    """PyTorch 2.13 bug: native reverse-over-forward through (log_)softmax fails.
    If this starts passing, compare dualgen against native directly instead."""
    f = SOFTMAX[name]
    x, u = randn(3, 3, requires_grad=True), randn(3, 3, requires_grad=True)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        reverse_over_forward(native_fwAD, f, x, u, randn(3, 3))


# Reverse over forward through formulas that must not read what autograd cannot
# differentiate: an op without a derivative (hardsigmoid_backward: native raises)
# or an output autograd gives no gradient (layer_norm's mean and rstd: native is
# silently wrong; weight norm's norms: dualgen was; log_sigmoid's buffer, read by
# log_sigmoid_backward, whose own derivative does not need it).
AGAINST_DIFFERENCES = {
    "hardsigmoid": lambda x: torch.nn.functional.hardsigmoid(x * 2) * x,
    "layer_norm": lambda x: torch.nn.functional.layer_norm(x, (3,)) * x,
    "weight_norm": lambda x: torch._weight_norm(x, x[:, :1].exp(), 0),
    "weight_norm_dim1": lambda x: torch._weight_norm(x * x, x[:1] + 2, 1),
    "logsigmoid": lambda x: torch.nn.functional.logsigmoid(x * x) * x,
    # formulas once through ops autograd cannot differentiate (it raised)
    "mish_backward": lambda x: torch.ops.aten.mish_backward(x.sin(), x),
    "logit_backward": lambda x: torch.ops.aten.logit_backward(x.cos(), x.sigmoid()),
    "multi_margin_loss_p2": lambda x: torch.nn.functional.multi_margin_loss(
        x * x, torch.tensor([0, 2, 1]), p=2, margin=1.5, reduction="none"
    ),
    "multilabel_margin_loss": lambda x: torch.nn.functional.multilabel_margin_loss(
        x, torch.tensor([[2, 0, -1], [1, -1, 0], [0, 1, 2]]), reduction="none"
    )
    * x.sum(1),
}


@pytest.mark.parametrize("name", AGAINST_DIFFERENCES)
def test_reverse_over_forward_against_differences(name):
    """The gradient of <tangent, w> with respect to the primal, along a random
    direction, against central differences of <tangent, w>."""
    f = AGAINST_DIFFERENCES[name]
    torch.manual_seed(2)
    x, u, w, v = (randn(3, 3) for _ in range(4))

    def weighted_tangent(x):
        with dual_fwAD.dual_level():
            tangent = dual_fwAD.unpack_dual(f(dual_fwAD.make_dual(x, u))).tangent
            return (tangent * w).sum()

    leaf = x.clone().requires_grad_()
    (grad,) = torch.autograd.grad(weighted_tangent(leaf), leaf)
    eps = 1e-6
    with torch.no_grad():
        expected = (weighted_tangent(x + eps * v) - weighted_tangent(x - eps * v)) / (
            2 * eps
        )
    assert_close((grad * v).sum(), expected, rtol=1e-6, atol=1e-8)


def test_reverse_over_forward_mlp_parameters():
    torch.manual_seed(1)
    model = mlp()

    def fn(fwAD):
        x, u = randn(5, 4, requires_grad=True), randn(5, 4, requires_grad=True)
        w = randn(5, 3)
        params = list(model.parameters())
        with fwAD.dual_level():
            out = model(fwAD.make_dual(x, u))
            primal, tangent = fwAD.unpack_dual(out)
            grads = torch.autograd.grad(
                (tangent * w).sum(), [x, u, *params], allow_unused=True
            )
        return primal.detach(), tangent.detach(), grads

    run_both(fn)


def test_reverse_over_forward_with_parameter_tangents():
    torch.manual_seed(1)
    model = mlp()

    def fn(fwAD):
        x = randn(5, 4, requires_grad=True)
        w = randn(5, 3)
        names = [n for n, _ in model.named_parameters()]
        params = [p.detach().clone().requires_grad_() for p in model.parameters()]
        tangents = [randn(*p.shape, requires_grad=True) for p in params]
        with fwAD.dual_level():
            duals = {
                n: fwAD.make_dual(p, t) for n, p, t in zip(names, params, tangents)
            }
            out = torch.func.functional_call(model, duals, (x,))
            tangent = fwAD.unpack_dual(out).tangent
            grads = torch.autograd.grad(
                (tangent * w).sum(), [x, *params, *tangents], allow_unused=True
            )
        return tangent.detach(), grads

    run_both(fn)


FOR = {
    "tanh": lambda x, w: (torch.tanh(x) * w).sum(),
    "sigmoid": lambda x, w: (torch.sigmoid(x) * w).sum(),
    "relu": lambda x, w: (torch.relu(x) * w).sum(),
    "relu_squared": lambda x, w: (torch.relu(x) ** 2 * w).sum(),
    "softmax": lambda x, w: (torch.softmax(x, -1) * w).sum(),
    "log_softmax": lambda x, w: (torch.log_softmax(x, 0) * w).sum(),
    "exp": lambda x, w: (x.exp() * w).sum(),
    "mm": lambda x, w: torch.tanh(x @ w).sum(),
    "sum": lambda x, w: (x.sum(0) ** 2).sum() + (x * w).sum(1).pow(3).sum(),
    "mixed": lambda x, w: (
        torch.log_softmax(torch.sigmoid(x @ w.t()) * x.exp(), 1) * torch.relu(w)
    ).sum(),
    # backward formulas that read a saved *input* carrying a tangent
    "sin": lambda x, w: (torch.sin(x) * w).sum(),
    "square": lambda x, w: (x * x * w).sum(),
    "relu_times_x": lambda x, w: (torch.relu(x) * x * w).sum(),
    "exp_times_x": lambda x, w: (x.exp() * x * w).sum(),
    "mm_input": lambda x, w: (x @ x * w).sum(),
    # autograd's gradient of sgn is an efficient zero tensor, which has no memory
    "sgn_zero_tensor_grad": lambda x, w: (x.sgn() * w).sum(),
    "sgn_zero_tensor_accumulated": lambda x, w: (x.sgn() * w).sum() + (x * x * w).sum(),
}

FOR_BUGS = {
    "sgn_zero_tensor_grad": "dualgen difference: the gradient of sgn is an "
    "efficient zero tensor that does not depend on x; dualgen gives it no tangent "
    "(None) where torch.func materialises a zero tangent",
    "relu": "dualgen difference: threshold_backward declares `self` "
    "non-differentiable, so the gradient of relu gets no tangent (None) where "
    "native and torch.func materialise a zero tangent",
}
FOR_PARAMS = [
    (
        pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=FOR_BUGS[name]))
        if name in FOR_BUGS
        else name
    )
    for name in FOR
]


def forward_over_reverse(fwAD, f, x, v, w, create_graph, differentiate_again):
    with fwAD.dual_level():
        xp = x.clone().requires_grad_()
        (g,) = torch.autograd.grad(
            f(fwAD.make_dual(xp, v), w), xp, create_graph=create_graph
        )
        primal, tangent = fwAD.unpack_dual(g)
        again = None
        if differentiate_again and tangent is not None:  # both differentiable again
            (again,) = torch.autograd.grad(((primal + tangent) * w).sum(), xp)
        return primal.detach(), None if tangent is None else tangent.detach(), again


@pytest.mark.parametrize("create_graph", [False, True], ids=["plain", "create_graph"])
@pytest.mark.parametrize("name", FOR_PARAMS)
def test_forward_over_reverse(name, create_graph):
    f = FOR[name]
    torch.manual_seed(0)
    x, v, w = randn(3, 3), randn(3, 3), randn(3, 3)
    grad_f = torch.func.grad(f)
    grad, hvp = torch.func.jvp(grad_f, (x, w), (v, torch.zeros_like(w)))
    primal, tangent, again = forward_over_reverse(
        dual_fwAD, f, x, v, w, create_graph, create_graph
    )
    assert_close(primal, grad)
    assert_same(tangent, hvp)
    # native agrees (without differentiating again: native fails on that through
    # (log_)softmax, the PyTorch bug documented above)
    native = forward_over_reverse(native_fwAD, f, x, v, w, create_graph, False)
    assert_same((primal, tangent), native[:2])
    if create_graph:

        def grad_plus_hvp(x):
            g, h = torch.func.jvp(grad_f, (x, w), (v, torch.zeros_like(w)))
            return ((g + h) * w).sum()

        assert_close(again, torch.func.grad(grad_plus_hvp)(x))


def _layer_norm_written(x, w):
    m = x.mean(-1, keepdim=True)
    var = ((x - m) ** 2).mean(-1, keepdim=True)
    return (x - m) * (var + 1e-5).rsqrt() * w


def _batch_norm_written(x, w):
    m = x.mean(0, keepdim=True)
    var = ((x - m) ** 2).mean(0, keepdim=True)
    return (x - m) * (var + 1e-5).rsqrt() * w[0]


# (the aten op, the same written out in element-wise ops and reductions)
NORMS_THIRD_ORDER = {
    "layer_norm": (
        lambda x, w: torch.nn.functional.layer_norm(x, (3,), w[0], eps=1e-5),
        lambda x, w: _layer_norm_written(x, w[0]),
    ),
    "batch_norm": (
        lambda x, w: torch.nn.functional.batch_norm(
            x, None, None, w[0], training=True, eps=1e-5
        ),
        _batch_norm_written,
    ),
}


@pytest.mark.parametrize("name", NORMS_THIRD_ORDER)
def test_forward_over_reverse_differentiated_again_through_norms(name, backend):
    """The gradient of a Hessian-vector product through a norm: forward over
    reverse runs the norm's backward op on duals (its saved statistics or norms
    are constants to autograd), and autograd differentiates its tangent. Against
    torch.func on the norm written out (torch.func's own third derivative of
    layer norm is wrong: the transformer-layer test's note). Weight norm's is
    below: torch's own second derivative of `_weight_norm` is wrong on the CPU
    (docs/differences.md)."""
    aten, written = NORMS_THIRD_ORDER[name]
    torch.manual_seed(0)
    x, v, w = randn(3, 3), randn(3, 3), randn(3, 3)

    def loss(f):
        return lambda x, w: (torch.tanh(f(x, w)) * w).sum()

    _, tangent, again = forward_over_reverse(dual_fwAD, loss(aten), x, v, w, True, True)
    grad_f = torch.func.grad(loss(written))
    _, hvp = torch.func.jvp(grad_f, (x, w), (v, torch.zeros_like(w)))

    def grad_plus_hvp(x):
        g, h = torch.func.jvp(grad_f, (x, w), (v, torch.zeros_like(w)))
        return ((g + h) * w).sum()

    assert_close(tangent, hvp)
    assert_close(again, torch.func.grad(grad_plus_hvp)(x))


def test_weight_norm_backward_op_tangent_gradient_against_differences():
    """The same for `_weight_norm_interface_backward` called as autograd calls it,
    on the forward's norms (constants to autograd): the gradient of its tangent's
    <tangent, w> along a random direction against central differences, the
    norms recomputed from v at each point."""
    torch.manual_seed(3)
    v, g, grad_w = randn(4, 3), randn(4, 1), randn(4, 3)
    u_v, u_g, u_grad = randn(4, 3), randn(4, 1), randn(4, 3)  # tangents
    w = randn(4, 3), randn(4, 1)  # a weight per output
    d = randn(4, 3), randn(4, 1), randn(4, 3)  # the direction

    def weighted_tangent(v, g, grad_w):
        with torch.no_grad():
            norms = torch._weight_norm_interface(v, g, 0)[1]
        with dual_fwAD.dual_level():
            outs = torch.ops.aten._weight_norm_interface_backward(
                dual_fwAD.make_dual(grad_w, u_grad),
                dual_fwAD.make_dual(v, u_v),
                dual_fwAD.make_dual(g, u_g),
                norms,
                0,
            )
            tangents = [dual_fwAD.unpack_dual(o).tangent for o in outs]
        return sum((t * wk).sum() for t, wk in zip(tangents, w))

    leaves = [t.clone().requires_grad_() for t in (v, g, grad_w)]
    grads = torch.autograd.grad(weighted_tangent(*leaves), leaves)
    along = sum((gr * dk).sum() for gr, dk in zip(grads, d))
    eps = 1e-6
    with torch.no_grad():
        plus = weighted_tangent(*(t + eps * dk for t, dk in zip((v, g, grad_w), d)))
        minus = weighted_tangent(*(t - eps * dk for t, dk in zip((v, g, grad_w), d)))
    assert_close(along, (plus - minus) / (2 * eps), rtol=1e-6, atol=1e-8)


def test_forward_over_reverse_mlp_parameter_hvp():
    torch.manual_seed(1)
    model = mlp()
    x, target = randn(5, 4), randn(5, 3)
    names = [n for n, _ in model.named_parameters()]
    params = {n: p.detach() for n, p in model.named_parameters()}
    vs = {n: randn(*p.shape) for n, p in params.items()}

    def loss(ps):
        out = torch.func.functional_call(model, ps, (x,))
        return ((torch.softmax(out, 1) - target) ** 2).mean()

    _, hvp = torch.func.jvp(torch.func.grad(loss), (params,), (vs,))

    def fn(fwAD):
        leaves = {n: params[n].clone().requires_grad_() for n in names}
        with fwAD.dual_level():
            duals = {n: fwAD.make_dual(leaves[n], vs[n]) for n in names}
            grads = torch.autograd.grad(loss(duals), [leaves[n] for n in names])
            return [tuple(fwAD.unpack_dual(g)) for g in grads]

    actual, _ = run_both(fn)
    for n, (_, tangent) in zip(names, actual):
        assert_close(tangent, hvp[n])


def test_a_long_level_keeps_no_step_alive():
    """A level around a whole training loop: each step's outputs (which autograd
    may save and rebuild, so their tangents are remembered) are freed with the
    step, and the level's bookkeeping stays bounded; what is remembered still
    serves forward over reverse (autograd's rebuilt saved output of tanh)."""
    import gc
    import weakref

    from dualgen.levels import STATE

    torch.manual_seed(0)
    w = randn(64, requires_grad=True)
    v = randn(64)
    outputs, memories = [], []
    with dual_fwAD.dual_level():
        dual = dual_fwAD.make_dual(w, v)
        for _ in range(3000):
            hidden = (dual.sin() * 2).view(8, 8)  # a view: two outputs, one memory
            outputs.append(weakref.ref(hidden))
            memories.append(weakref.ref(hidden.untyped_storage()))
            hidden.sum().backward()
        del hidden
        gc.collect()
        level = STATE.levels[-1]
        assert not any(ref() is not None for ref in outputs + memories)
        assert len(level.saved) == 0
        assert len(level.tensors) <= 2 * 1024
        grad = torch.autograd.grad(torch.tanh(dual).sum(), w, create_graph=True)[0]
        hvp = dual_fwAD.unpack_dual(grad).tangent
    t = torch.tanh(w.detach())
    assert_close(hvp, -2 * t * (1 - t**2) * v)
