"""Which ops the C++ hot path handles itself, and that what it does is what the
Python path does: in-place updates (self's tangent written in place, a first
tangent for a plain tensor, operands read as they were), list inputs (cat,
stack) and list outputs (unsafe_split, split, unbind). Bit for bit against the
Python backend, and against native forward AD where native is right. Cases it
must decline (lens updates through views, tangents whose elements share memory,
autograd recording) go to the Python path, with the same answers."""

from __future__ import annotations

import contextlib

import pytest
import torch
import torch.autograd.forward_ad as native_ad
import torch.nn.functional as F
from devices import DEVICE

import dualgen
import dualgen.forward_ad as fwAD
from dualgen import cpp
from dualgen.dispatch.mode import DualMode
from dualgen.forward_columns import push_batched

pytestmark = pytest.mark.skipif(
    cpp.state() != "built", reason="C++ extension not built"
)


@contextlib.contextmanager
def declined_ops():
    """The ops (by name) the Python path handles while inside: those the hot path
    declined, whether it was offered them in front of the mode or by it."""
    declined = []
    python_path = DualMode._entered

    def recording(self, func, args, kwargs, tensors):
        declined.append(str(func))
        return python_path(self, func, args, kwargs, tensors)

    DualMode._entered = recording
    try:
        yield declined
    finally:
        DualMode._entered = python_path


def _inputs():
    g = torch.Generator(DEVICE).manual_seed(0)
    return [torch.randn(4, 6, generator=g, dtype=torch.float64) for _ in range(4)]


def _duals(ad, values):
    x, tx, w, tw = values
    return ad.make_dual(x.clone(), tx), ad.make_dual(w.clone(), tw)


def _update_a_view(a, b):
    c = a * 1.0
    c[1:3].mul_(b[1:3]).tanh_()
    return c


def _addcmul_with_self(a, b):
    c = a * 1.0
    return c.addcmul_(c, b)


# Each program takes two duals and returns a dual tensor; `ops` are the ops the
# hot path must handle itself.
PROGRAMS = {
    "add_ mul_ sigmoid_": (
        lambda a, b: (a * 2).add_(b, alpha=0.5).mul_(b).sigmoid_(),
        {"aten.add_.Tensor", "aten.mul_.Tensor", "aten.sigmoid_.default"},
    ),
    "first tangent of a plain tensor": (
        lambda a, b: torch.zeros(4, 6, dtype=torch.float64).add_(a).mul_(b),
        {"aten.add_.Tensor", "aten.mul_.Tensor"},
    ),
    "in-place on a view with its own tangent": (
        _update_a_view,
        {"aten.mul_.Tensor", "aten.tanh_.default"},
    ),
    "copy_ of another dual": (
        lambda a, b: (a * 1.0).copy_(b).exp_(),
        {"aten.copy_.default", "aten.exp_.default"},
    ),
    "an operand sharing self's memory": (
        _addcmul_with_self,
        {"aten.addcmul_.default"},
    ),
    "cat and stack of duals and plain tensors": (
        lambda a, b: torch.stack(
            [torch.cat([a, torch.ones(4, 2, dtype=a.dtype), b], 1)] * 2
        ),
        {"aten.cat.default", "aten.stack.default"},
    ),
    "unsafe_split then in-place on a piece": (
        lambda a, b: torch.cat(
            [p.tanh_() for p in torch.unsafe_split(a * b, 2, dim=1)], 1
        ),
        {"aten.unsafe_split.Tensor", "aten.tanh_.default"},
    ),
    "split and unbind (views)": (
        lambda a, b: torch.stack(
            [*torch.unbind(a, 1), *(p[:, 0] for p in torch.split(b, 1, 1))]
        ),
        {"aten.unbind.int", "aten.split.Tensor"},
    ),
}


def _tangent(ad, program, values):
    with ad.dual_level():
        out = program(*_duals(ad, values))
        primal, tangent = ad.unpack_dual(out)
        return primal.clone(), tangent.clone()


