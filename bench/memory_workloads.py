"""The workloads of the memory benchmark (bench/memory.py), and how each method runs
them.

`build(workload, method)` makes the workload's inputs (tensors, tangents,
parameters) and returns the run: a function that computes the method once and
returns a tensor whose norm the runner compares across methods (the output's
tangent for the forward modes). Nothing here measures; the runner calls `build`
in a fresh process, then the run twice (warm-up, measured).

Methods: the plain call (`primal`), native forward AD as shipped (`native`) and with
the fused attention kernels off (`native-math`, the workaround a user of native
needs where it has no rule), `torch.func.jvp`, dualgen's forward AD (`dualgen` and
`dualgen-python`: the same code, the kernels chosen by DUALGEN_KERNELS when dualgen
is imported), and reverse mode on the same forward (`backprop`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from bench_models import make_convnet
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

METHODS = (
    "primal",
    "native",
    "native-math",
    "func.jvp",
    "dualgen",
    "dualgen-python",
    "backprop",
)
FORWARD_MODES = ("native", "native-math", "func.jvp", "dualgen", "dualgen-python")
# The kernels each dualgen method runs (DUALGEN_KERNELS in its process).
DUALGEN_BACKENDS = {"dualgen": "cpp", "dualgen-python": "python"}

Run = Callable[[], torch.Tensor]


@dataclass(frozen=True)
class Workload:
    name: str
    description: str
    build: Callable[[str], Run]  # method -> its run, inputs made
    # Runs a fused kernel native forward AD has no rule for: native-math applies.
    fused: bool = False
    # How far a forward mode's check may stray from the reference's (relative):
    # the forward modes compute the same tangent, but float32 sums of millions of
    # terms in another order differ by more than float32's epsilon.
    agreement: float = 1e-3

    def methods(self) -> tuple[str, ...]:
        return tuple(m for m in METHODS if m != "native-math" or self.fused)


def _forward_ad_api(method: str):
    if method in DUALGEN_BACKENDS:
        import dualgen.forward_ad as api  # the backend follows DUALGEN_KERNELS
    else:
        import torch.autograd.forward_ad as api
    return api


@contextlib.contextmanager
def fused_attention_off() -> Iterator[None]:
    """Attention by its definition: no transformer fast path, SDPA's MATH backend."""
    was = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        with sdpa_kernel([SDPBackend.MATH]):
            yield
    finally:
        torch.backends.mha.set_fastpath_enabled(was)


def _in_context(method: str, run: Run) -> Run:
    if method != "native-math":
        return run

    def with_math_attention() -> torch.Tensor:
        with fused_attention_off():
            return run()

    return with_math_attention


def jvp_run(
    fn: Callable[..., torch.Tensor],
    primals: Sequence[torch.Tensor],
    tangents: Sequence[torch.Tensor],
    method: str,
) -> Run:
    """`method` on fn(*primals), tangents on every primal (reverse mode: the same
    primals requiring grad, against a fixed random cotangent)."""
    primals, tangents = tuple(primals), tuple(tangents)
    if method == "primal":
        return lambda: fn(*primals)
    if method == "backprop":
        return _backprop_run(fn, primals)
    if method == "func.jvp":
        return lambda: torch.func.jvp(fn, primals, tangents)[1]
    api = _forward_ad_api(method)

    def forward_ad() -> torch.Tensor:
        with api.dual_level():
            duals = [api.make_dual(p, t) for p, t in zip(primals, tangents)]
            return api.unpack_dual(fn(*duals)).tangent

    return _in_context(method, forward_ad)


def _backprop_run(fn: Callable[..., torch.Tensor], primals: tuple) -> Run:
    # Drawn on the first (warm-up) call, when the output's shape is known; an
    # input of the measured call from then on.
    cotangent: list[torch.Tensor] = []

    def backprop() -> torch.Tensor:
        leaves = [p.detach().requires_grad_() for p in primals]
        out = fn(*leaves)
        if not cotangent:
            generator = torch.Generator().manual_seed(1)
            cotangent.append(torch.randn(out.shape, generator=generator))
        loss = (out * cotangent[0]).sum()
        return torch.autograd.grad(loss, leaves)[0]

    return backprop


def _random(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, dtype=torch.float32)


def _frozen(model: nn.Module) -> nn.Module:
    """No parameter requires grad: the plain call and the forward modes keep no
    tape (and the transformer layer's eval fast path runs)."""
    return model.requires_grad_(False)


def chain(x: torch.Tensor) -> torch.Tensor:
    """20 element-wise ops."""
    y = x.sin() * x.cos()
    y = y.exp() + x
    y = torch.tanh(y) * 0.5
    y = torch.sigmoid(y) - x
    y = y * y + 1.0
    y = y.sqrt() / (x.abs() + 1.0)
    y = torch.log1p(y.square())
    return y.cos() * x - y


def build_chain(method: str) -> Run:
    x = _random(1 << 20)
    return jvp_run(chain, (x,), (_random(1 << 20),), method)


def make_mlp(width: int) -> nn.Module:
    torch.manual_seed(0)
    layers = [nn.Linear(width, width), nn.Tanh(), nn.Linear(width, width), nn.Tanh()]
    return _frozen(nn.Sequential(*layers, nn.Linear(width, width)))


MLP_WIDTH, MLP_BATCH = 1024, 512


def build_mlp_input(method: str) -> Run:
    model, x = make_mlp(MLP_WIDTH), _random(MLP_BATCH, MLP_WIDTH)
    return jvp_run(model, (x,), (torch.randn_like(x),), method)


