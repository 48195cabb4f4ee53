"""The batching rules dualgen gives torch's legacy vmap for matrix products,
convolutions, whole reductions and copy_ (csrc/dualgen/batching.cpp) compute what
legacy vmap computed before them (torch's own rule, or its for-loop fallback):
each operand batched or not, nested vmaps, in float64, against the same call
with dualgen's rules removed."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch
from batching_checks import BATCH, against_torchs, assert_registered_by_dualgen, rand
from torch._vmap_internals import _vmap

from dualgen import cpp

pytestmark = [
    pytest.mark.skipif(cpp.state() != "built", reason="C++ extension not built"),
    # torch's fallback warns that it loops (when the warnings are on)
    pytest.mark.filterwarnings("ignore:There is a performance drop"),
]


@pytest.fixture(scope="module", autouse=True)
def _cpp_backend(cpp_kernels_for_module):
    """The C++ kernels, whose batching rules these tests hold (conftest)."""


BATCHINGS = [(True, False), (False, True), (True, True)]

RULES = (
    "mv",
    "mm",
    "convolution",
    "convolution_backward",
    "sum",
    "mean",
    "mean.dim",
    "copy_",
)


@pytest.mark.parametrize("op", RULES)
def test_the_rules_are_dualgens_while_registered(op):
    assert_registered_by_dualgen(op)


@pytest.mark.parametrize("batched", BATCHINGS)
@pytest.mark.parametrize("nested", [False, True])
def test_mv(batched, nested):
    against_torchs(torch.mv, [(4, 5), (5,)], batched, nested)


@pytest.mark.parametrize("batched", BATCHINGS)
@pytest.mark.parametrize("nested", [False, True])
def test_mm(batched, nested):
    against_torchs(torch.mm, [(4, 5), (5, 2)], batched, nested)


def test_matmul_of_a_matrix_and_batched_vectors_and_matrices():
    # (torch's matmul reaches mv and mm, and squeeze_ for a 1-d operand)
    against_torchs(torch.matmul, [(4, 5), (5,)], (False, True))
    against_torchs(torch.matmul, [(5,), (5, 4)], (True, False))
    against_torchs(torch.matmul, [(4, 5), (5, 3)], (False, True))


@dataclass(frozen=True)
class Convolution:
    """aten::convolution's arguments, but for the tensors: their shapes."""

    input: tuple[int, ...]
    weight: tuple[int, ...]
    stride: list[int]
    padding: list[int]
    dilation: list[int]
    transposed: bool
    output_padding: list[int]
    groups: int

    def out_channels(self) -> int:
        if self.transposed:
            return self.weight[1] * self.groups
        return self.weight[0]

    def __call__(self, x, w, b=None):
        return torch.ops.aten.convolution(
            x,
            w,
            b,
            self.stride,
            self.padding,
            self.dilation,
            self.transposed,
            self.output_padding,
            self.groups,
        )


CONVOLUTIONS = {
    "conv2d": Convolution((2, 2, 6, 5), (4, 2, 3, 3), [1, 2], [1, 0], [1, 1], False,
                          [0, 0], 1),
    "conv1d_groups": Convolution((1, 2, 7), (4, 1, 3), [1], [2], [2], False, [0], 2),
    "conv_transpose2d": Convolution((2, 2, 4, 4), (2, 3, 2, 2), [2, 2], [0, 1],
                                    [1, 1], True, [1, 0], 1),
}  # fmt: skip


@pytest.mark.parametrize("case", CONVOLUTIONS)
@pytest.mark.parametrize(
    "batched", [(True, False, False), (False, True, False), (True, True, True)]
)
@pytest.mark.parametrize("nested", [False, True])
def test_convolution(case, batched, nested):
    conv = CONVOLUTIONS[case]
    shapes = [conv.input, conv.weight, (conv.out_channels(),)]
    against_torchs(conv, shapes, batched, nested)


@pytest.mark.parametrize("case", CONVOLUTIONS)
@pytest.mark.parametrize(
    "mask", [[True, False, False], [True, True, False], [False, True, True]]
)
@pytest.mark.parametrize("batched", [(True, False, False), (True, True, False)])
@pytest.mark.parametrize("nested", [False, True])
def test_convolution_backward(case, mask, batched, nested):
    conv = CONVOLUTIONS[case]
    output_shape = conv(rand(*conv.input), rand(*conv.weight)).shape

    def backward(grad_output, x, w):
        grads = torch.ops.aten.convolution_backward(
            grad_output,
            x,
            w,
            [conv.out_channels()],
            conv.stride,
            conv.padding,
            conv.dilation,
            conv.transposed,
            conv.output_padding,
            conv.groups,
            mask,
        )
        return tuple(g for g, wanted in zip(grads, mask) if wanted)

    against_torchs(
        backward, [tuple(output_shape), conv.input, conv.weight], batched, nested
    )


REDUCTIONS = {
    "sum": lambda x: x.sum(),
    "sum_dtype": lambda x: torch.ops.aten.sum.default(x, dtype=torch.float32),
    "mean": lambda x: x.mean(),
    "mean_dim": lambda x: x.mean(dim=(0, -1)),
    "mean_dim_keepdim": lambda x: x.mean(dim=1, keepdim=True),
    "mean_all_dims": lambda x: torch.ops.aten.mean.dim(x, None),
}


@pytest.mark.parametrize("name", REDUCTIONS)
@pytest.mark.parametrize("shape", [(3, 4, 2), (5, 1, 1)])
@pytest.mark.parametrize("nested", [False, True])
def test_whole_reductions(name, shape, nested):
    against_torchs(REDUCTIONS[name], [shape], (True,), nested)


@pytest.mark.parametrize("name", ["sum", "mean", "sum_dtype"])
def test_whole_reductions_of_0d_elements(name):
    against_torchs(REDUCTIONS[name], [()], (True,))


@pytest.mark.parametrize("src_batched", [True, False])
@pytest.mark.parametrize("src_shape", [(3, 4), (4,), ()])
@pytest.mark.parametrize("nested", [False, True])
def test_copy_into_a_batched_tensor(src_batched, src_shape, nested):
    def copied(self, src):
        return self.clone().copy_(src)

    against_torchs(copied, [(3, 4), src_shape], (True, src_batched), nested)


def test_copy_writes_through_a_view_of_the_batch():
    def into_view(self, src):
        target = self.clone()
        target[1:].copy_(src.to(torch.float32))
        return target

    against_torchs(into_view, [(3, 4), (2, 4)], (True, True))


def test_copy_from_a_batch_into_an_unbatched_tensor_is_refused():
    target = rand(3, 4)
    with pytest.raises(RuntimeError, match="copy_"):
        _vmap(lambda src: target.copy_(src))(rand(BATCH, 3, 4))