@pytest.fixture
def backend():
    before = dualgen.kernel_backend()
    yield
    dualgen.set_kernel_backend(before)


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_the_hot_path_handles_them_as_the_python_path_does(backend, name):
    program, ops = PROGRAMS[name]
    values = _inputs()
    dualgen.set_kernel_backend("python")
    expected = _tangent(fwAD, program, values)
    dualgen.set_kernel_backend("cpp")
    with declined_ops() as declined:
        got = _tangent(fwAD, program, values)
    assert not ops & set(declined), f"declined: {sorted(ops & set(declined))}"
    torch.testing.assert_close(got, expected, rtol=0, atol=0)
    if name != "an operand sharing self's memory":  # native reads c after the update
        torch.testing.assert_close(got, _tangent(native_ad, program, values))


def test_an_operand_sharing_selfs_memory_is_read_as_it_was(backend):
    """d(c * c)/dc through `c.mul_(c)` is 2 c ċ (native reads one c after the
    update and gets 3 c ċ here)."""
    x, t = torch.tensor([1.0, 2.0]), torch.tensor([1.0, 1.0])
    expected = 2 * x * t
    with fwAD.dual_level():
        c = fwAD.make_dual(x.clone(), t.clone())
        tangent = fwAD.unpack_dual(c.mul_(c)).tangent
    torch.testing.assert_close(tangent, expected)


def test_a_first_tangent_through_a_view_goes_to_the_python_path(backend):
    """`z[1:3].add_(dual)` for a plain z: the tangent lives on z (zeros around
    the view), a lens update of the Python path's; it agrees with native."""

    def program(a, b):
        z = torch.zeros(4, 6, dtype=a.dtype)
        z[1:3].add_(b[1:3])
        return z

    values = _inputs()
    dualgen.set_kernel_backend("cpp")
    with declined_ops() as declined:
        got = _tangent(fwAD, program, values)
    assert "aten.add_.Tensor" in declined
    torch.testing.assert_close(got, _tangent(native_ad, program, values))


def test_a_tangent_sharing_memory_goes_to_the_python_path(backend):
    """An expanded dual (primal and tangent of stride 0): `masked_fill_` writes
    each location once, from the first of its elements written (the Python
    path's `_write_shared`), as native."""
    dualgen.set_kernel_backend("cpp")
    got = {}
    for ad in (fwAD, native_ad):
        with ad.dual_level():
            a = ad.make_dual(torch.zeros(2).expand(3, 2), torch.ones(2).expand(3, 2))
            value = ad.make_dual(torch.tensor(2.0), torch.tensor(5.0))
            mask = torch.tensor([True, False])
            with (
                declined_ops() as declined,
                pytest.warns(UserWarning, match="expanded"),
            ):
                a.masked_fill_(mask, value)
            got[ad] = ad.unpack_dual(a).tangent.clone()
        if ad is fwAD:
            assert "aten.masked_fill_.Tensor" in declined
    torch.testing.assert_close(got[fwAD], torch.tensor([[5.0, 1.0]] * 3))
    torch.testing.assert_close(got[fwAD], got[native_ad])


def test_recording_in_place_goes_to_the_python_path(backend):
    """With autograd recording, an in-place op's tangent must be in the graph:
    the Python path's (tracked) update; d/dw of the tangent agrees with native."""
    dualgen.set_kernel_backend("cpp")
    grads = {}
    for ad in (fwAD, native_ad):
        w = torch.randn(
            5, dtype=torch.float64, generator=torch.Generator(DEVICE).manual_seed(1)
        )
        w.requires_grad_(True)
        with ad.dual_level():
            a = ad.make_dual(w * 1.0, torch.ones(5, dtype=torch.float64))
            with declined_ops() as declined:
                out = (a * 2).sin_()
            tangent = ad.unpack_dual(out).tangent
        (grads[ad],) = torch.autograd.grad(tangent.sum(), w)
        if ad is fwAD:
            assert "aten.sin_.default" in declined
    torch.testing.assert_close(grads[fwAD], grads[native_ad])


