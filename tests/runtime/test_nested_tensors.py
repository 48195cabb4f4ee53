"""Nested tensors as duals (torch.nested): the jagged layout, whose tangent lives on
its values (dispatch/jagged.py), and the strided layout, whose tangent is a nested
tensor of the same components (nested_layout.py). Native forward AD raises on
both. Each program is checked against two oracles that share nothing with the
nested code paths: the same program run component by component on plain tensors
under native forward AD, and central differences of the nested program itself.
Both kernel backends."""

from __future__ import annotations

import pytest
import torch
import torch.autograd.forward_ad as native_fwAD
import torch.nn.functional as F

import dualgen.forward_ad as fwAD

DTYPE = torch.float64
LENGTHS = (2, 5, 3)
D = 6


def _rand(*shape, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=DTYPE).to(torch.get_default_device())


COMPONENTS = [_rand(n, D, seed=i) for i, n in enumerate(LENGTHS)]
TANGENTS = [_rand(n, D, seed=10 + i) for i, n in enumerate(LENGTHS)]
WEIGHT = _rand(4, D, seed=20)
BIAS = _rand(4, seed=21)


def _heads(x):
    """(n, D) -> (2, n, 3) per component; (B, j, D) -> (B, 2, j, 3) nested."""
    if x.is_nested:
        return x.unflatten(-1, (2, 3)).transpose(1, 2)
    return x.unflatten(-1, (2, 3)).transpose(0, 1)


def _merge(x):
    if x.is_nested:
        return x.transpose(1, 2).flatten(-2)
    return x.transpose(0, 1).flatten(-2)


def _attention(x):
    q = _heads(x)
    return _merge(F.scaled_dot_product_attention(q, q.sin(), q.cos()))


def _sdpa_written(q, k, v):
    """Attention in plain ops: the oracle's (native forward AD has no rule for
    the fused CPU kernel torch 2.14 picks for float64)."""
    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    return scores.softmax(-1) @ v


def _attention_written(c):
    q = _heads(c)
    return _merge(_sdpa_written(q, q.sin(), q.cos()))


# name -> (the program on a nested tensor, the same on one component)
PROGRAMS = {
    "sin_times_2": (lambda x: x.sin() * 2, lambda c: c.sin() * 2),
    "linear": (
        lambda x: F.linear(x, WEIGHT, BIAS),
        lambda c: F.linear(c, WEIGHT, BIAS),
    ),
    "softmax": (lambda x: x.softmax(-1), lambda c: c.softmax(-1)),
    "layer_norm": (lambda x: F.layer_norm(x, (D,)), lambda c: F.layer_norm(c, (D,))),
    "gelu_then_exp": (lambda x: F.gelu(x).exp(), lambda c: F.gelu(c).exp()),
    "sum_last_dim": (lambda x: x.sum(-1), lambda c: c.sum(-1)),
    "matmul_dense": (lambda x: x @ WEIGHT.T, lambda c: c @ WEIGHT.T),
    "attention": (_attention, _attention_written),
    "in_place": (
        lambda x: x.clone().mul_(x).add_(1.5),
        lambda c: c.clone().mul_(c).add_(1.5),
    ),
}


def _jagged(components):
    return torch.nested.as_nested_tensor(components, layout=torch.jagged)


def _per_component(program, components, tangents):
    """The oracle: native forward AD on each component."""
    with native_fwAD.dual_level():
        return [
            native_fwAD.unpack_dual(program(native_fwAD.make_dual(c, t))).tangent
            for c, t in zip(components, tangents)
        ]


def _central_differences(program, components, tangents, h=1e-6):
    """The other oracle: (f(x + h t) - f(x - h t)) / 2h per component, the nested
    program run on plain nested tensors."""
    plus = program(_jagged([c + h * t for c, t in zip(components, tangents)]))
    minus = program(_jagged([c - h * t for c, t in zip(components, tangents)]))
    return [(p - m) / (2 * h) for p, m in zip(plus.unbind(), minus.unbind())]


def _close(got, expected, tol):
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e, atol=tol, rtol=tol)


