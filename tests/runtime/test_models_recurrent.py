"""Recurrent modules under dualgen.forward_ad, with default settings: nn.LSTM
(stacked, bidirectional, batch_first, proj_size, with and without initial state or
biases, dropout, packed sequences), nn.GRU, nn.RNN (tanh and relu) and the three
cells, in train and eval mode, float32 and float64. In float32 on CPU nn.LSTM runs
aten::mkldnn_rnn_layer (native forward AD has no rule for it; dualgen's is
checked against central differences of the float64 module, which takes the
decomposed path); everything else is compared with torch.func.jvp. Tangents on
the input, and on the parameters for one case; also a Hessian-vector product
through the LSTM's fused backward (forward over reverse)."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn
from torch.func import functional_call
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence

import dualgen.forward_ad as fwAD

# torch's notice that it runs an LSTM with projections without oneDNN (the case
# that reaches the decomposed ops on purpose).
pytestmark = pytest.mark.filterwarnings(
    "ignore:LSTM with projections is not supported with oneDNN:UserWarning"
)

F32, F64 = torch.float32, torch.float64
SEED = 7  # dropout draws the same mask in every run


def flat(y) -> list:
    if isinstance(y, PackedSequence):
        return [y.data]
    if isinstance(y, torch.Tensor):
        return [y]
    return [t for x in y for t in flat(x)]


def rebuild(x, tensors):
    """`x` (a tensor, PackedSequence or nested tuple) with its tensors replaced in order."""
    it = iter(tensors)

    def go(v):
        if isinstance(v, PackedSequence):
            return v._replace(data=next(it))
        if isinstance(v, torch.Tensor):
            return next(it)
        return type(v)(go(a) for a in v)

    return go(x)


MODELS = {
    "lstm_stacked_bidirectional_batch_first": (
        lambda: nn.LSTM(3, 4, num_layers=2, bidirectional=True, batch_first=True),
        lambda: (torch.randn(2, 5, 3),),
    ),
    "lstm_initial_state": (
        lambda: nn.LSTM(3, 4),
        lambda: (torch.randn(5, 2, 3), (torch.randn(1, 2, 4), torch.randn(1, 2, 4))),
    ),
    "lstm_unbatched_no_bias": (
        lambda: nn.LSTM(3, 4, bias=False),
        lambda: (torch.randn(5, 3),),
    ),
    "lstm_dropout": (
        lambda: nn.LSTM(3, 4, num_layers=2, dropout=0.3),
        lambda: (torch.randn(5, 2, 3),),
    ),
    "lstm_proj": (
        lambda: nn.LSTM(3, 4, proj_size=2, num_layers=2),
        lambda: (torch.randn(5, 2, 3),),
    ),
    "lstm_packed": (
        lambda: nn.LSTM(3, 4, bidirectional=True),
        lambda: (pack_padded_sequence(torch.randn(5, 3, 3), [5, 3, 2]),),
    ),
    "gru_stacked_bidirectional": (
        lambda: nn.GRU(3, 4, num_layers=2, bidirectional=True, batch_first=True),
        lambda: (torch.randn(2, 5, 3),),
    ),
    "gru_packed": (
        lambda: nn.GRU(3, 4),
        lambda: (pack_padded_sequence(torch.randn(5, 3, 3), [5, 3, 2]),),
    ),
    "rnn_tanh": (
        lambda: nn.RNN(3, 4, num_layers=2),
        lambda: (torch.randn(5, 2, 3), torch.randn(2, 2, 4)),
    ),
    "rnn_relu": (
        lambda: nn.RNN(3, 4, nonlinearity="relu", bidirectional=True),
        lambda: (torch.randn(5, 2, 3),),
    ),
    "lstm_cell": (
        lambda: nn.LSTMCell(3, 4),
        lambda: (torch.randn(2, 3), (torch.randn(2, 4), torch.randn(2, 4))),
    ),
    "gru_cell": (lambda: nn.GRUCell(3, 4), lambda: (torch.randn(2, 3),)),
    "rnn_cell": (
        lambda: nn.RNNCell(3, 4, nonlinearity="relu"),
        lambda: (torch.randn(2, 3),),
    ),
}

# Where native forward AD fails: float32 nn.LSTM without projections or packing
# reaches aten::mkldnn_rnn_layer.
FUSED = {
    "lstm_stacked_bidirectional_batch_first",
    "lstm_initial_state",
    "lstm_unbatched_no_bias",
    "lstm_dropout",
}


def make(name, dtype, train):
    torch.manual_seed(0)
    module_fn, inputs_fn = MODELS[name]
    module = module_fn().to(dtype).train(train)
    inputs = inputs_fn()
    inputs = rebuild(inputs, [t.to(dtype) for t in flat(inputs)])
    return module, inputs


def dualgen_jvp(module, inputs, input_tangents, param_tangents=None):
    params = dict(module.named_parameters())
    with fwAD.dual_level():
        x = rebuild(
            inputs, [fwAD.make_dual(t, u) for t, u in zip(flat(inputs), input_tangents)]
        )
        if param_tangents is not None:
            params = {
                k: fwAD.make_dual(p.detach(), param_tangents[k])
                for k, p in params.items()
            }
        torch.manual_seed(SEED)
        outputs = flat(functional_call(module, params, x))
        return [fwAD.unpack_dual(o).tangent for o in outputs], outputs


def central_differences(module, inputs, input_tangents, param_tangents=None, eps=1e-6):
    """The directional derivative of the float64 copy of the module."""
    m64 = copy.deepcopy(module).double()
    params = {k: p.detach() for k, p in m64.named_parameters()}

    def at(s):
        x = rebuild(
            inputs,
            [t.double() + s * u.double() for t, u in zip(flat(inputs), input_tangents)],
        )
        p = params
        if param_tangents is not None:
            p = {k: v + s * param_tangents[k].double() for k, v in params.items()}
        torch.manual_seed(SEED)
        with torch.no_grad():
            return flat(functional_call(m64, p, x))

    return [(a - b) / (2 * eps) for a, b in zip(at(eps), at(-eps))]


def native_jvp(module, inputs, input_tangents):
    def f(*xs):
        torch.manual_seed(SEED)
        return tuple(flat(module(*rebuild(inputs, xs))))

    return list(torch.func.jvp(f, tuple(flat(inputs)), tuple(input_tangents))[1])


def assert_tangents(tangents, outputs, expected, tol):
    assert len(tangents) == len(expected)
    for t, o, e in zip(tangents, outputs, expected):
        t = torch.zeros_like(o) if t is None else t
        assert t.dtype == o.dtype
        torch.testing.assert_close(t.double(), e.double(), rtol=tol, atol=tol)


@pytest.mark.parametrize("train", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("dtype", [F32, F64], ids=["float32", "float64"])
@pytest.mark.parametrize("name", list(MODELS))
def test_input_tangents(name, dtype, train):
    module, inputs = make(name, dtype, train)
    tangents = [torch.randn_like(t) for t in flat(inputs)]
    got, outputs = dualgen_jvp(module, inputs, tangents)
    if (dtype == F32 and name in FUSED) or "packed" in name:
        # (torch.func.jvp cannot run packed sequences: their batch_sizes are read
        # as data, which functorch's wrappers refuse.)
        expected, tol = central_differences(module, inputs, tangents), 1e-5
    else:
        expected, tol = native_jvp(module, inputs, tangents), (
            1e-5 if dtype == F32 else 1e-10
        )
    assert_tangents(got, outputs, expected, tol)


def test_native_forward_ad_fails_on_the_fused_lstm_layer():
    module, inputs = make("lstm_initial_state", F32, True)
    import torch.autograd.forward_ad as native

    with (
        pytest.raises(NotImplementedError, match="mkldnn_rnn_layer"),
        native.dual_level(),
    ):
        module(native.make_dual(inputs[0], torch.randn_like(inputs[0])), inputs[1])


@pytest.mark.parametrize("train", [True, False], ids=["train", "eval"])
def test_parameter_tangents_fused_lstm(train):
    module, inputs = make("lstm_stacked_bidirectional_batch_first", F32, train)
    tangents = [torch.randn_like(t) for t in flat(inputs)]
    param_tangents = {k: torch.randn_like(p) for k, p in module.named_parameters()}
    got, outputs = dualgen_jvp(module, inputs, tangents, param_tangents)
    expected = central_differences(module, inputs, tangents, param_tangents)
    assert_tangents(got, outputs, expected, 1e-5)


def test_hessian_vector_product_through_the_fused_lstm_backward():
    """Forward over reverse: autograd's backward of mkldnn_rnn_layer
    (mkldnn_rnn_layer_backward) with tangents on the parameters."""
    module, (x,) = make("lstm_stacked_bidirectional_batch_first", F32, True)
    names = [k for k, _ in module.named_parameters()]
    params = [p.detach().requires_grad_() for p in module.parameters()]
    v = [torch.randn_like(p) for p in params]

    def loss(m, ps, x):
        out, (h, c) = functional_call(m, dict(zip(names, ps)), (x,))
        return out.sin().sum() + (h * h).sum() + c.tanh().sum()

    with fwAD.dual_level():
        duals = [fwAD.make_dual(p, t) for p, t in zip(params, v)]
        grads = torch.autograd.grad(loss(module, duals, x), duals)
        hvp = [fwAD.unpack_dual(g).tangent for g in grads]

    m64, eps = copy.deepcopy(module).double(), 1e-6

    def grad64(s):
        ps = [
            (p.detach().double() + s * t.double()).requires_grad_()
            for p, t in zip(params, v)
        ]
        return torch.autograd.grad(loss(m64, ps, x.double()), ps)

    expected = [(a - b) / (2 * eps) for a, b in zip(grad64(eps), grad64(-eps))]
    for h, e in zip(hvp, expected):
        torch.testing.assert_close(h.double(), e, rtol=1e-4, atol=1e-4)