def _recorded_mlp(ad, params, tangents, x, forward=contextlib.nullcontext):
    """A small MLP with dual parameters that require grad, inside a level:
    its primal, its tangent, the gradients of both with respect to the
    parameters, and the forward derivative of the primal's gradient
    (forward-over-reverse through tanh's saved output)."""
    leaves = [p.detach().requires_grad_(True) for p in params]

    def mlp(w1, b1, w2):  # (its intermediate outputs die with it: autograd's
        # saved copies of tanh's and sigmoid's outputs are all that is left)
        hidden = torch.tanh(torch.nn.functional.linear(x, w1, b1))
        return (hidden.t().mm(hidden) * w2).sigmoid().exp()

    with ad.dual_level():
        w1, b1, w2 = (ad.make_dual(p, t) for p, t in zip(leaves, tangents))
        with forward():
            out = mlp(w1, b1, w2)
        primal, tangent = ad.unpack_dual(out)
        (grad_w1,) = torch.autograd.grad(out.sum(), w1, create_graph=True)
        grad_w1_tangent = ad.unpack_dual(grad_w1).tangent
    grads_of_tangent = torch.autograd.grad(tangent.sum(), leaves, retain_graph=True)
    grads_of_primal = torch.autograd.grad(primal.sum(), leaves)
    return (primal, tangent, grad_w1_tangent, *grads_of_tangent, *grads_of_primal)


def test_recorded_ops_are_taken_in_front_of_autograd(backend):
    """Ops autograd records (parameters that require grad) are the hot path's
    from the front kernel: run through autograd as native runs them, so the
    primal's and the tangent's graphs, and tangents of outputs autograd saved
    (tanh's, read by its backward's forward derivative), match native's."""
    g = torch.Generator(DEVICE).manual_seed(3)
    shapes = [(5, 4), (5,), (5, 5)]
    params = [torch.randn(s, dtype=torch.float64, generator=g) for s in shapes]
    tangents = [torch.randn(s, dtype=torch.float64, generator=g) for s in shapes]
    x = torch.randn(3, 4, dtype=torch.float64, generator=g)
    dualgen.set_kernel_backend("cpp")
    declined = []

    @contextlib.contextmanager
    def probed():
        with declined_ops() as found:
            yield
        declined.extend(found)

    got = _recorded_mlp(fwAD, params, tangents, x, forward=probed)
    recorded = {
        "aten.addmm.default",
        "aten.tanh.default",
        "aten.t.default",
        "aten.mm.default",
        "aten.mul.Tensor",
        "aten.sigmoid.default",
        "aten.exp.default",
    }
    assert not recorded & set(declined), f"declined: {sorted(recorded & set(declined))}"
    torch.testing.assert_close(got, _recorded_mlp(native_ad, params, tangents, x))
    dualgen.set_kernel_backend("python")
    torch.testing.assert_close(got, _recorded_mlp(fwAD, params, tangents, x))


def _unpacked(ad, x, t):
    """What unpack_dual gives of a dual and of a view of one, and what the
    primal's views and an update through the primal see, inside one level."""
    with ad.dual_level():
        dual = ad.make_dual(x.clone(), t)
        primal, tangent = ad.unpack_dual(dual)
        row_primal, row_tangent = ad.unpack_dual(dual[1])
        seen = (
            ad.unpack_dual(primal[0]).tangent,
            ad.unpack_dual(primal * 2).tangent,
            ad.unpack_dual(row_primal.exp()).tangent,
        )
        primal.mul_(3.0)  # the primal is an alias: the dual sees the update
        after = ad.unpack_dual(dual)
        return (
            primal.clone(),
            tangent.clone(),
            row_tangent.clone(),
            *seen,
            after.primal.clone(),
            after.tangent.clone(),
            primal._base is not None,
            primal.data_ptr() == dual.data_ptr(),
        )


def test_unpack_dual_of_a_tensors_own_tangent_is_the_hot_paths(backend):
    """unpack_dual's common case (one level, the tensor's own tangent) runs in
    C++: the primal is an alias without tangent at the level, as native's."""
    g = torch.Generator(DEVICE).manual_seed(4)
    x, t = (torch.randn(3, 4, dtype=torch.float64, generator=g) for _ in range(2))
    dualgen.set_kernel_backend("cpp")
    with declined_ops() as declined, fwAD.dual_level():
        fwAD.unpack_dual(fwAD.make_dual(x, t))
    assert "aten.alias.default" not in declined
    got = _unpacked(fwAD, x, t)
    torch.testing.assert_close(got, _unpacked(native_ad, x, t))
    dualgen.set_kernel_backend("python")
    torch.testing.assert_close(got, _unpacked(fwAD, x, t))