@pytest.mark.parametrize("name", PROGRAMS)
def test_jagged_program_tangent(backend, name):
    nested_program, component_program = PROGRAMS[name]
    primal = _jagged(COMPONENTS)
    tangent = torch.nested.nested_tensor_from_jagged(
        torch.cat(TANGENTS), primal.offsets()
    )
    with fwAD.dual_level():
        out = nested_program(fwAD.make_dual(primal, tangent))
        value, out_tangent = fwAD.unpack_dual(out)
    assert out_tangent is not None and out_tangent.is_nested
    assert out_tangent.layout is torch.jagged
    assert out_tangent.offsets() is value.offsets()  # the same components
    got = out_tangent.unbind()
    _close(got, _per_component(component_program, COMPONENTS, TANGENTS), 1e-10)
    _close(got, _central_differences(nested_program, COMPONENTS, TANGENTS), 1e-6)
    _close(value.unbind(), [component_program(c) for c in COMPONENTS], 1e-12)


def test_jagged_reduction_over_the_ragged_dim_and_padding(backend):
    """Through the padded layout (_jagged_to_padded_dense_forward and back)."""
    primal = _jagged(COMPONENTS)
    tangent = _jagged(TANGENTS)
    with fwAD.dual_level():
        dual = fwAD.make_dual(primal, tangent)
        mean = fwAD.unpack_dual(dual.mean(1)).tangent
        padded = fwAD.unpack_dual(torch.nested.to_padded_tensor(dual.exp(), -1.0))
    expected_mean = torch.stack([t.mean(0) for t in TANGENTS])
    torch.testing.assert_close(mean, expected_mean, atol=1e-12, rtol=0)
    width = max(LENGTHS)
    for i, (c, t) in enumerate(zip(COMPONENTS, TANGENTS)):
        n = c.shape[0]
        torch.testing.assert_close(padded.tangent[i, :n], t * c.exp())
        # padding is a constant: its tangent is zero, not the padding value
        assert padded.tangent[i, n:width].abs().max().item() == 0 if n < width else True
        assert (padded.primal[i, n:width] == -1.0).all()


def test_jagged_unbind_and_constructors_from_duals(backend):
    with fwAD.dual_level():
        duals = [fwAD.make_dual(c, t) for c, t in zip(COMPONENTS, TANGENTS)]
        nested = torch.nested.as_nested_tensor(duals, layout=torch.jagged)
        _close(fwAD.unpack_dual(nested).tangent.unbind(), TANGENTS, 0)
        parts = nested.unbind()
        _close([fwAD.unpack_dual(p).tangent for p in parts], TANGENTS, 0)
        values = fwAD.make_dual(torch.cat(COMPONENTS), torch.cat(TANGENTS))
        viewed = torch.nested.nested_tensor_from_jagged(values, nested.offsets())
        _close(
            fwAD.unpack_dual(viewed.cos()).tangent.unbind(),
            [-c.sin() * t for c, t in zip(COMPONENTS, TANGENTS)],
            1e-12,
        )


def test_jagged_without_a_tangent_times_a_dual_parameter(backend):
    """The tangent comes from a plain operand: the subclass's op on its values
    reads the parameter's tangent."""
    scale, scale_t = _rand(D, seed=50), _rand(D, seed=51)
    with fwAD.dual_level():
        out = (_jagged(COMPONENTS) * fwAD.make_dual(scale, scale_t)).sin()
        got = fwAD.unpack_dual(out).tangent.unbind()
    _close(got, [(c * scale).cos() * c * scale_t for c in COMPONENTS], 1e-12)


def test_jagged_through_func_jvp(backend):
    from dualgen import func

    primal, tangent = _jagged(COMPONENTS), _jagged(TANGENTS)
    _, jvp_out = func.jvp(lambda x: F.silu(x) * 2, (primal,), (tangent,))
    expected = _per_component(lambda c: F.silu(c) * 2, COMPONENTS, TANGENTS)
    _close(jvp_out.unbind(), expected, 1e-12)


def test_strided_view_of_a_buffer(backend):
    buffer, buffer_t = _rand(20, seed=60), _rand(20, seed=61)
    sizes = torch.tensor([[2, 4], [3, 4]])
    strides = torch.tensor([[4, 1], [4, 1]])
    offsets = torch.tensor([0, 8])
    with fwAD.dual_level():
        dual = fwAD.make_dual(buffer, buffer_t)
        view = torch.ops.aten._nested_view_from_buffer(dual, sizes, strides, offsets)
        parts = fwAD.unpack_dual(view * 3).tangent.unbind()
    _close(parts, [3 * buffer_t[:8].view(2, 4), 3 * buffer_t[8:].view(3, 4)], 1e-12)


