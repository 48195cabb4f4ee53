"""Forward AD through the weight norm and grouped matmul native forward AD
refuses on CPU: torch.nn.utils.weight_norm and parametrizations.weight_norm
(aten::_weight_norm_interface, with dim 0 and the last dim), their
Hessian-vector products (forward over reverse through
_weight_norm_interface_backward), aten::_grouped_mm in each layout it takes
(2-d x 3-d, 3-d x 3-d, 2-d x 2-d, 3-d x 2-d) and a small Mixtral on
transformers' default grouped_mm experts path. dualgen's tangents are compared
with central finite differences in float64 and with torch.func.jvp of the same
function written with ops native forward AD supports; _grouped_mm, which torch
runs in single precision only, with float64 per-group matmuls."""

from __future__ import annotations

import itertools

import pytest
import torch
from models.families import BY_NAME
from torch import nn
from torch.func import functional_call
from torch.testing import assert_close

import dualgen.forward_ad as fwAD

F64, F32 = torch.float64, torch.float32


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def rel(a, b):
    return ((a - b).norm() / b.norm()).item()


def dual_call(model, params, tangents, inputs, input_tangents):
    """The tangent of functional_call(model, params, inputs) under dualgen."""
    with fwAD.dual_level():
        p = {k: fwAD.make_dual(v, tangents[k]) for k, v in params.items()}
        xs = [fwAD.make_dual(x, t) for x, t in zip(inputs, input_tangents)]
        return fwAD.unpack_dual(functional_call(model, p, tuple(xs))).tangent


def central(fn, eps=1e-6):
    return (fn(eps) - fn(-eps)) / (2 * eps)


# ---------------------------------------------------------------- weight norm

WEIGHT_NORMED = {
    "conv1d-param-dim2": lambda: nn.utils.parametrizations.weight_norm(
        nn.Conv1d(3, 4, 5), dim=2
    ),
    "conv1d-param-dim0": lambda: nn.utils.parametrizations.weight_norm(
        nn.Conv1d(3, 4, 5), dim=0
    ),
    "linear-hook-dim0": lambda: nn.utils.weight_norm(nn.Linear(6, 4)),
}
INPUTS = {"conv1d": (2, 3, 9), "linear": (3, 6)}


def _weight_normed(name, dtype):
    with pytest.warns(FutureWarning) if "hook" in name else _nothing():
        model = WEIGHT_NORMED[name]().to(dtype)
    x = torch.randn(INPUTS[name.split("-")[0]], dtype=dtype)
    params = {k: v.detach() for k, v in model.named_parameters()}
    return model, params, x


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@pytest.mark.parametrize("name", WEIGHT_NORMED)
def test_weight_norm_against_finite_differences(name):
    model, params, x = _weight_normed(name, F64)
    tangents = {k: torch.randn_like(v) for k, v in params.items()}
    xt = torch.randn_like(x)
    tangent = dual_call(model, params, tangents, [x], [xt])

    def at(s):
        p = {k: v + s * tangents[k] for k, v in params.items()}
        return functional_call(model, p, (x + s * xt,))

    assert_close(tangent, central(at), rtol=1e-6, atol=1e-8)
    # float32: the same tangent to single precision.
    model32 = model.float()
    p32 = {k: v.float() for k, v in params.items()}
    t32 = {k: v.float() for k, v in tangents.items()}
    tangent32 = dual_call(model32, p32, t32, [x.float()], [xt.float()])
    assert tangent32.dtype == F32
    assert rel(tangent32.double(), tangent) < 1e-5


@pytest.mark.parametrize("dim", [0, 2])
def test_weight_norm_interface_against_native_jvp_of_its_definition(dim):
    # Both outputs: w = v * g / n and n, the norm over every dim except `dim`.
    v = torch.randn(4, 3, 5, dtype=F64)
    g = torch.randn(torch.norm_except_dim(v, 2, dim).shape, dtype=F64)
    vt, gt = torch.randn_like(v), torch.randn_like(g)
    with fwAD.dual_level():
        w, n = torch._weight_norm_interface(
            fwAD.make_dual(v, vt), fwAD.make_dual(g, gt), dim
        )
        wt, nt = fwAD.unpack_dual(w).tangent, fwAD.unpack_dual(n).tangent

    def definition(v, g):
        n = torch.norm_except_dim(v, 2, dim)
        return v * (g / n), n

    _, (ewt, ent) = torch.func.jvp(definition, (v, g), (vt, gt))
    assert_close(wt, ewt)
    assert_close(nt, ent)


@pytest.mark.parametrize("name", ["conv1d-param-dim2", "linear-hook-dim0"])
def test_weight_norm_hessian_vector_product(name):
    # Forward over reverse: autograd's backward calls _weight_norm_interface_backward.
    model, params, x = _weight_normed(name, F64)
    tangents = {k: torch.randn_like(v) for k, v in params.items()}

    def gradient(p):
        p = {k: v if v.requires_grad else v.requires_grad_() for k, v in p.items()}
        loss = (functional_call(model, p, (x,)).tanh() ** 2).sum()
        return torch.autograd.grad(loss, list(p.values()))

    with fwAD.dual_level():
        duals = {k: fwAD.make_dual(v.clone(), tangents[k]) for k, v in params.items()}
        hvp = [fwAD.unpack_dual(g).tangent for g in gradient(duals)]
    eps = 1e-6
    plus = gradient({k: (v + eps * tangents[k]).detach() for k, v in params.items()})
    minus = gradient({k: (v - eps * tangents[k]).detach() for k, v in params.items()})
    for h, a, b in zip(hvp, plus, minus):
        assert_close(h, (a - b) / (2 * eps), rtol=1e-5, atol=1e-7)


