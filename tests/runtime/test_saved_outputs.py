"""The two stores of saved outputs (levels.SavedOutputs and its C++ twin, which
levels entered under the C++ backend hold) behave alike: an entry is found again
by a tensor with the output's geometry and memory (autograd's rebuilt saved
output), not by one with the same geometry in other memory, and it goes when
its memory does; the output itself is not held."""

from __future__ import annotations

import gc
import weakref

import pytest
import torch

import dualgen
import dualgen.forward_ad as fwAD
from dualgen import cpp
from dualgen.levels import STATE, SavedOutputs


def _stores():
    yield pytest.param(SavedOutputs, id="python")
    if cpp.state() == "built":
        yield pytest.param(lambda: cpp.extension().SavedOutputs(), id="cpp")


@pytest.fixture(params=list(_stores()))
def store(request):
    return request.param()


def test_found_by_geometry_and_memory(store):
    out = torch.randn(4, 3)
    entries = {"level": torch.ones(4, 3)}
    store.remember(out, entries)
    assert len(store) == 1
    assert store.find(out) is entries
    rebuilt = out.detach()  # a new tensor object on the same memory, as autograd's
    assert rebuilt is not out and store.find(rebuilt) is entries
    assert store.find(out.t()) is None  # same memory, other geometry
    assert store.find(out[1:]) is None
    elsewhere = torch.empty_strided(out.shape, out.stride())
    assert store.find(elsewhere) is None


def test_entry_goes_with_its_memory(store):
    out = torch.randn(8)
    tangent = torch.randn(8)
    store.remember(out, {"level": tangent})
    view = out[2:]
    store.remember(view, {"level": tangent[2:]})
    assert len(store) == 2
    out_ref = weakref.ref(out)
    del out
    gc.collect()
    assert len(store) == 2  # the view keeps the memory
    del view
    gc.collect()
    assert out_ref() is None  # the store held neither output
    assert len(store) == 0


def test_remembering_again_replaces(store):
    out = torch.randn(3)
    store.remember(out, {"a": 1})
    store.remember(out, {"b": 2})
    assert len(store) == 1 and store.find(out) == {"b": 2}
    store.clear()
    assert len(store) == 0 and store.find(out) is None
    del out
    gc.collect()  # no callback into the cleared store's old entries


def test_levels_hold_the_backends_store():
    in_use = dualgen.kernel_backend()
    for backend in ("python", "cpp") if cpp.state() == "built" else ("python",):
        dualgen.set_kernel_backend(backend)
        try:
            with fwAD.dual_level():
                saved = STATE.levels[-1].saved
                assert (type(saved) is SavedOutputs) == (backend == "python")
        finally:
            dualgen.set_kernel_backend(in_use)


@pytest.mark.parametrize("how", ["requires_grad_", "detach_then_view"])
def test_a_detached_output_made_a_leaf_has_no_tangent(backend, how):
    """`y.detach().requires_grad_()` shares y's geometry and memory, as autograd's
    rebuilt saved output does, but it is a new leaf: no tangent (native gives
    none), at the leaf and through the ops that read it. A rebuilt saved output
    has a grad_fn; the leaf has not."""
    w = torch.randn(3, requires_grad=True)
    with fwAD.dual_level():
        x = fwAD.make_dual(torch.randn(3), torch.ones(3))
        y = torch.tanh(x * w)  # tanh saves its output: the level remembers it
        leaf = y.detach().requires_grad_()
        used = leaf * 2 if how == "requires_grad_" else leaf.view(3) * 2
        assert fwAD.unpack_dual(leaf).tangent is None
        assert fwAD.unpack_dual(used).tangent is None
        # the output itself keeps its tangent, and backward still finds it
        (grad,) = torch.autograd.grad(y.sum(), w, create_graph=True)
        assert fwAD.unpack_dual(y).tangent is not None
        assert fwAD.unpack_dual(grad).tangent is not None
