"""Forward AD through the fused nn functions native forward AD refuses on CPU:
F.grid_sample (2-d and 3-d; bilinear, nearest, bicubic; zeros, border,
reflection; align_corners both ways), F.affine_grid, F.embedding_bag /
nn.EmbeddingBag (sum, mean, max; per_sample_weights, offsets, padding_idx),
F.ctc_loss (int-list and tensor lengths) and torch.cdist (p = 0, 1, 2, inf and
others; each compute_mode). dualgen's tangents are compared with central finite
differences in float64, float32 runs with the float64 tangents, and grid_sample's
forward-over-reverse with finite differences of its gradient."""

from __future__ import annotations

import itertools

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.testing import assert_close

import dualgen.forward_ad as fwAD

F64, F32 = torch.float64, torch.float32


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def dual_jvp(fn, primals, tangents):
    """fn's output and its tangent under dualgen (None entries: plain inputs)."""
    with fwAD.dual_level():
        args = [
            p if t is None else fwAD.make_dual(p, t) for p, t in zip(primals, tangents)
        ]
        out = fwAD.unpack_dual(fn(*args))
    return out.primal, out.tangent


def finite_difference(fn, primals, tangents, eps=1e-6):
    def at(s):
        return fn(*[p if t is None else p + s * t for p, t in zip(primals, tangents)])

    return (at(eps) - at(-eps)) / (2 * eps)


def check(fn, primals, tangents):
    """float64 against finite differences; float32 against the float64 tangent."""
    primals = [p.to(F64) if p.is_floating_point() else p for p in primals]
    tangents = [None if t is None else t.to(F64) for t in tangents]
    value, tangent = dual_jvp(fn, primals, tangents)
    assert_close(value, fn(*primals))
    expected = finite_difference(fn, primals, tangents)
    assert_close(tangent, expected, rtol=1e-5, atol=1e-6)
    p32 = [p.to(F32) if p.is_floating_point() else p for p in primals]
    t32 = [None if t is None else t.to(F32) for t in tangents]
    _value32, tangent32 = dual_jvp(fn, p32, t32)
    assert tangent32.dtype == F32
    assert_close(tangent32, tangent.to(F32), rtol=1e-3, atol=1e-4)


# ---------------------------------------------------------------- grid_sample

MODES_2D = list(
    itertools.product(
        ["bilinear", "nearest", "bicubic"],
        ["zeros", "border", "reflection"],
        [False, True],
    )
)
MODES_3D = list(
    itertools.product(
        ["bilinear", "nearest"], ["zeros", "border", "reflection"], [False, True]
    )
)


@pytest.mark.parametrize("mode, padding_mode, align_corners", MODES_2D)
def test_grid_sample_2d(mode, padding_mode, align_corners):
    x, grid = torch.randn(2, 3, 5, 6), torch.rand(2, 4, 3, 2) * 2.6 - 1.3

    def fn(x, grid):
        return F.grid_sample(
            x, grid, mode=mode, padding_mode=padding_mode, align_corners=align_corners
        )

    check(fn, [x, grid], [torch.randn_like(x), torch.randn_like(grid)])
    check(fn, [x, grid], [None, torch.randn_like(grid)])


@pytest.mark.parametrize("mode, padding_mode, align_corners", MODES_3D)
def test_grid_sample_3d(mode, padding_mode, align_corners):
    x, grid = torch.randn(2, 2, 3, 4, 5), torch.rand(2, 2, 3, 2, 3) * 2.6 - 1.3

    def fn(x, grid):
        return F.grid_sample(
            x, grid, mode=mode, padding_mode=padding_mode, align_corners=align_corners
        )

    check(fn, [x, grid], [torch.randn_like(x), torch.randn_like(grid)])


@pytest.mark.parametrize("align_corners", [False, True])
def test_spatial_transformer(align_corners):
    # affine_grid then grid_sample, the tangent through theta and the image.
    x = torch.randn(2, 3, 6, 5)
    theta = torch.eye(2, 3).expand(2, 2, 3) * 0.9 + torch.randn(2, 2, 3) * 0.1

    def fn(x, theta):
        grid = F.affine_grid(theta, [2, 3, 4, 4], align_corners=align_corners)
        return F.grid_sample(x, grid, align_corners=align_corners)

    check(fn, [x, theta], [torch.randn_like(x), torch.randn_like(theta)])


def test_affine_grid_3d():
    theta = torch.randn(2, 3, 4)
    check(
        lambda t: F.affine_grid(t, [2, 1, 2, 3, 4], align_corners=False),
        [theta],
        [torch.randn_like(theta)],
    )


