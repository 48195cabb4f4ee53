"""Zoo cases: everything else (embeddings, grid sampling, distances, padding,
activations, ...), and, registered last as before, a few later cases of other
families (their `@case` says which).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..run import Const
from .common import case

# ---------------------------------------------------------------- misc


@case("misc")
def einsum_matmul_chain(c):
    return (lambda a, b, d: torch.einsum("bij,bjk,k->bi", a, b, d)), (
        c.randn(2, 3, 4),
        c.randn(2, 4, 5),
        c.randn(5),
    )


@case("misc")
def einsum_trace_outer(c):
    return (
        lambda a, v: (
            torch.einsum("ii->", a),
            torch.einsum("i,j->ij", v, v),
            torch.einsum("...ij->...ji", a),
        )
    ), (c.randn(3, 3), c.randn(4))


@case("misc")
def embedding(c):
    m = c.mod(nn.Embedding(10, 4, padding_idx=0))
    idx = torch.tensor([[0, 2, 4], [4, 3, 9]])
    return c.with_params(m, Const(idx))


@case(
    "misc",
    no_fd="max_norm renormalises the weight in place, outside autograd: PyTorch "
    "differentiates the lookup of the renormalised rows only",
)
def embedding_max_norm(c):
    m = c.mod(nn.Embedding(10, 4, max_norm=1.0))
    return c.with_params(m, Const(torch.tensor([1, 2, 1])))


@case("misc")
def f_embedding_weight(c):
    return (lambda w: F.embedding(torch.tensor([[1, 2], [4, 1]]), w)), (c.randn(6, 3),)


@case("misc")
def embedding_bag_mean(c):
    m = c.mod(nn.EmbeddingBag(10, 4))
    idx, off = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9]), torch.tensor([0, 4])
    return c.with_params(m, Const(idx), Const(off))


@case("misc")
def embedding_bag_sum_weights(c):
    m = c.mod(nn.EmbeddingBag(10, 4, mode="sum"))
    idx = torch.tensor([[1, 2, 4], [4, 3, 9]])
    return c.with_params(
        m, Const(idx), call=lambda fm, i: fm(i, per_sample_weights=None)
    )


@case("misc")
def f_embedding_bag_per_sample_weights(c):
    idx, off = torch.tensor([1, 2, 4, 5, 4, 3]), torch.tensor([0, 2])
    f = lambda w, psw: F.embedding_bag(idx, w, off, mode="sum", per_sample_weights=psw)
    return f, (c.randn(10, 3), c.randn(6))


@case("misc")
def embedding_bag_max(c):
    m = c.mod(nn.EmbeddingBag(10, 4, mode="max"))
    return c.with_params(m, Const(torch.tensor([[1, 2, 4], [4, 3, 9]])))


@case("misc")
def grid_sample_bilinear(c):
    return F.grid_sample, (c.randn(2, 3, 5, 4), c.rand(2, 3, 4, 2, low=-1.1, high=1.1))


@case("misc")
def grid_sample_modes(c):
    def f(x, g):
        return (
            F.grid_sample(x, g, mode="nearest", padding_mode="border"),
            F.grid_sample(
                x, g, mode="bicubic", padding_mode="reflection", align_corners=True
            ),
        )

    return f, (c.randn(2, 3, 5, 4), c.rand(2, 3, 4, 2, low=-0.9, high=0.9))


@case("misc")
def grid_sample_3d(c):
    return F.grid_sample, (
        c.randn(1, 2, 4, 3, 4),
        c.rand(1, 2, 3, 2, 3, low=-1, high=1),
    )


@case("misc")
def affine_grid_sample(c):
    def f(theta, x):
        g = F.affine_grid(theta, list(x.shape), align_corners=False)
        return F.grid_sample(x, g, align_corners=False)

    theta = (
        torch.tensor([[[0.9, 0.2, 0.1], [-0.1, 1.1, 0.05]]], dtype=torch.float64)
        .to(c.dtype)
        .expand(2, 2, 3)
    )
    return f, (theta + c.randn(2, 2, 3, scale=0.05), c.randn(2, 3, 5, 4))


@case("misc")
def affine_grid_3d(c):
    return (lambda t: F.affine_grid(t, [1, 1, 2, 3, 4], align_corners=True)), (
        c.randn(1, 3, 4),
    )


@case("misc")
def cdist(c):
    return torch.cdist, (c.randn(2, 4, 3), c.randn(2, 5, 3))


@case("misc")
def cdist_p1_large(c):
    # More than 25 rows: the matrix-multiplication path is not taken for p != 2.
    f = lambda a, b: (torch.cdist(a, b, p=1), torch.cdist(a, b, p=3))
    return f, (c.randn(30, 3), c.randn(27, 3))


@case("misc")
def cdist_mm_path(c):
    # More than 25 rows, p=2: the matrix-multiplication path (_euclidean_dist).
    return torch.cdist, (c.randn(2, 30, 3), c.randn(2, 27, 3))


@case("misc")
def pdist_cosine_pairwise(c):
    def f(a, b):
        return (
            F.pdist(a),
            F.pdist(b, p=1),
            F.pdist(a, p=float("inf")),
            F.cosine_similarity(a, b),
            F.pairwise_distance(a, b),
        )

    return f, (c.randn(4, 3), c.randn(4, 3))


@case("misc", channels_last=True)
def pixel_shuffle_unshuffle(c):
    return (lambda x: (F.pixel_shuffle(x, 2), F.pixel_unshuffle(x, 2))), (
        c.randn(1, 8, 4, 2),
    )


@case("misc")
def unfold_fold(c):
    unfold, fold = nn.Unfold(2, padding=1, stride=2), nn.Fold(
        (4, 5), 2, padding=1, stride=2
    )
    return (lambda x: (unfold(x), fold(unfold(x)))), (c.randn(2, 3, 4, 5),)


@case("misc")
def pad_modes(c):
    def f(x):
        return (
            F.pad(x, (1, 2, 2, 1)),
            F.pad(x, (1, 2, 2, 1), mode="constant", value=0.5),
            F.pad(x, (1, 2, 2, 1), mode="reflect"),
            F.pad(x, (1, 2, 2, 1), mode="replicate"),
            F.pad(x, (1, 2, 2, 1), mode="circular"),
        )

    return f, (c.randn(2, 3, 4, 5),)


@case("misc")
def pad_modes_1d_3d(c):
    def f(x, y):
        return (
            F.pad(x, (2, 1), mode="reflect"),
            F.pad(x, (2, 1), mode="replicate"),
            F.pad(x, (2, 1), mode="circular"),
            F.pad(y, (1, 1, 0, 1, 1, 0), mode="reflect"),
            F.pad(y, (1, 1, 0, 1, 1, 0), mode="replicate"),
            F.pad(y, (1, 1, 0, 1, 1, 0), mode="circular"),
        )

    return f, (c.randn(2, 3, 5), c.randn(1, 2, 3, 3, 3))


@case("misc")
def mlp_activations(c):
    m = nn.Sequential(
        nn.Linear(6, 8),
        nn.GELU(),
        nn.Linear(8, 8),
        nn.SiLU(),
        nn.Dropout(),
        nn.Linear(8, 8),
        nn.Mish(),
        nn.Linear(8, 8),
        nn.ELU(),
        nn.SELU(),
        nn.Softplus(),
        nn.Tanh(),
        nn.LeakyReLU(),
        nn.PReLU(),
        nn.Hardswish(),
        nn.Linear(8, 4),
        nn.LogSoftmax(-1),
    )
    return c.with_params(c.mod(m), c.randn(3, 6))


@case("misc")
def bilinear_module(c):
    return c.with_params(c.mod(nn.Bilinear(3, 4, 2)), c.randn(5, 3), c.randn(5, 4))


@case("misc")
def glu_softmin_softsign(c):
    return (
        lambda x: (
            F.glu(x),
            F.softmin(x, -1),
            F.softsign(x),
            F.tanhshrink(x),
            F.logsigmoid(x),
            F.gumbel_softmax(x, tau=0.5),
        )
    ), (c.randn(3, 4),)


@case("misc")
def dropouts(c):
    def f(x):
        return (
            F.dropout(x),
            F.dropout1d(x[:, :, 0]),
            F.dropout2d(x),
            F.alpha_dropout(x, training=True),
            F.feature_alpha_dropout(x, training=True),
        )

    return f, (c.randn(2, 3, 4, 4),)


@case("misc")
def linear_params(c):
    return c.with_params(c.mod(nn.Linear(5, 3)), c.randn(2, 4, 5))


@case("misc")
def flatten_unflatten_softmax2d(c):
    m = nn.Sequential(
        nn.Softmax2d(), nn.Flatten(), nn.Unflatten(1, (2, 12)), nn.ChannelShuffle(2)
    )
    return c.mod(m), (c.randn(2, 4, 2, 3),)


@case("misc")
def adaptive_log_softmax_with_loss(c):
    m = c.mod(nn.AdaptiveLogSoftmaxWithLoss(6, 10, cutoffs=[4, 8], div_value=2.0))
    target = torch.tensor([0, 5, 9, 3])
    return c.with_params(m, c.randn(4, 6), Const(target))


@case("misc")
def cosine_similarity_pairwise_modules(c):
    return (
        lambda a, b: (nn.CosineSimilarity()(a, b), nn.PairwiseDistance(p=3)(a, b))
    ), (c.randn(4, 5), c.randn(4, 5))


@case("misc", channels_last=True)
def pad_modules(c):
    m = nn.Sequential(
        nn.ZeroPad2d((1, 0, 2, 1)),
        nn.ReflectionPad2d(1),
        nn.ReplicationPad2d((0, 1, 1, 0)),
        nn.CircularPad2d(1),
    )
    return m, (c.randn(1, 2, 3, 4),)


@case("misc")
def pad_sequence_pack_sequence(c):
    m = c.mod(nn.GRU(3, 4))

    def f(a, b):
        padded = nn.utils.rnn.pad_sequence([a, b])
        out, h = m(nn.utils.rnn.pack_sequence([a, b]))
        return padded, out.data, h

    return f, (c.randn(5, 3), c.randn(3, 3))


@case("attention")
def transformer_decoder_masks(c):
    layer = nn.TransformerDecoderLayer(
        8, 2, dim_feedforward=16, batch_first=True, activation="gelu"
    )
    m = c.mod(nn.TransformerDecoder(layer, 2))
    tgt_mask = nn.Transformer.generate_square_subsequent_mask(3)
    mem_pad = torch.tensor([[False, False, True, True], [False, False, False, False]])

    def f(t, mem):
        return m(
            t,
            mem,
            tgt_mask=tgt_mask,
            tgt_is_causal=True,
            memory_key_padding_mask=mem_pad,
        )

    return f, (c.randn(2, 3, 8), c.randn(2, 4, 8))


@case("attention")
def mha_kdim_vdim_need_weights(c):
    m = c.mod(
        nn.MultiheadAttention(
            8, 2, kdim=6, vdim=5, bias=False, add_bias_kv=True, add_zero_attn=True
        )
    )
    f = lambda q, k, v: m(q, k, v, average_attn_weights=False)
    return f, (c.randn(4, 2, 8), c.randn(3, 2, 6), c.randn(3, 2, 5))