def test_jagged_with_lengths(backend):
    """A nested tensor viewing part of each row (lengths besides offsets)."""
    values = _rand(12, D, seed=30)
    values_t = _rand(12, D, seed=31)
    offsets = torch.tensor([0, 4, 9, 12], device=values.device)
    lengths = torch.tensor([2, 5, 1], device=values.device)
    with fwAD.dual_level():
        dual_values = fwAD.make_dual(values, values_t)
        nested = torch.nested.nested_tensor_from_jagged(dual_values, offsets, lengths)
        out = fwAD.unpack_dual(nested.tanh() * 3).tangent.values()
    expected = values_t * 3 / values.cosh().square()
    torch.testing.assert_close(out, expected)


def test_jagged_second_order_through_two_levels(backend):
    """d²/ds² of sum(sin(x + s t)) = -sum(sin(x) t²), through nested levels."""
    primal = _jagged(COMPONENTS)
    tangent = _jagged(TANGENTS)
    with fwAD.dual_level():
        inner = fwAD.make_dual(primal, tangent)
        with fwAD.dual_level():
            outer = fwAD.make_dual(inner, tangent)
            first = fwAD.unpack_dual(outer.sin()).tangent
        second = fwAD.unpack_dual(first).tangent
    expected = [-c.sin() * t * t for c, t in zip(COMPONENTS, TANGENTS)]
    _close(second.unbind(), expected, 1e-12)


def test_jagged_tangent_must_have_the_primals_components(backend):
    primal = _jagged(COMPONENTS)
    other = _jagged([t[:1] for t in TANGENTS])
    with fwAD.dual_level():
        with pytest.raises(RuntimeError, match="same offsets"):
            fwAD.make_dual(primal, other)
        with pytest.raises(RuntimeError, match="not one"):
            fwAD.make_dual(primal, torch.cat(TANGENTS))


def test_jagged_forward_over_reverse(backend):
    """The gradient of sum(tangent of softmax(linear)) with respect to the
    weight, against central differences of that tangent."""
    primal = _jagged(COMPONENTS)
    tangent = _jagged(TANGENTS)

    def directional(weight):
        with fwAD.dual_level():
            out = F.linear(fwAD.make_dual(primal, tangent), weight).softmax(-1)
            return fwAD.unpack_dual(out).tangent.values().square().sum()

    weight = WEIGHT.clone().requires_grad_()
    (grad,) = torch.autograd.grad(directional(weight), weight)
    h = 1e-6
    direction = _rand(*WEIGHT.shape, seed=40)
    expected = (
        directional(WEIGHT + h * direction) - directional(WEIGHT - h * direction)
    ) / (2 * h)
    torch.testing.assert_close((grad * direction).sum(), expected, atol=1e-6, rtol=1e-6)


# ---------------------------------------------------------------- strided layout


def _strided(components):
    return torch.nested.as_nested_tensor(components)


STRIDED_PROGRAMS = {
    "sin_times_2": (lambda x: x.sin() * 2, lambda c: c.sin() * 2),
    "softmax": (lambda x: x.softmax(-1), lambda c: c.softmax(-1)),
    "matmul_nested": (
        lambda x: x.matmul(x.transpose(-2, -1).contiguous().sin()),
        lambda c: c.matmul(c.transpose(-2, -1).sin()),
    ),
    "linear": (lambda x: F.linear(x, WEIGHT), lambda c: F.linear(c, WEIGHT)),
}


@pytest.mark.parametrize("name", STRIDED_PROGRAMS)
def test_strided_program_tangent(backend, name):
    nested_program, component_program = STRIDED_PROGRAMS[name]
    with fwAD.dual_level():
        dual = fwAD.make_dual(_strided(COMPONENTS), _strided(TANGENTS))
        out = nested_program(dual)
        tangent = fwAD.unpack_dual(out).tangent
    assert tangent is not None and tangent.is_nested
    _close(
        tangent.unbind(), _per_component(component_program, COMPONENTS, TANGENTS), 1e-10
    )


def test_strided_constructors_padding_and_values(backend):
    mask = torch.tensor([[True] * n + [False] * (5 - n) for n in LENGTHS])
    padded = torch.nested.to_padded_tensor(_strided(COMPONENTS), 0.0)
    padded_t = torch.nested.to_padded_tensor(_strided(TANGENTS), 0.0)
    with fwAD.dual_level():
        dual = fwAD.make_dual(padded, padded_t)
        from_mask = torch._nested_tensor_from_mask(dual, mask.to(dual.device))
        _close(fwAD.unpack_dual(from_mask).tangent.unbind(), TANGENTS, 0)
        back = torch.nested.to_padded_tensor(from_mask * 2, 7.0)
        torch.testing.assert_close(fwAD.unpack_dual(back).tangent, 2 * padded_t)
        values = fwAD.unpack_dual(from_mask.values()).tangent
        torch.testing.assert_close(values, torch.cat([t.flatten() for t in TANGENTS]))