def build_mlp_parameters(method: str) -> Run:
    model, x = make_mlp(MLP_WIDTH), _random(MLP_BATCH, MLP_WIDTH)
    names = [name for name, _ in model.named_parameters()]
    params = [p.detach() for p in model.parameters()]

    def mlp(*ps: torch.Tensor) -> torch.Tensor:
        return torch.func.functional_call(model, dict(zip(names, ps)), (x,))

    return jvp_run(mlp, params, [torch.randn_like(p) for p in params], method)


def build_convnet(method: str) -> Run:
    model = make_convnet(64)
    x = _random(32, 3, 32, 32)
    return jvp_run(_frozen(model), (x,), (torch.randn_like(x),), method)


def build_transformer_layer(method: str) -> Run:
    """The eval fast path (`_transformer_encoder_layer_fwd`): eval mode, no
    parameter requiring grad."""
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(256, 4, dropout=0.0, batch_first=True).eval()
    x = _random(16, 512, 256)
    return jvp_run(_frozen(layer), (x,), (torch.randn_like(x),), method)


def attention_builder(tokens: int) -> Callable[[str], Run]:
    def build_attention(method: str) -> Run:
        qkv = [_random(1, 4, tokens, 64) for _ in range(3)]
        tangents = [torch.randn_like(t) for t in qkv]
        return jvp_run(F.scaled_dot_product_attention, qkv, tangents, method)

    return build_attention


class TinyLanguageModel(nn.Module):
    """Embedding, four transformer encoder layers (training mode: attention through
    SDPA), a linear head: the shape of examples/forward_gradient without
    transformers."""

    def __init__(self, vocab: int = 1000, width: int = 256, layers: int = 4) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        block = nn.TransformerEncoderLayer(
            width, 4, 4 * width, dropout=0.0, batch_first=True
        )
        self.blocks = nn.TransformerEncoder(block, layers, enable_nested_tensor=False)
        self.head = nn.Linear(width, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(self.embed(tokens)))


LEARNING_RATE = 1e-3


def build_training_step(method: str) -> Run:
    """One training step: for the forward modes the forward gradient (the loss's
    derivative d along a random direction v over every parameter, then
    p -= lr * d * v), for backprop the loss's gradient (p -= lr * grad); the
    plain call is the loss alone."""
    torch.manual_seed(0)
    model = TinyLanguageModel()
    names = [name for name, _ in model.named_parameters()]
    params = [p.detach() for p in model.parameters()]  # updated in place
    tokens = torch.randint(0, 1000, (8, 257))
    inputs, targets = tokens[:, :-1], tokens[:, 1:].reshape(-1)
    directions = torch.Generator().manual_seed(2)  # the same draws in every process

    def loss_of(*ps: torch.Tensor) -> torch.Tensor:
        logits = torch.func.functional_call(model, dict(zip(names, ps)), (inputs,))
        return F.cross_entropy(logits.flatten(0, 1), targets)

    if method == "primal":
        return lambda: loss_of(*params)
    if method == "backprop":
        return _backprop_step(loss_of, params)

    def forward_gradient_step() -> torch.Tensor:
        direction = [torch.randn(p.shape, generator=directions) for p in params]
        derivative = jvp_run(loss_of, params, direction, method)()
        step = -LEARNING_RATE * derivative.item()
        for p, v in zip(params, direction):
            p.add_(v, alpha=step)
        return derivative

    return forward_gradient_step


def _backprop_step(loss_of: Callable[..., torch.Tensor], params: list) -> Run:
    def backprop_step() -> torch.Tensor:
        leaves = [p.detach().requires_grad_() for p in params]
        loss = loss_of(*leaves)
        grads = torch.autograd.grad(loss, leaves)
        with torch.no_grad():
            for p, g in zip(params, grads):
                p.add_(g, alpha=-LEARNING_RATE)
        return loss.detach()

    return backprop_step


WORKLOADS = {
    w.name: w
    for w in (
        Workload("chain", "element-wise chain, 20 ops on 2^20 floats", build_chain),
        Workload(
            "mlp-input",
            f"MLP, three {MLP_WIDTH}-wide layers, batch {MLP_BATCH}, tangent on input",
            build_mlp_input,
        ),
        Workload(
            "mlp-params",
            f"MLP, three {MLP_WIDTH}-wide layers, batch {MLP_BATCH}, tangents on "
            "parameters (functional_call)",
            build_mlp_parameters,
        ),
        Workload(
            "convnet",
            "convnet (eval), 2 conv layers of 64 channels, 32 images 32x32",
            build_convnet,
        ),
        Workload(
            "transformer",
            "TransformerEncoderLayer (eval fast path), width 256, 16x512 tokens",
            build_transformer_layer,
            fused=True,
        ),
        *(
            Workload(
                f"attention-{n}",
                f"scaled_dot_product_attention, B=1 H=4 N={n} d=64, tangents on q, k, v",
                attention_builder(n),
                fused=True,
            )
            for n in (1024, 4096, 8192)
        ),
        Workload(
            "training-step",
            "training step of a 4-layer transformer LM (width 256, 8x256 tokens): "
            "forward gradient against backprop",
            build_training_step,
            fused=True,
            # The check is a directional derivative of a float32 loss, a sum of
            # terms that cancel to a few hundredths of their size: float32 in
            # another order moves it by a few tenths of a percent. In float64
            # dualgen and native (math attention) agree to 1e-15
            # (tests/models/test_forward_gradient_step.py).
            agreement=1e-2,
        ),
    )
}


def build(workload: str, method: str) -> Run:
    if workload not in WORKLOADS:
        raise SystemExit(
            f"unknown workload {workload!r}: one of {', '.join(WORKLOADS)}"
        )
    if method not in WORKLOADS[workload].methods():
        raise SystemExit(f"{workload} has no method {method!r}")
    return WORKLOADS[workload].build(method)
