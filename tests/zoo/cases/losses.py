"""Zoo cases: loss functions and modules."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..run import Const
from .common import case

# ---------------------------------------------------------------- losses


def _classes(c):
    """Class targets of a batch of 4 over 5 classes (the same in every dtype)."""
    return Const(torch.tensor([0, 4, 2, 1]))


def _signs(c, n):
    """Targets 1, -1, 1, ... (n of them) in the case's dtype."""
    return torch.tensor([(-1.0) ** k for k in range(n)]).to(c.dtype)


def _randn(*shape):
    """An input of this shape drawn by the case's Ctx."""
    return lambda c: c.randn(*shape)


def _rand(*shape):
    """An input of this shape drawn uniformly in [0, 1) by the case's Ctx."""
    return lambda c: c.rand(*shape)


def _sign_targets(c):
    """Targets 1, -1, ... along the last dim of a (3, 4) input."""
    return Const(_signs(c, 4).expand(3, 4))


def _loss(name, module, *inputs):
    """Case `name`: the loss module with its defaults on the inputs, each made from
    the case's Ctx, in order."""
    case("losses", name=name)(lambda c: (module(), tuple(make(c) for make in inputs)))


_loss("l1_loss", nn.L1Loss, _randn(3, 4), _randn(3, 4))
_loss("mse_loss", nn.MSELoss, _randn(3, 4), _randn(3, 4))
_loss("cross_entropy", nn.CrossEntropyLoss, _randn(4, 5), _classes)


@case("losses")
def cross_entropy_probs_smoothing(c):
    return nn.CrossEntropyLoss(label_smoothing=0.1), (
        c.randn(4, 5),
        c.randn(4, 5).softmax(-1),
    )


@case("losses")
def cross_entropy_2d_weight_ignore(c):
    t = torch.tensor([[[0, 2], [1, -100]], [[2, 2], [0, 1]]])
    loss = nn.CrossEntropyLoss(weight=c.rand(3, low=0.5, high=1.5))
    return loss, (c.randn(2, 3, 2, 2), Const(t))


@case("losses")
def nll_loss(c):
    return nn.NLLLoss(), (c.randn(4, 5).log_softmax(-1), _classes(c))


@case("losses")
def gaussian_nll_loss(c):
    return nn.GaussianNLLLoss(), (
        c.randn(4, 3),
        c.randn(4, 3),
        c.rand(4, 3, low=0.5, high=2),
    )


@case("losses")
def poisson_nll_loss(c):
    return nn.PoissonNLLLoss(), (c.randn(4, 3), c.rand(4, 3, high=3))


@case("losses")
def kl_div_loss(c):
    return nn.KLDivLoss(reduction="batchmean"), (
        c.randn(3, 4).log_softmax(-1),
        c.randn(3, 4).softmax(-1),
    )


@case("losses")
def bce_loss(c):
    return nn.BCELoss(), (c.rand(3, 4, low=0.1, high=0.9), c.rand(3, 4))


@case("losses")
def bce_with_logits_loss(c):
    return nn.BCEWithLogitsLoss(pos_weight=c.rand(4, low=0.5, high=2)), (
        c.randn(3, 4),
        c.rand(3, 4),
    )


@case("losses")
def margin_ranking_loss(c):
    return nn.MarginRankingLoss(margin=0.1), (
        c.randn(5),
        c.randn(5),
        Const(_signs(c, 5)),
    )


_loss("hinge_embedding_loss", nn.HingeEmbeddingLoss, _randn(3, 4), _sign_targets)
_loss("huber_loss", nn.HuberLoss, _randn(3, 4), _randn(3, 4))
_loss("smooth_l1_loss", nn.SmoothL1Loss, _randn(3, 4), _randn(3, 4))
_loss("soft_margin_loss", nn.SoftMarginLoss, _randn(3, 4), _sign_targets)
_loss(
    "multilabel_soft_margin_loss",
    nn.MultiLabelSoftMarginLoss,
    _randn(3, 4),
    _rand(3, 4),
)


@case("losses")
def multilabel_margin_loss(c):
    t = torch.tensor([[3, 0, -1, 1], [1, 2, 0, -1]])
    return nn.MultiLabelMarginLoss(), (c.randn(2, 4), Const(t))


_loss("multi_margin_loss", nn.MultiMarginLoss, _randn(4, 5), _classes)


@case("losses")
def multi_margin_loss_p2_weight(c):
    loss = nn.MultiMarginLoss(p=2, margin=0.7, weight=c.rand(5, low=0.5, high=1.5))
    return loss, (c.randn(4, 5), _classes(c))


@case("losses")
def cosine_embedding_loss(c):
    return nn.CosineEmbeddingLoss(), (
        c.randn(4, 5),
        c.randn(4, 5),
        Const(torch.tensor([1, -1, 1, -1])),
    )


_TRIPLET = (_randn(4, 5), _randn(4, 5), _randn(4, 5))  # anchor, positive, negative
_loss("triplet_margin_loss", nn.TripletMarginLoss, *_TRIPLET)
_loss("triplet_margin_with_distance_loss", nn.TripletMarginWithDistanceLoss, *_TRIPLET)


@case("losses")
def ctc_loss(c):
    logp = c.randn(6, 2, 4).log_softmax(-1)
    targets = torch.tensor([[1, 2, 2], [3, 1, 0]])
    lens = torch.tensor([6, 5]), torch.tensor([3, 2])
    return (lambda lp: nn.CTCLoss()(lp, targets, *lens)), (logp,)


@case("losses")
def ctc_loss_concat_targets(c):
    logp = c.randn(5, 2, 3).log_softmax(-1)
    targets = torch.tensor([1, 2, 1, 1])
    return (lambda lp: F.ctc_loss(lp, targets, [5, 4], [2, 2], zero_infinity=True)), (
        logp,
    )