@pytest.mark.parametrize(
    "mode, padding_mode",
    [("bilinear", "zeros"), ("bicubic", "reflection"), ("bilinear", "border")],
)
def test_grid_sample_forward_over_reverse(mode, padding_mode):
    # The tangent of grid_sample's gradient (a Hessian-vector product) runs
    # through grid_sampler_2d_backward's rule.
    x, grid = (
        torch.randn(1, 2, 4, 5, dtype=F64),
        torch.rand(1, 3, 2, 2, dtype=F64) * 2 - 1,
    )
    w = torch.randn(1, 2, 3, 2, dtype=F64)
    vx, vg = torch.randn_like(x), torch.randn_like(grid)

    def gradient(x, grid):
        x, grid = x.requires_grad_(), grid.requires_grad_()
        out = F.grid_sample(
            x, grid, mode=mode, padding_mode=padding_mode, align_corners=False
        )
        return torch.autograd.grad((out * w).sum() + (out * out).sum(), (x, grid))

    with fwAD.dual_level():
        gx, gg = gradient(
            fwAD.make_dual(x.clone(), vx), fwAD.make_dual(grid.clone(), vg)
        )
        tx, tg = fwAD.unpack_dual(gx).tangent, fwAD.unpack_dual(gg).tangent
    eps = 1e-6
    plus, minus = gradient(x + eps * vx, grid + eps * vg), gradient(
        x - eps * vx, grid - eps * vg
    )
    assert_close(tx, (plus[0] - minus[0]) / (2 * eps), rtol=1e-5, atol=1e-6)
    assert_close(tg, (plus[1] - minus[1]) / (2 * eps), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- embedding bags

BAGS = [
    {"mode": "sum"},
    {"mode": "mean"},
    {"mode": "max"},
    {"mode": "sum", "padding_idx": 2},
    {"mode": "mean", "padding_idx": 4},
    {"mode": "max", "padding_idx": 4},
    {"mode": "sum", "include_last_offset": True},
]


@pytest.mark.parametrize(
    "kwargs", BAGS, ids=lambda k: "-".join(f"{a}={b}" for a, b in k.items())
)
def test_embedding_bag(kwargs):
    weight = torch.randn(6, 3)
    indices = torch.tensor([1, 2, 4, 5, 4, 3, 2, 0])
    offsets = torch.tensor(
        [0, 2, 5, 8] if kwargs.get("include_last_offset") else [0, 2, 2, 5]
    )

    def fn(weight):
        return F.embedding_bag(indices, weight, offsets, **kwargs)

    check(fn, [weight], [torch.randn_like(weight)])


@pytest.mark.parametrize("padding_idx", [None, 2])
def test_embedding_bag_per_sample_weights(padding_idx):
    weight, psw = torch.randn(6, 3), torch.rand(8) + 0.5
    indices, offsets = torch.tensor([1, 2, 4, 5, 4, 3, 2, 0]), torch.tensor(
        [0, 3, 3, 6]
    )

    def fn(weight, psw):
        return F.embedding_bag(
            indices,
            weight,
            offsets,
            mode="sum",
            per_sample_weights=psw,
            padding_idx=padding_idx,
        )

    check(fn, [weight, psw], [torch.randn_like(weight), torch.randn_like(psw)])
    check(fn, [weight, psw], [None, torch.randn_like(psw)])


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_module_2d_input(mode):
    bag = nn.EmbeddingBag(7, 4, mode=mode).to(F64)
    indices = torch.tensor([[0, 2, 6], [3, 3, 1]])
    weight = bag.weight.detach().clone()

    def fn(w):
        return torch.func.functional_call(bag, {"weight": w}, (indices,))

    check(fn, [weight], [torch.randn_like(weight)])


# ---------------------------------------------------------------- CTC loss


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("lengths_as", ["list", "tensor"])
def test_ctc_loss(reduction, lengths_as):
    logits = torch.randn(7, 3, 5)
    targets = torch.tensor([[1, 2, 2], [3, 4, 0], [1, 1, 0]])
    input_lengths, target_lengths = [7, 6, 5], [3, 2, 2]
    if lengths_as == "tensor":
        input_lengths, target_lengths = torch.tensor(input_lengths), torch.tensor(
            target_lengths
        )

    def fn(logits):
        return F.ctc_loss(
            logits.log_softmax(-1),
            targets,
            input_lengths,
            target_lengths,
            reduction=reduction,
        )

    check(fn, [logits], [torch.randn_like(logits)])


def test_ctc_loss_unnormalized_concatenated_targets_zero_infinity():
    # Raw log_probs (no log_softmax: the true derivative is needed), 1-d
    # concatenated targets, an impossible sample zeroed by zero_infinity.
    log_probs = torch.randn(5, 3, 4)
    targets = torch.tensor([1, 2, 3, 3, 3, 1])
    input_lengths, target_lengths = [5, 4, 5], [2, 3, 1]

    def fn(lp):
        return F.ctc_loss(
            lp,
            targets,
            input_lengths,
            target_lengths,
            blank=0,
            reduction="sum",
            zero_infinity=True,
        )

    check(fn, [log_probs], [torch.randn_like(log_probs)])


def test_ctc_loss_unbatched():
    logits, targets = torch.randn(6, 4), torch.tensor([1, 3, 3])

    def fn(logits):
        return F.ctc_loss(logits.log_softmax(-1), targets, [6], [3], reduction="sum")

    check(fn, [logits], [torch.randn_like(logits)])


# ---------------------------------------------------------------- cdist

CDIST = [
    (0.0, "use_mm_for_euclid_dist_if_necessary", 4),
    (1.0, "use_mm_for_euclid_dist_if_necessary", 4),
    (2.0, "use_mm_for_euclid_dist_if_necessary", 4),
    (2.0, "use_mm_for_euclid_dist_if_necessary", 30),  # the matrix-product path
    (2.0, "use_mm_for_euclid_dist", 4),
    (2.0, "donot_use_mm_for_euclid_dist", 30),
    (float("inf"), "use_mm_for_euclid_dist_if_necessary", 4),
    (3.0, "use_mm_for_euclid_dist_if_necessary", 4),
    (0.5, "use_mm_for_euclid_dist_if_necessary", 4),
]


@pytest.mark.parametrize("p, compute_mode, rows", CDIST)
def test_cdist(p, compute_mode, rows):
    x1, x2 = torch.randn(2, rows, 3), torch.randn(1, 5, 3)

    def fn(x1, x2):
        return torch.cdist(x1, x2, p=p, compute_mode=compute_mode)

    check(fn, [x1, x2], [torch.randn_like(x1), torch.randn_like(x2)])
    check(fn, [x1, x2], [None, torch.randn_like(x2)])