def _batched_jvp(ad, x, w, basis):
    """Tangents of a small program for every row of `basis` at once: the
    batched tangents of legacy vmap, as the vectorized jacobians use them."""
    from torch._vmap_internals import _vmap

    def column(t):
        with ad.dual_level():
            d = ad.make_dual(x, t)
            h = torch.tanh(d.mm(w.t()) * 2.0 + d)
            out = torch.cat([h.sin(), (h * d).sum(1, keepdim=True)], 1)
            out.add_(h.sum(1, keepdim=True)).sigmoid_()  # in place, batched
            fresh = torch.ones(3, 5, dtype=x.dtype).mul_(out)  # a first tangent
            pieces = torch.unbind(fresh.t().exp_(), 0)  # through a view
            return ad.unpack_dual(torch.stack(pieces)).tangent

    return _vmap(column)(basis)


def test_batched_tangents_are_the_hot_paths(backend):
    """Tangents batched by legacy vmap (a forward-mode jacobian's basis) are
    computed by the hot path for functional, view and in-place ops (a tangent
    updated in place, a first tangent, an update through a view), as the Python
    path and native compute them (in-place ops went to the Python path, a GRU's
    gates among them: its jacfwd 7.3 -> 2.5 ms)."""
    g = torch.Generator(DEVICE).manual_seed(5)
    x = torch.randn(3, 4, dtype=torch.float64, generator=g)
    w = torch.randn(4, 4, dtype=torch.float64, generator=g)
    basis = torch.eye(12, dtype=torch.float64).reshape(12, 3, 4)
    dualgen.set_kernel_backend("cpp")
    with declined_ops() as declined:
        got = _batched_jvp(fwAD, x, w, basis)
    taken = {
        "aten.mm.default",
        "aten.t.default",
        "aten.mul.Tensor",
        "aten.add.Tensor",
        "aten.tanh.default",
        "aten.sin.default",
        "aten.cat.default",
        "aten.sum.dim_IntList",
        "aten.unbind.int",
        "aten.stack.default",
        "aten.add_.Tensor",
        "aten.sigmoid_.default",
        "aten.mul_.Tensor",
        "aten.exp_.default",
    }
    assert not taken & set(declined), f"declined: {sorted(taken & set(declined))}"
    torch.testing.assert_close(got, _batched_jvp(native_ad, x, w, basis))
    dualgen.set_kernel_backend("python")
    torch.testing.assert_close(got, _batched_jvp(fwAD, x, w, basis), rtol=0, atol=0)


def _view_updates(ad, x, w, t):
    """In-place view ops on tensors with tangents: torch's matmul of a vector
    squeezes its product in place."""
    with ad.dual_level():
        d = ad.make_dual(x, t)
        y = torch.tanh(w @ d)  # mm, then squeeze_
        z = (y.unsqueeze(1) * y).t_().unsqueeze_(0).transpose_(0, 2)
        return ad.unpack_dual(z).tangent


def test_in_place_views_of_batched_tangents_are_the_hot_paths(backend):
    """An in-place view op whose self's tangent is batched by legacy vmap gives
    self the view op's view of the tangent (legacy vmap cannot reshape a batched
    tensor in place), in C++ as in Python; native's answers column by column
    (native's own batched tangent keeps its old shape there)."""
    from torch._vmap_internals import _vmap

    g = torch.Generator(DEVICE).manual_seed(7)
    x = torch.randn(4, dtype=torch.float64, generator=g)
    w = torch.randn(3, 4, dtype=torch.float64, generator=g)
    basis = torch.eye(4, dtype=torch.float64)
    batched = lambda: _vmap(lambda t: _view_updates(fwAD, x, w, t))(basis)
    views = {"aten.squeeze_.dim", "aten.t_.default", "aten.unsqueeze_.default"}
    dualgen.set_kernel_backend("cpp")
    with declined_ops() as declined:
        got = batched()
    assert not views & set(declined), f"declined: {sorted(views & set(declined))}"
    assert "aten.transpose_.default" not in declined
    columns = torch.stack([_view_updates(native_ad, x, w, t) for t in basis])
    torch.testing.assert_close(got, columns)
    dualgen.set_kernel_backend("python")
    torch.testing.assert_close(got, batched(), rtol=0, atol=0)


