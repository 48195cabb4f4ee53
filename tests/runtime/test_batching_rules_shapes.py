"""The batching rules dualgen gives torch's legacy vmap for ops that index, shift,
pad or resample a tensor (csrc/dualgen/batching_shapes.cpp) compute what legacy
vmap's for-loop fallback computed: the indexed tensor batched (nested vmaps too),
the index-like arguments unbatched, each op's dimension arguments positive and
negative; the `*_like` factories; matmul's decomposition and
`linalg_solve_triangular`, each operand batched or not; and the cases the rules
leave to the loop (an index batched, the advanced indices of `x[i, :, j]` apart)
still right. Then jacfwd through them against torch.func."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from batching_checks import against_torchs, assert_registered_by_dualgen, rand

import dualgen.func as dfunc
from dualgen import cpp

pytestmark = [
    pytest.mark.skipif(cpp.state() != "built", reason="C++ extension not built"),
    pytest.mark.filterwarnings("ignore:There is a performance drop"),
]


@pytest.fixture(scope="module", autouse=True)
def _cpp_backend(cpp_kernels_for_module):
    """The C++ kernels, whose batching rules these tests hold (conftest)."""


torch.manual_seed(0)
GRU = torch.nn.GRU(4, 3).double()  # its cells split their gates with unsafe_split
INDEX = torch.tensor([2, 0, 2])
TARGET = torch.tensor([3, 1, 0])
# max pooling's inputs and argmax indices (overlapping windows: gradients add)
POOLED = rand(1, 2, 5, 5, seed=7)
POOL_INDICES = F.max_pool2d(POOLED, 3, 1, return_indices=True)[1]
ADAPTIVE_INDICES = F.adaptive_max_pool2d(POOLED, 2, return_indices=True)[1]
POOLED_3D = rand(2, 4, 4, 4, seed=8)
POOL_3D_INDICES = F.max_pool3d(POOLED_3D, 2, return_indices=True)[1]
CLASS_WEIGHT = torch.tensor([0.5, 2.0, 1.0, 1.5], dtype=torch.float64)

# name -> (function of the batched tensor, its logical shape)
ONE_BATCHED = {
    "cumsum": (lambda x: x.cumsum(1), (3, 4)),
    "cumsum_negative_dim_dtype": (
        lambda x: torch.cumsum(x, -2, dtype=torch.float32),
        (3, 4),
    ),
    "flip": (lambda x: x.flip(0, -1), (3, 4)),
    "roll": (lambda x: x.roll((1, -2), (0, 1)), (3, 4)),
    "roll_flattened": (lambda x: x.roll(5), (3, 4)),
    "repeat": (lambda x: x.repeat(2, 3), (3, 4)),
    "repeat_more_dims": (lambda x: x.repeat(2, 1, 3), (3, 4)),
    "repeat_of_0d": (lambda x: x.repeat(2, 3), ()),
    "constant_pad_nd": (lambda x: F.pad(x, (1, 2, 0, 1), value=0.5), (3, 4)),
    "constant_pad_nd_negative": (lambda x: F.pad(x, (-1, 1)), (3, 4)),
    "triu": (lambda x: x.triu(1), (2, 3, 4)),
    "tril": (lambda x: x.tril(-1), (3, 4)),
    "diag_embed": (lambda x: torch.diag_embed(x, offset=1, dim1=0, dim2=2), (3, 4)),
    "diag_embed_default": (torch.diag_embed, (3, 4)),
    "gather": (lambda x: x.gather(1, torch.tensor([[0, 3], [1, 1], [2, 0]])), (3, 4)),
    "gather_negative_dim": (
        lambda x: x.gather(-2, torch.tensor([[0, 2, 1, 1]])),
        (3, 4),
    ),
    "index_select": (lambda x: x.index_select(-1, INDEX), (3, 4)),
    "index_select_1d": (lambda x: x.index_select(0, INDEX), (4,)),
    "embedding": (lambda w: F.embedding(torch.tensor([[1, 0], [2, 2]]), w), (3, 4)),
    "index": (lambda x: x[INDEX], (3, 4)),
    "index_second_dim": (lambda x: x[:, INDEX], (3, 4)),
    "index_adjacent": (lambda x: x[:, INDEX, torch.tensor([0, 1, 1])], (2, 3, 4)),
    "index_apart": (lambda x: x[INDEX, :, torch.tensor([0, 1, 1])], (3, 2, 4)),
    "index_mask": (lambda x: x[torch.tensor([True, False, True])], (3, 4)),
    "avg_pool2d": (lambda x: F.avg_pool2d(x, 2), (2, 4, 6)),
    "avg_pool2d_batch_of_images": (lambda x: F.avg_pool2d(x, 3, 1, 1), (2, 2, 4, 4)),
    "avg_pool1d": (lambda x: F.avg_pool1d(x, 2), (2, 6)),
    "upsample_nearest2d": (lambda x: F.interpolate(x, scale_factor=2), (1, 2, 3, 3)),
    "upsample_bilinear2d": (
        lambda x: F.interpolate(x, size=(5, 4), mode="bilinear", align_corners=True),
        (2, 2, 3, 3),
    ),
    "upsample_linear1d": (
        lambda x: F.interpolate(x, scale_factor=2, mode="linear"),
        (1, 2, 3),
    ),
    "reflection_pad2d": (lambda x: F.pad(x, (1, 1, 2, 0), mode="reflect"), (2, 3, 4)),
    "reflection_pad1d": (lambda x: F.pad(x, (2, 1), mode="reflect"), (1, 2, 4)),
    "replication_pad2d": (
        lambda x: F.pad(x, (1, 0, 1, 2), mode="replicate"),
        (1, 1, 3, 4),
    ),
    "pixel_shuffle": (lambda x: F.pixel_shuffle(x, 2), (1, 8, 2, 3)),
    "zeros_like": (lambda x: torch.zeros_like(x) + x, (3, 4)),
    "full_like_0d": (lambda x: torch.full_like(x, 2.0, dtype=torch.float32), ()),
    "ones_like": (
        lambda x: torch.ones_like(x, memory_format=torch.contiguous_format),
        (3, 4),
    ),
    "unsafe_view": (lambda x: torch.ops.aten._unsafe_view(x, [4, 3]), (3, 4)),
    "to_copy": (lambda x: x.to(torch.float32), (3, 4)),
    "fill_tensor": (lambda x: x.clone().fill_(torch.tensor(0.5)) + x, (3, 4)),
    "adaptive_avg_pool2d": (lambda x: F.adaptive_avg_pool2d(x, (2, 3)), (2, 4, 6)),
    "adaptive_avg_pool3d": (lambda x: F.adaptive_avg_pool3d(x, 2), (1, 2, 4, 4, 4)),
    "avg_pool3d": (lambda x: F.avg_pool3d(x, 2), (2, 4, 4, 4)),
    "upsample_bicubic2d": (
        lambda x: F.interpolate(x, scale_factor=2, mode="bicubic"),
        (1, 2, 3, 3),
    ),
    "upsample_bilinear2d_aa": (
        lambda x: F.interpolate(x, size=(2, 2), mode="bilinear", antialias=True),
        (1, 2, 4, 5),
    ),
    "upsample_nearest_exact2d": (
        lambda x: F.interpolate(x, scale_factor=1.5, mode="nearest-exact"),
        (1, 1, 4, 4),
    ),
    "upsample_trilinear3d": (
        lambda x: F.interpolate(x, scale_factor=2, mode="trilinear"),
        (1, 1, 2, 2, 3),
    ),
    "reflection_pad3d": (
        lambda x: F.pad(x, (1, 1, 1, 0, 0, 1), mode="reflect"),
        (1, 2, 2, 3),
    ),
    "pixel_unshuffle": (lambda x: F.pixel_unshuffle(x, 2), (2, 1, 4, 6)),
    "nll_loss_mean": (lambda x: F.nll_loss(x, TARGET), (3, 4)),
    "nll_loss_sum_weighted": (
        lambda x: F.nll_loss(x, TARGET, weight=CLASS_WEIGHT, reduction="sum"),
        (3, 4),
    ),
    "nll_loss_none_ignored": (
        lambda x: F.nll_loss(x, TARGET, reduction="none", ignore_index=1),
        (3, 4),
    ),
    "nll_loss_mean_weighted_ignored": (
        lambda x: F.nll_loss(x, TARGET, weight=CLASS_WEIGHT, ignore_index=3),
        (3, 4),
    ),
    "nll_loss_one_sample": (
        lambda x: F.nll_loss(x, TARGET[0], weight=CLASS_WEIGHT),
        (4,),
    ),
    "max_pool2d_backward": (
        lambda g: torch.ops.aten.max_pool2d_with_indices_backward(
            g, POOLED, [3, 3], [1, 1], [0, 0], [1, 1], False, POOL_INDICES
        ),
        (1, 2, 3, 3),
    ),
    "adaptive_max_pool2d_backward": (
        lambda g: torch.ops.aten.adaptive_max_pool2d_backward(
            g, POOLED, ADAPTIVE_INDICES
        ),
        (1, 2, 2, 2),
    ),
    "max_pool3d_backward": (
        lambda g: torch.ops.aten.max_pool3d_with_indices_backward(
            g,
            POOLED_3D,
            [2, 2, 2],
            [2, 2, 2],
            [0, 0, 0],
            [1, 1, 1],
            False,
            POOL_3D_INDICES,
        ),
        (2, 2, 2, 2),
    ),
    "cross_entropy": (
        lambda x: F.cross_entropy(x, TARGET, label_smoothing=0.1),
        (3, 4),
    ),
}


@pytest.mark.parametrize("nested", [False, True])
@pytest.mark.parametrize("name", ONE_BATCHED)
def test_one_batched_tensor(name, nested):
    fn, shape = ONE_BATCHED[name]
    against_torchs(fn, [shape], (True,), nested)


# Lists torch's fallback cannot stack (it raises): against each element's call.
REFUSED_BY_THE_LOOP = {
    "unsafe_split": lambda x: tuple(torch.unsafe_split(x, 3, -1)),
    "unsafe_split_with_sizes": lambda x: tuple(
        torch.unsafe_split_with_sizes(x, [1, 2], 0)
    ),
    "split_with_sizes_copy": lambda x: tuple(torch.split_with_sizes_copy(x, [3, 1], 1)),
    "unbind_copy": lambda x: tuple(torch.unbind_copy(x, 1)),
}


@pytest.mark.parametrize("nested", [False, True])
@pytest.mark.parametrize("name", REFUSED_BY_THE_LOOP)
def test_lists_the_loop_refuses(name, nested):
    against_torchs(REFUSED_BY_THE_LOOP[name], [(3, 4)], (True,), nested, True)


# Two tensor operands, either or both batched (an index unbatched):
# (fn, shapes of the two).
TWO_OPERANDS = {
    "scatter_add": (
        lambda a, b: a.scatter_add(1, torch.tensor([[0, 2], [1, 1], [3, 0]]), b),
        [(3, 4), (3, 2)],
    ),
    "index_add": (lambda a, b: a.index_add(0, INDEX, b, alpha=0.5), [(4, 2), (3, 2)]),
    "index_add_negative_dim": (
        lambda a, b: a.index_add(-1, INDEX, b),
        [(2, 4), (2, 3)],
    ),
    # operands that broadcast their leading dims
    "solve_triangular": (
        lambda a, b: torch.linalg.solve_triangular(
            a.triu() + 3 * torch.eye(3), b, upper=True
        ),
        [(3, 3), (3, 2)],
    ),
    "solve_triangular_right_batched_a": (
        lambda a, b: torch.linalg.solve_triangular(
            a.tril() + 3 * torch.eye(3), b, upper=False, left=False, unitriangular=True
        ),
        [(2, 3, 3), (4, 3)],
    ),
    "matmul_batched_matrices": (torch.matmul, [(2, 3, 4), (4, 5)]),
    "addmm": (lambda b, a: torch.addmm(b, a, a.t(), beta=0.5, alpha=2), [(3,), (3, 4)]),
    "addmm_beta_0": (lambda b, a: torch.addmm(b, a, a.t(), beta=0), [(3, 3), (3, 4)]),
    "addmm_defaults": (lambda b, a: torch.addmm(b, a.t(), a), [(1, 4), (3, 4)]),
    "matmul_vector_matrix": (torch.matmul, [(4,), (2, 4, 3)]),
}


@pytest.mark.parametrize("batched", [(True, False), (False, True), (True, True)])
@pytest.mark.parametrize("nested", [False, True])
@pytest.mark.parametrize("name", TWO_OPERANDS)
def test_two_operands(name, batched, nested):
    fn, shapes = TWO_OPERANDS[name]
    against_torchs(fn, shapes, batched, nested)


# Cases the rules leave to the loop: the index batched.
LOOPED = {
    "gather_batched_index": (
        lambda x, i: x.gather(1, i.abs().long() % 4),
        [(3, 4), (3, 2)],
    ),
    "index_select_of_a_batched_index": (
        lambda x, i: x.index_select(0, i.abs().long() % 3),
        [(3, 4), (2,)],
    ),
}


@pytest.mark.parametrize("batched", [(True, True), (False, True)])
@pytest.mark.parametrize("name", LOOPED)
def test_batched_indices_run_element_by_element(name, batched):
    fn, shapes = LOOPED[name]
    against_torchs(fn, shapes, batched)


@pytest.mark.parametrize(
    "op",
    [
        "cumsum",
        "flip",
        "repeat",
        "gather",
        "index.Tensor",
        "upsample_nearest2d.vec",
        "zeros_like",
        "matmul",
        "linalg_solve_triangular",
        "addmm",
        "_adaptive_avg_pool2d",
        "_to_copy",
        "nll_loss_forward",
        "unsafe_split.Tensor",
        "max_pool2d_with_indices_backward",
    ],
)
def test_the_rules_are_dualgens_while_registered(op):
    assert_registered_by_dualgen(op)


def test_repeat_with_fewer_repeats_than_dims_raises_as_torch():
    with pytest.raises(RuntimeError, match="can not be smaller"):
        against_torchs(lambda x: x.repeat(2), [(3, 4)], (True,))


JACOBIANS = {
    "gru": lambda x: GRU(x.view(4, 1, 4))[0].flatten(),
    "repeat": lambda x: x.repeat(2) * x.sum(),
    "sort": lambda x: x.sort().values.cumsum(0),
    "max_pool": lambda x: F.max_pool2d(x.view(1, 1, 4, 4), 2).flatten(),
    "pad_and_upsample": lambda x: F.interpolate(
        F.pad(x.view(1, 1, 4, 4), (1, 1, 1, 1), mode="reflect"), scale_factor=2
    ).sum((0, 1)),
    "embedding_like": lambda x: x.view(4, 4)[INDEX].roll(1, 0).flip(1),
}


@pytest.mark.parametrize("name", JACOBIANS)
def test_jacfwd_through_the_rules_matches_torch_func(name):
    f = JACOBIANS[name]
    x = rand(16)
    torch.testing.assert_close(dfunc.jacfwd(f)(x), torch.func.jacfwd(f)(x))


def test_hessian_of_a_pooled_classifier_loss_matches_torch_func():
    """Forward over reverse through max pooling and cross-entropy reaches
    max_pool2d_with_indices_backward and nll_loss_forward with batched tangents."""

    def loss(x):
        h = F.max_pool2d(torch.tanh(x.view(2, 1, 4, 4)), 2, 1)
        return F.cross_entropy(h.flatten(1)[:, :4], torch.tensor([1, 3]))

    x = rand(32)
    torch.testing.assert_close(dfunc.hessian(loss)(x), torch.func.hessian(loss)(x))