# ---------------------------------------------------------------- grouped matmul


def offsets(*ends):
    return torch.tensor(ends, dtype=torch.int32)


def per_group(a, b, offs):
    """_grouped_mm by per-group matmuls (what native forward AD runs)."""
    if offs is None:
        return a @ b
    bounds = [0, *offs.tolist()]
    groups = list(itertools.pairwise(bounds))
    if a.dim() == 2 and b.dim() == 3:
        return torch.cat([a[s:e] @ b[g] for g, (s, e) in enumerate(groups)])
    if a.dim() == 3 and b.dim() == 2:
        return torch.cat([a[g] @ b[:, s:e] for g, (s, e) in enumerate(groups)], 1)
    return torch.stack([a[:, s:e] @ b[s:e] for s, e in groups])


GROUPED = {
    "2d-3d": ((12, 8), (4, 8, 16), offsets(0, 3, 7, 12)),
    "2d-3d-transposed": ((12, 8), (4, 16, 8), offsets(3, 3, 7, 12)),
    "3d-3d": ((3, 5, 8), (3, 8, 4), None),
    "2d-2d": ((4, 12), (12, 8), offsets(4, 4, 12)),
    "3d-2d": ((3, 4, 8), (8, 12), offsets(2, 9, 12)),
}


@pytest.mark.parametrize("layout", GROUPED)
def test_grouped_mm_jvp_and_hvp(layout):
    a_shape, b_shape, offs = GROUPED[layout]
    a, b = torch.randn(a_shape), torch.randn(b_shape)
    if layout.endswith("transposed"):  # transformers' nn.Linear-style experts
        b = b.transpose(-2, -1)
    at, bt = torch.randn(a.shape), torch.randn(b.shape)
    with fwAD.dual_level():
        out = torch._grouped_mm(fwAD.make_dual(a, at), fwAD.make_dual(b, bt), offs)
        tangent = fwAD.unpack_dual(out).tangent
    assert tangent.dtype == F32
    a64, b64, at64, bt64 = (t.double() for t in (a, b, at, bt))
    _, expected = torch.func.jvp(
        lambda x, y: per_group(x, y, offs), (a64, b64), (at64, bt64)
    )
    assert rel(tangent.double(), expected) < 1e-6

    # Forward over reverse through native's backward of _grouped_mm.
    w = torch.randn(out.shape)

    def gradient(x, y):
        z = torch._grouped_mm(x.requires_grad_(), y.requires_grad_(), offs)
        return torch.autograd.grad((z * w).sum() + (z**2).sum(), (x, y))

    with fwAD.dual_level():
        gx, gy = gradient(fwAD.make_dual(a.clone(), at), fwAD.make_dual(b.clone(), bt))
        hx, hy = fwAD.unpack_dual(gx).tangent, fwAD.unpack_dual(gy).tangent

    def loss(x, y):
        z = per_group(x, y, offs)
        return (z * w.double()).sum() + (z**2).sum()

    _, (ex, ey) = torch.func.jvp(
        torch.func.grad(loss, argnums=(0, 1)), (a64, b64), (at64, bt64)
    )
    assert rel(hx.double(), ex) < 1e-6 and rel(hy.double(), ey) < 1e-6


def test_mixtral_grouped_mm_experts():
    # transformers' default experts path on CPU is _grouped_mm, float32 only;
    # the reference is the same model in float64 on the eager experts loop, by a
    # 4-point stencil (step 1e-3: RMSNorm computes in float32 inside).
    pytest.importorskip("transformers")
    build = BY_NAME["mixtral"].build  # the real-model suite's small Mixtral
    model = build().eval()
    assert model.config._experts_implementation == "grouped_mm"
    x = torch.randn(2, 7, 32)
    params = {k: v.detach() for k, v in model.named_parameters()}
    tangents = {k: 0.1 * torch.randn_like(v) for k, v in params.items()}
    xt = torch.randn_like(x)

    def run(m, p, inputs):
        return functional_call(m, p, (), {"inputs_embeds": inputs}).last_hidden_state

    with fwAD.dual_level():
        duals = {k: fwAD.make_dual(v, tangents[k]) for k, v in params.items()}
        tangent = fwAD.unpack_dual(run(model, duals, fwAD.make_dual(x, xt))).tangent

    reference = build().eval().double()
    reference.load_state_dict(model.state_dict())
    reference.config._experts_implementation = "eager"
    p64 = {k: v.double() for k, v in params.items()}
    t64 = {k: v.double() for k, v in tangents.items()}

    def at(s):
        p = {k: p64[k] + s * t64[k] for k in p64}
        return run(reference, p, x.double() + s * xt.double())

    h = 1e-3
    stencil = (-at(2 * h) + 8 * at(h) - 8 * at(-h) + at(-2 * h)) / (12 * h)
    assert rel(tangent.double(), stencil) < 1e-4
