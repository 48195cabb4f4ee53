"""Quantization-aware training under dualgen.forward_ad, where native forward AD
has no rule (PyTorch 2.13): `prepare_qat` models with the default QAT qconfig
(FusedMovingAvgObsFakeQuantize: aten::_fused_moving_avg_obs_fq_helper, per tensor
and per channel), with FakeQuantize (fake_quantize_per_tensor_affine /
_per_channel_affine, reaching the cachemask ops) and with _LearnableFakeQuantize
(learnable scale and zero point), in train mode.

Fake quantization is piecewise constant; autograd differentiates it by the
straight-through estimator, and dualgen's JVPs are the transposes of those VJPs,
so forward gradients are backprop's: for a scalar loss L, the tangent of L along
u equals <grad L, u>, with tangents on the input and on the parameters (the
learnable scales and zero points included). Finite differences see the true
derivative (zero almost everywhere) and cannot serve. The values (outputs and the
cachemask ops' masks) are native's, bit for bit, and the observers' buffers are
updated exactly once per forward, as in a plain forward.

Each op is also checked alone: its tangent against autograd's gradient (the
adjoint identity) in float32 and float64 wherever native's backward runs."""

from __future__ import annotations

import copy
import warnings

import pytest
import torch
import torch.ao.quantization as tq
from torch import nn
from torch.ao.quantization._learnable_fake_quantize import _LearnableFakeQuantize

import dualgen.forward_ad as fwAD

aten = torch.ops.aten
F32, F64 = torch.float32, torch.float64

pytestmark = pytest.mark.filterwarnings(
    "ignore:torch.ao.quantization is deprecated:DeprecationWarning"
)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # observers' notes
        yield


# ---------------------------------------------------------------- QAT models


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.quant = tq.QuantStub()
        self.conv = nn.Conv2d(2, 4, 3)
        self.relu = nn.ReLU()
        self.fc = nn.Linear(4 * 4 * 4, 5)
        self.dequant = tq.DeQuantStub()

    def forward(self, x):
        x = self.relu(self.conv(self.quant(x)))
        return self.dequant(self.fc(x.flatten(1)))


def _learnable_qconfig():
    activation = _LearnableFakeQuantize.with_args(
        observer=tq.MovingAverageMinMaxObserver,
        quant_min=0,
        quant_max=255,
        scale=0.05,
        zero_point=0.0,
        use_grad_scaling=True,
    )
    weight = _LearnableFakeQuantize.with_args(
        observer=tq.MovingAveragePerChannelMinMaxObserver,
        quant_min=-128,
        quant_max=127,
        dtype=torch.qint8,
        qscheme=torch.per_channel_symmetric,
        scale=0.05,
        zero_point=0.0,
        channel_len=4,
        use_grad_scaling=True,
    )
    return tq.QConfig(activation=activation, weight=weight)


QCONFIGS = {
    # FusedMovingAvgObsFakeQuantize: _fused_moving_avg_obs_fq_helper
    "default": lambda: tq.get_default_qat_qconfig("x86"),
    # FakeQuantize: the cachemask ops (tensor qparams, per channel)
    "fake_quantize": lambda: tq.QConfig(
        activation=tq.default_fake_quant,
        weight=tq.default_per_channel_weight_fake_quant,
    ),
    # _LearnableFakeQuantize: the learnable per-tensor and per-channel ops
    "learnable": _learnable_qconfig,
}


def qat_model(kind: str) -> nn.Module:
    m = Net().train()
    m.qconfig = QCONFIGS[kind]()
    tq.prepare_qat(m, inplace=True)
    if kind == "learnable":
        m.fc.weight_fake_quant = _learnable_qconfig().weight(channel_len=5)
        for fq in m.modules():
            if isinstance(fq, _LearnableFakeQuantize):
                fq.enable_param_learning()  # learn scale and zero point
    with torch.no_grad():
        m(torch.randn(3, 2, 6, 6))  # observe once: nontrivial ranges
    return m


def _buffers(m: nn.Module) -> dict:
    return {n: b.detach().clone() for n, b in m.named_buffers()}


def _assert_same_buffers(a: dict, b: dict):
    assert a.keys() == b.keys()
    for n, value in a.items():
        assert torch.equal(value, b[n]), f"buffer {n} differs"