def test_strided_tangent_must_have_the_primals_components(backend):
    with fwAD.dual_level(), pytest.raises(RuntimeError, match="different size"):
        fwAD.make_dual(_strided(COMPONENTS), _strided([t[:1] for t in TANGENTS]))


# ---------------------------------------------------------------- a model


class _Block(torch.nn.Module):
    """A pre-norm transformer block; `attention=False` mixes the heads
    element-wise instead (forward over reverse: below)."""

    def __init__(self, attention: bool = True):
        super().__init__()
        g = torch.Generator().manual_seed(70)
        self.attention = attention
        self.qkv = torch.nn.Linear(D, 3 * D, dtype=DTYPE)
        self.out = torch.nn.Linear(D, D, dtype=DTYPE)
        self.norm1 = torch.nn.LayerNorm(D, dtype=DTYPE)
        self.norm2 = torch.nn.LayerNorm(D, dtype=DTYPE)
        self.mlp = torch.nn.Sequential(
            torch.nn.Linear(D, 10, dtype=DTYPE),
            torch.nn.GELU(),
            torch.nn.Linear(10, D, dtype=DTYPE),
        )
        with torch.no_grad():
            for p in self.parameters():
                p.copy_(torch.randn(p.shape, generator=g, dtype=DTYPE))
        self.to(torch.get_default_device())

    def forward(self, x):
        # (jagged attention takes q, k, v contiguous before the head split)
        q, k, v = (t.contiguous() for t in self.qkv(self.norm1(x)).chunk(3, -1))
        attend = F.scaled_dot_product_attention if x.is_nested else _sdpa_written
        mixed = _merge(attend(_heads(q), _heads(k), _heads(v)))
        x = x + self.out(mixed if self.attention else q * k.sigmoid() + v)
        return x + self.mlp(self.norm2(x))


def _parameter_duals(module, make_dual, seed):
    return {
        name: make_dual(p.detach(), _rand(*p.shape, seed=seed + i))
        for i, (name, p) in enumerate(module.named_parameters())
    }


def test_transformer_block_with_dual_parameters(backend):
    block = _Block()
    with fwAD.dual_level():
        params = _parameter_duals(block, fwAD.make_dual, 80)
        x = fwAD.make_dual(_jagged(COMPONENTS), _jagged(TANGENTS))
        got = fwAD.unpack_dual(torch.func.functional_call(block, params, (x,)))
    with native_fwAD.dual_level():
        params = _parameter_duals(block, native_fwAD.make_dual, 80)
        expected = [
            native_fwAD.unpack_dual(
                torch.func.functional_call(
                    block, params, (native_fwAD.make_dual(c, t),)
                )
            ).tangent
            for c, t in zip(COMPONENTS, TANGENTS)
        ]
    _close(got.tangent.unbind(), expected, 1e-10)


def test_transformer_block_forward_over_reverse(backend):
    """The gradient, with respect to the parameters, of the squared tangent's
    sum, against central differences. (Without attention: on CPU jagged attention
    runs through strided nested tensors, whose softmax torch's autograd cannot
    differentiate twice: its backward broadcasts, which they refuse.)"""
    block = _Block(attention=False)
    names = [name for name, _ in block.named_parameters()]

    def loss(values):
        with fwAD.dual_level():
            x = fwAD.make_dual(_jagged(COMPONENTS), _jagged(TANGENTS))
            out = torch.func.functional_call(block, dict(zip(names, values)), (x,))
            return fwAD.unpack_dual(out).tangent.values().square().sum()

    values = [p.detach().clone().requires_grad_() for p in block.parameters()]
    grads = torch.autograd.grad(loss(values), values, allow_unused=True)
    directions = [_rand(*v.shape, seed=90 + i) for i, v in enumerate(values)]
    h = 1e-6
    plus = loss([v.detach() + h * d for v, d in zip(values, directions)])
    minus = loss([v.detach() - h * d for v, d in zip(values, directions)])
    along = sum((g * d).sum() for g, d in zip(grads, directions) if g is not None)
    torch.testing.assert_close(along, (plus - minus) / (2 * h), atol=1e-5, rtol=1e-6)