def _forward_over_reverse(ad, x, w, t):
    """The tangent of a gradient taken inside a level: the backward ops read
    outputs autograd saved (tanh's, sigmoid's), which it rebuilds as new
    tensors whose tangents the level remembered."""
    x = x.detach().requires_grad_()
    with ad.dual_level():
        d = ad.make_dual(x, t)
        y = torch.sigmoid(torch.tanh(d.mm(w)) * 1.5)
        (grad,) = torch.autograd.grad(y.pow(2).sum(), x)
        return ad.unpack_dual(grad).tangent


def test_saved_outputs_tangents_are_the_hot_paths(backend):
    """Forward over reverse: the backward formulas' ops on rebuilt saved outputs
    (tanh_backward, sigmoid_backward) take the hot path with the tangents the
    level remembered, for a tangent per call and batched by legacy vmap (a
    Hessian's columns); the same answers as the Python path and native."""
    from torch._vmap_internals import _vmap

    g = torch.Generator(DEVICE).manual_seed(6)
    x, t = (torch.randn(3, 4, dtype=torch.float64, generator=g) for _ in range(2))
    w = torch.randn(4, 5, dtype=torch.float64, generator=g)
    basis = torch.eye(12, dtype=torch.float64).reshape(12, 3, 4)
    columns = lambda ad: _vmap(lambda b: _forward_over_reverse(ad, x, w, b))(basis)
    readers = {"aten.tanh_backward.default", "aten.sigmoid_backward.default"}
    dualgen.set_kernel_backend("cpp")
    with declined_ops() as declined:
        got = _forward_over_reverse(fwAD, x, w, t)
        got_columns = columns(fwAD)
    assert not readers & set(declined), f"declined: {sorted(readers & set(declined))}"
    torch.testing.assert_close(got, _forward_over_reverse(native_ad, x, w, t))
    torch.testing.assert_close(got_columns, columns(native_ad))
    dualgen.set_kernel_backend("python")
    python = (_forward_over_reverse(fwAD, x, w, t), columns(fwAD))
    torch.testing.assert_close((got, got_columns), python, rtol=0, atol=0)


def test_a_subclass_in_a_list_goes_to_its_own_dispatch(backend):
    """`torch.cat([dual, subclass])`: the subclass's __torch_dispatch__ runs the op
    (the mode defers to it), never the hot path, also when it sits in a list."""
    from torch.testing._internal.two_tensor import TwoTensor

    dualgen.set_kernel_backend("cpp")
    x = torch.randn(2, dtype=torch.float64)
    pair = TwoTensor(
        torch.ones(2, dtype=torch.float64), torch.zeros(2, dtype=torch.float64)
    )
    with fwAD.dual_level():
        dual = fwAD.make_dual(x, torch.ones(2, dtype=torch.float64))
        out = torch.cat([dual, pair])
    assert isinstance(out, TwoTensor)
    torch.testing.assert_close(out.a, torch.cat([x, pair.a]))
    torch.testing.assert_close(out.b, torch.cat([x, pair.b]))