@pytest.mark.parametrize("params", [False, True], ids=["input", "input+params"])
@pytest.mark.parametrize("kind", list(QCONFIGS))
def test_qat_forward_gradient_is_backprop(kind, params):
    model = qat_model(kind)
    plain, backprop, dual = (copy.deepcopy(model) for _ in range(3))
    before = _buffers(model)
    x = torch.randn(3, 2, 6, 6)
    w = torch.randn(3, 5)  # L = sum(w * out)
    names = [n for n, _ in model.named_parameters()] if params else []

    # a plain forward: the values and buffers to reproduce
    with torch.no_grad():
        expected = plain(x)
    after = _buffers(plain)
    changed = [n for n in after if not torch.equal(after[n], before[n])]
    # (learning its scale and zero point, _LearnableFakeQuantize observes nothing)
    assert bool(changed) == (kind != "learnable"), changed

    # backprop: grad L
    leaves = {
        n: p.detach().clone().requires_grad_() for n, p in backprop.named_parameters()
    }
    xs = x.clone().requires_grad_()
    out = torch.func.functional_call(backprop, leaves, (xs,))
    grads = torch.autograd.grad((w * out).sum(), [xs, *(leaves[n] for n in names)])
    _assert_same_buffers(_buffers(backprop), after)

    # forward mode: the tangent of L along u
    u = [torch.randn_like(x), *(torch.randn_like(leaves[n]) for n in names)]
    with fwAD.dual_level():
        duals = {n: p.detach() for n, p in dual.named_parameters()}
        for n, t in zip(names, u[1:]):
            duals[n] = fwAD.make_dual(duals[n], t)
        out = torch.func.functional_call(dual, duals, (fwAD.make_dual(x, u[0]),))
        value, tangent = fwAD.unpack_dual(out)
        loss_tangent = fwAD.unpack_dual((w * out).sum()).tangent
    assert torch.equal(value, expected)  # forward values unchanged
    _assert_same_buffers(_buffers(dual), after)  # observers updated once
    assert tangent is not None
    expected_tangent = sum((g * t).sum() for g, t in zip(grads, u))
    torch.testing.assert_close(loss_tangent, expected_tangent, rtol=1e-4, atol=1e-4)


def test_qat_learnable_scale_tangent_reaches_the_loss():
    """A tangent on a learnable scale alone moves the loss as backprop says."""
    model = qat_model("learnable")
    name = "fc.activation_post_process.scale"
    assert name in dict(model.named_parameters())
    x, w = torch.randn(3, 2, 6, 6), torch.randn(3, 5)
    backprop, dual = copy.deepcopy(model), copy.deepcopy(model)
    (g,) = torch.autograd.grad(
        (w * backprop(x)).sum(), [dict(backprop.named_parameters())[name]]
    )
    assert g.abs().sum() > 0
    t = torch.ones(1)
    with fwAD.dual_level():
        params = {n: p.detach() for n, p in dual.named_parameters()}
        params[name] = fwAD.make_dual(params[name], t)
        out = torch.func.functional_call(dual, params, (x,))
        tangent = fwAD.unpack_dual((w * out).sum()).tangent
    torch.testing.assert_close(tangent, (g * t).sum(), rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------- the ops alone


def _fused_state(n):
    """Observer state: running min and max, scale, zero point."""
    return [
        torch.full((n,), -1.0),
        torch.full((n,), 0.5),
        torch.full((n,), 0.1),
        torch.zeros(n, dtype=torch.int32),
    ]


def _fused(observer_on=1, per_row=False, state=None):
    """The fused op on `state`, else on fresh state at each call (so that every
    call sees the same observer state)."""
    extra = (0.01, -8, 7, 0, per_row, per_row) if per_row else (0.01, 0, 15, 0)

    def fn(y):
        n = y.shape[0] if per_row else 1
        buffers = state if state is not None else _fused_state(n)
        flags = (torch.tensor([observer_on]), torch.tensor([1]))
        return aten._fused_moving_avg_obs_fq_helper(y, *flags, *buffers, *extra)

    return fn


def _op_cases(dtype):
    """(name, fn of the differentiable inputs, inputs); fn returns the op's
    outputs (a tuple). Scales are float32 where native wants them so."""
    x = torch.randn(4, 5, dtype=dtype) * 2
    qp = {"dtype": dtype}
    cases = [
        (
            "per_tensor_cachemask",
            lambda y: aten.fake_quantize_per_tensor_affine_cachemask(y, 0.1, 3, 0, 15),
            [x],
        ),
        (
            "tensor_qparams",
            lambda y: aten._fake_quantize_per_tensor_affine_cachemask_tensor_qparams(
                y,
                torch.tensor([0.1], **qp),
                torch.tensor([2]),
                torch.tensor([1]),
                0,
                15,
            ),
            [x],
        ),
        (
            "per_channel_cachemask",
            lambda y: aten.fake_quantize_per_channel_affine_cachemask(
                y,
                torch.rand(5) * 0.2 + 0.05,
                torch.arange(5, dtype=torch.int32),
                1,
                -8,
                7,
            ),
            [x],
        ),
        (
            "learnable_per_tensor",
            lambda y, s, z: (
                aten._fake_quantize_learnable_per_tensor_affine(y, s, z, -8, 7, 0.5),
            ),
            [x, torch.tensor([0.1], **qp), torch.tensor([1.3], **qp)],
        ),
    ]
    if dtype == F32:  # native's observer and per-channel learnable: float32 only
        for observer_on, per_row in [(1, False), (1, True), (0, False)]:
            fn = _fused(observer_on, per_row)
            cases.append((f"fused_obs{observer_on}_row{int(per_row)}", fn, [x]))
        cases.append(
            (
                "learnable_per_channel",
                lambda y, s, z: (
                    aten._fake_quantize_learnable_per_channel_affine(
                        y, s, z, 1, -8, 7, 1.0
                    ),
                ),
                [x, torch.rand(5) * 0.2 + 0.05, torch.randn(5) * 3],
            )
        )
    return cases


def _native_backward_runs(name, dtype):
    return dtype == F32 or name != "learnable_per_tensor"


@pytest.mark.parametrize("dtype", [F32, F64], ids=["float32", "float64"])
def test_each_op_jvp_is_the_transpose_of_autograds_vjp(dtype):
    for name, fn, inputs in _op_cases(dtype):
        torch.manual_seed(1)
        u = [torch.randn_like(t) for t in inputs]
        # forward values, and the op's tangent under dualgen (outputs: output, mask)
        torch.manual_seed(2)
        plain = fn(*inputs)
        torch.manual_seed(2)
        with fwAD.dual_level():
            outs = fn(*[fwAD.make_dual(t, d) for t, d in zip(inputs, u)])
            unpacked = [fwAD.unpack_dual(o) for o in outs]
        for p, d in zip(plain, unpacked):
            assert torch.equal(p, d.primal), f"{name}: values changed"
        assert all(d.tangent is None for d in unpacked[1:]), f"{name}: mask tangent"
        tangent = unpacked[0].tangent
        assert tangent is not None and tangent.dtype == dtype, name
        v = torch.randn_like(plain[0])
        if _native_backward_runs(name, dtype):
            leaves = [t.clone().requires_grad_() for t in inputs]
            torch.manual_seed(2)
            grads = torch.autograd.grad(fn(*leaves)[0], leaves, v)
            ref_u = u
        else:  # native's backward runs in float32 only: its float32 gradients
            leaves = [t.float().requires_grad_() for t in inputs]
            grads = torch.autograd.grad(fn(*leaves)[0], leaves, v.float())
            ref_u = [t.float() for t in u]
        forward = (v * tangent).sum().double()
        backward = sum((g.double() * t.double()).sum() for g, t in zip(grads, ref_u))
        tol = 1e-12 if _native_backward_runs(name, dtype) and dtype == F64 else 1e-4
        assert (forward - backward).abs() <= tol * (1 + backward.abs()), (
            name,
            forward,
            backward,
        )


def test_fused_observer_updates_once():
    """The fused op's in-place observer update happens once under dualgen."""
    x, t = torch.randn(4, 5), torch.randn(4, 5)
    for per_row in [False, True]:
        n = 4 if per_row else 1
        state_plain, state_dual = _fused_state(n), _fused_state(n)
        _fused(1, per_row, state_plain)(x)
        with fwAD.dual_level():
            _fused(1, per_row, state_dual)(fwAD.make_dual(x, t))
        assert not torch.equal(state_plain[0], _fused_state(n)[0])  # it observed
        for a, b in zip(state_plain, state_dual):
            assert torch.equal(a, b)