@pytest.mark.parametrize("batched", [False, True])
def test_an_absent_optional_tensor_is_taken_in_front_of_the_mode(backend, batched):
    """conv2d without a bias passes convolution an undefined tensor, whose
    dispatch key (AutogradOther) the front kernel refused: every such convolution
    went through the Python dispatch mode (about 20 us a call, a tenth of a
    convnet's jacfwd). The front kernel takes it now, and the tangent is native's."""
    g = torch.Generator(DEVICE).manual_seed(5)
    x = torch.randn(1, 2, 5, 5, dtype=torch.float64, generator=g)
    w = torch.randn(3, 2, 3, 3, dtype=torch.float64, generator=g)
    columns = 4 if batched else 1
    basis = torch.randn(columns, *x.shape, dtype=torch.float64, generator=g)
    dualgen.set_kernel_backend("cpp")
    seen = []
    entered = DualMode.__torch_dispatch__

    def recording(self, func, types, args=(), kwargs=None):
        seen.append(str(func))
        return entered(self, func, types, args, kwargs)

    def push(t):
        with fwAD.dual_level():
            y = F.conv2d(fwAD.make_dual(x, t), w, padding=1)
            return (fwAD.unpack_dual(y).tangent,)

    DualMode.__torch_dispatch__ = recording
    try:
        if batched:
            (got,) = push_batched(push, [basis])
        else:
            (got,) = push(basis[0])
            got = got.unsqueeze(0)
    finally:
        DualMode.__torch_dispatch__ = entered
    assert "aten.convolution.default" not in seen
    expected = torch.stack([F.conv2d(b, w, padding=1) for b in basis])
    torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12)


def test_choosing_the_cpp_backend_again_keeps_the_front_kernel():
    """The front kernel takes the ops without a kernel of torch's at its key;
    choosing the backend a second time must not count dualgen's own as torch's
    (it did: linalg_eig then ran through the Python path twice-recorded)."""
    before = dualgen.kernel_backend()
    try:
        for _ in range(3):
            dualgen.set_kernel_backend("cpp")
            for name in ("aten::linalg_eig", "aten::sin", "aten::mm"):
                assert torch._C._dispatch_has_kernel_for_dispatch_key(
                    name, "PythonTLSSnapshot"
                ), name
    finally:
        dualgen.set_kernel_backend(before)


def _recorded_step(ad, w, tw, x, seed):
    """A training step's forward with a dual weight that requires grad: random
    draws (dropout, normal), an op writing an argument (batch norm's running statistics)
    and output-reading formulas at both sizes the front kernel tells apart
    (`runs_again`); the output, its tangent, the statistics, and the gradient's
    tangent (forward over reverse)."""
    leaf = w.detach().requires_grad_(True)
    bn = torch.nn.BatchNorm1d(x.shape[1], dtype=x.dtype).train()
    torch.manual_seed(seed)
    with ad.dual_level():
        dual = ad.make_dual(leaf, tw)
        h, _ = torch.native_dropout(x @ dual, 0.5, True)  # (what CUDA's dropout calls)
        h = torch.normal(h, torch.sigmoid(h))  # its formula reads the draw
        h = bn(torch.tanh(h).exp())
        big = torch.sigmoid(h.repeat(1, 200)).softmax(-1)  # operands past 2^14 elements
        out = h.sum() + big.sum()
        (grad,) = torch.autograd.grad(out, leaf, create_graph=True)
        primal, tangent = ad.unpack_dual(out)
        return (
            primal.detach(),
            tangent.detach(),
            bn.running_mean.clone(),
            bn.running_var.clone(),
            ad.unpack_dual(grad).tangent.detach(),
        )


def test_recorded_ops_run_again_only_where_nothing_changes(backend):
    """Where autograd records, the front kernel runs an op whose formula reads its
    outputs a second time (its tangent must not hold the user's node) only where
    that computes the same and changes nothing: dropout's mask is drawn once (the
    same as native's from the same seed), batch norm's running statistics move
    once; the large ops go to the mode. The same as native and the Python path."""
    g = torch.Generator(DEVICE).manual_seed(7)
    x = torch.randn(16, 8, dtype=torch.float64, generator=g)
    w, tw = (torch.randn(8, 8, dtype=torch.float64, generator=g) for _ in range(2))
    dualgen.set_kernel_backend("cpp")
    with declined_ops() as declined:
        got = _recorded_step(fwAD, w, tw, x, seed=11)
    assert "aten.tanh.default" not in declined  # (the large: the mode's C++ path)
    torch.testing.assert_close(got, _recorded_step(native_ad, w, tw, x, seed=11))
    dualgen.set_kernel_backend("python")
    torch.testing.assert_close(got, _recorded_step(fwAD, w, tw, x, seed=11))
