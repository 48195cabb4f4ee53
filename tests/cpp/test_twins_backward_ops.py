"""The C++ twins of dualgen.formulas.backward_ops held to their Python helpers."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import pytest
import torch
from twin_checks import gen, randn, same

from dualgen import formulas as py

REAL = [torch.float64, torch.float32]
ALL = [torch.float64, torch.complex128]


def positive(*shape, dtype=torch.float64, g=None):
    return torch.rand(*shape, dtype=torch.float64, generator=g).add(0.5).to(dtype)


def both(cpp_formulas, name, *args, **kwargs):
    """Call the twin and the helper on the same arguments; assert they agree,
    or that both raise the same kind of error with the same first line."""
    try:
        ref = getattr(py, name)(*args, **kwargs)
    except (RuntimeError, ValueError, IndexError, NotImplementedError) as error:
        with pytest.raises(type(error)) as caught:
            getattr(cpp_formulas, name)(*args, **kwargs)
        assert first_line(caught.value) == first_line(error)
        return None
    cpp = getattr(cpp_formulas, name)(*args, **kwargs)
    same(cpp, ref)
    return ref


def both_raise(cpp_formulas, error, name, *args):
    """The helper raises `error` on these arguments, and the twin just as it."""
    with pytest.raises(error):
        getattr(py, name)(*args)
    both(cpp_formulas, name, *args)


def first_line(error) -> str:
    return str(error).strip().splitlines()[0]


# ---- elementwise second derivatives ---------------------------------------


@pytest.mark.parametrize("dtype", REAL)
@pytest.mark.parametrize("is_result", [False, True])
@pytest.mark.parametrize(
    "alpha, scale, input_scale",
    [
        (1.0, 1.0, 1.0),
        (1.6732632423543772, 1.0507009873554805, 1.0),
        (2, 3, 2),
        (0.5, 2, 1.5),
    ],
)
def test_elu_second_derivative(
    cpp_formulas, dtype, is_result, alpha, scale, input_scale
):
    x = randn(5, 7, dtype=dtype, g=gen(1))
    x[0, 0] = 0.0
    ref = both(
        cpp_formulas, "elu_second_derivative", x, alpha, scale, input_scale, is_result
    )
    assert ref is not None and ref.abs().sum() > 0


def test_elu_second_derivative_complex_error(cpp_formulas):
    x = randn(3, dtype=torch.complex128, g=gen(2))
    both_raise(
        cpp_formulas, RuntimeError, "elu_second_derivative", x, 1.0, 1.0, 1.0, False
    )


@pytest.mark.parametrize("dtype", ALL + [torch.float32])
@pytest.mark.parametrize("approximate", [None, "none", "tanh"])
def test_gelu_second_derivative(cpp_formulas, dtype, approximate):
    x = randn(4, 6, dtype=dtype, g=gen(3)) * 2
    args = (x,) if approximate is None else (x, approximate)
    ref = both(cpp_formulas, "gelu_second_derivative", *args)
    assert ref is not None


def test_gelu_second_derivative_tanh_differs(cpp_formulas):
    """The two forms give different values: the test can tell them apart."""
    x = randn(8, g=gen(4))
    exact = cpp_formulas.gelu_second_derivative(x, "none")
    tanh = cpp_formulas.gelu_second_derivative(x, "tanh")
    assert not torch.equal(exact, tanh)
    same(tanh, py.gelu_second_derivative(x, "tanh"))


@pytest.mark.parametrize("dtype", ALL + [torch.float32])
def test_mish_second_derivative(cpp_formulas, dtype):
    x = randn(3, 5, dtype=dtype, g=gen(5)) * 3
    both(cpp_formulas, "mish_second_derivative", x)
    both(cpp_formulas, "mish_derivative", x)


# ---- glu --------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("dim", [0, 1, 2, -1, -3])
def test_glu_double_backward(cpp_formulas, dtype, dim):
    g = gen(6)
    self = randn(4, 6, 2, dtype=dtype, g=g)
    grad = randn(4, 6, 2, dtype=dtype, g=g)
    out_shape = list(self.shape)
    out_shape[dim] //= 2
    grad_output = randn(*out_shape, dtype=dtype, g=g)
    ref = both(cpp_formulas, "glu_double_backward", grad, grad_output, self, dim)
    assert ref.shape == self.shape


def test_glu_double_backward_one_chunk_error(cpp_formulas):
    self = randn(3, 1, g=gen(7))
    both_raise(cpp_formulas, ValueError, "glu_double_backward", self, self, self, 1)


# ---- binary cross entropy -------------------------------------------------


def bce_inputs(dtype, seed):
    g = gen(seed)
    self = torch.rand(4, 5, dtype=torch.float64, generator=g).to(dtype)
    self[0, 0], self[0, 1], self[0, 2] = 0.0, 1.0, 1e-14  # the clamp's side
    target = torch.rand(4, 5, dtype=torch.float64, generator=g).to(dtype)
    weight = positive(4, 5, dtype=dtype, g=g)
    return self, target, weight


@pytest.mark.parametrize("dtype", REAL)
@pytest.mark.parametrize("weighted", [False, True])
def test_bce_self_second_derivative(cpp_formulas, dtype, weighted):
    self, target, weight = bce_inputs(dtype, 8)
    w = weight[0] if weighted else None  # broadcast weight
    both(cpp_formulas, "bce_self_second_derivative", self, target, w)


@pytest.mark.parametrize("dtype", REAL)
@pytest.mark.parametrize("weighted", [False, True])
def test_bce_cross_derivative(cpp_formulas, dtype, weighted):
    self, _, weight = bce_inputs(dtype, 9)
    both(cpp_formulas, "bce_cross_derivative", self, weight if weighted else None)


def test_bce_complex_error(cpp_formulas):
    self = torch.rand(3, dtype=torch.complex128, generator=gen(10))
    both_raise(cpp_formulas, RuntimeError, "bce_cross_derivative", self, None)
    both(cpp_formulas, "bce_self_second_derivative", self, self, None)


# ---- norms' backward --------------------------------------------------------


@dataclass
class NormCase:
    """One norm's backward: `kind` "layer", "batch" or "group", its `extra`
    (normalized_shape, None, the group count), saved statistics, and the
    keyword arguments of batch norm (train, eps)."""

    kind: str
    input: torch.Tensor
    weight: torch.Tensor
    mean: torch.Tensor
    rstd: torch.Tensor
    extra: object
    options: dict = field(default_factory=dict)


def layer_case(dtype, normalized_shape, g) -> NormCase:
    input = randn(3, 4, 5, dtype=dtype, g=g)
    k = len(normalized_shape)
    dims = list(range(input.dim() - k, input.dim()))
    mean = input.mean(dims, keepdim=True)
    var = ((input - mean).abs() ** 2).mean(dims, keepdim=True)
    rstd = (var + 1e-5).rsqrt().to(dtype)
    weight = randn(*normalized_shape, dtype=dtype, g=g)
    return NormCase("layer", input, weight, mean, rstd, list(normalized_shape))


def batch_case(dtype, train, g, eps=0.0) -> NormCase:
    input = randn(4, 3, 5, 2, dtype=dtype, g=g)
    if train:
        mean = input.mean([0, 2, 3])
        rstd = (input.var([0, 2, 3], unbiased=False) + 1e-5).rsqrt().to(dtype)
    else:  # running_mean, running_var
        mean = randn(3, dtype=dtype, g=g)
        rstd = positive(3, dtype=dtype, g=g)
    weight = randn(3, dtype=dtype, g=g)
    options = {"train": train, "eps": eps}
    return NormCase("batch", input, weight, mean, rstd, None, options)


def group_case(dtype, g, group=2) -> NormCase:
    input = randn(2, 4, 3, 2, dtype=dtype, g=g)
    x = input.reshape(2, group, -1)
    mean = x.mean(-1)
    rstd = (x.var(-1, unbiased=False) + 1e-5).rsqrt().to(dtype)
    weight = randn(4, dtype=dtype, g=g)
    return NormCase("group", input, weight, mean, rstd, group)


def norm_call(
    cpp_formulas,
    which,
    case,
    g,
    dtype,
    absent=None,
    weighted=True,
    stat_tangents=False,
    result=True,
):
    """Both helpers on one norm case; `absent` names the tangent left out: None
    (weight_t, as the kernel passes for grad_weight), or zeros (what the kernel
    passes for an absent grad_out_t / input_t)."""
    grad_out = randn(*case.input.shape, dtype=dtype, g=g)
    grad_out_t = randn(*case.input.shape, dtype=dtype, g=g)
    input_t = randn(*case.input.shape, dtype=dtype, g=g)
    weight_t = randn(*case.weight.shape, dtype=dtype, g=g) if weighted else None
    if absent == "grad_out_t":
        grad_out_t = torch.zeros_like(grad_out)
    elif absent == "input_t":
        input_t = torch.zeros_like(case.input)
    elif absent == "weight_t":
        weight_t = None
    mean_t = rstd_t = None
    if stat_tangents:
        mean_t = randn(*case.mean.shape, dtype=dtype, g=g)
        rstd_t = randn(*case.rstd.shape, dtype=dtype, g=g)
    tangents = [
        grad_out_t,
        input_t if which != 2 else None,
        weight_t if which == 0 else None,
        mean_t,
        rstd_t,
    ]
    weight = case.weight if weighted else None
    primals = [grad_out, case.input, weight, case.mean, case.rstd]
    res = torch.zeros(1) if result else None
    args = (which, res, case.kind, tangents, primals, case.extra)
    return both(cpp_formulas, "norm_backward_tangent", *args, **case.options)


def check_norm(cpp_formulas, which, case, g, dtype, **options):
    """norm_call on a computed output: shaped as the input (0) or the weight."""
    ref = norm_call(cpp_formulas, which, case, g, dtype, **options)
    assert ref.shape == (case.input.shape if which == 0 else case.weight.shape)


ABSENT = [None, "grad_out_t", "input_t", "weight_t"]


# (kind, variant): layer norm over normalized_shape, batch norm training or not
LAYER_AND_BATCH = [("layer", [5]), ("layer", [4, 5]), ("batch", True), ("batch", False)]


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("which", [0, 1, 2])
@pytest.mark.parametrize("kind, variant", LAYER_AND_BATCH)
@pytest.mark.parametrize("weighted", [True, False])
@pytest.mark.parametrize("absent", ABSENT)
def test_norm_backward_tangent_layer_and_batch(
    cpp_formulas, dtype, which, kind, variant, weighted, absent
):
    if kind == "layer":
        g = gen(20)
        case = layer_case(dtype, variant, g)
    else:
        g = gen(21)
        case = batch_case(dtype, variant, g, eps=1e-3)
    check_norm(cpp_formulas, which, case, g, dtype, absent=absent, weighted=weighted)


@pytest.mark.parametrize("which", [0, 1])
@pytest.mark.parametrize("kind, variant", LAYER_AND_BATCH)
def test_norm_backward_tangent_gradients_where_autograd_records(
    cpp_formulas, which, kind, variant
):
    """Where autograd records the input and not the saved statistics, the twin's
    tangent has the helper's gradients (the statistics moving with the input)."""
    g = gen(24)
    case = (
        layer_case(torch.float64, variant, g)
        if kind == "layer"
        else batch_case(torch.float64, variant, g, eps=1e-5)
    )
    grad_out = randn(*case.input.shape, dtype=torch.float64, g=g)
    tangents = [
        randn(*t.shape, dtype=torch.float64, g=g) for t in (grad_out, case.input)
    ]
    weight_t = randn(*case.weight.shape, dtype=torch.float64, g=g)

    def gradients(formulas):
        leaves = [
            t.clone().requires_grad_() for t in (grad_out, case.input, case.weight)
        ]
        primals = [*leaves, case.mean, case.rstd]
        args = (which, torch.zeros(1), case.kind, [*tangents, weight_t, None, None])
        out = formulas.norm_backward_tangent(*args, primals, case.extra, **case.options)
        return torch.autograd.grad(out.square().sum(), leaves, allow_unused=True)

    same(gradients(cpp_formulas), gradients(py))


def test_norm_backward_tangent_batch_eps_matters(cpp_formulas):
    """Eval batch norm reads eps: two eps give two answers, both matched."""
    outs = []
    for eps in (1e-5, 0.5):
        g = gen(22)
        case = batch_case(torch.float64, False, g, eps=eps)
        outs.append(norm_call(cpp_formulas, 0, case, g, torch.float64))
    assert not torch.allclose(outs[0], outs[1])


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("which", [0, 1, 2])
@pytest.mark.parametrize("stat_tangents", [False, True])
@pytest.mark.parametrize("weighted", [True, False])
@pytest.mark.parametrize("absent", ABSENT)
def test_norm_backward_tangent_group(
    cpp_formulas, dtype, which, stat_tangents, weighted, absent
):
    g = gen(23)
    case = group_case(dtype, g)
    check_norm(
        cpp_formulas,
        which,
        case,
        g,
        dtype,
        absent=absent,
        weighted=weighted,
        stat_tangents=stat_tangents,
    )


@pytest.mark.parametrize("kind, extra", [("layer", [5]), ("batch", None), ("group", 2)])
@pytest.mark.parametrize("which", [0, 1, 2])
def test_norm_backward_tangent_not_computed(cpp_formulas, kind, extra, which):
    g = gen(24)
    if kind == "layer":
        case = layer_case(torch.float64, [5], g)
    elif kind == "batch":
        case = batch_case(torch.float64, True, g)
    else:
        case = group_case(torch.float64, g)
    assert case.extra == extra
    assert norm_call(cpp_formulas, which, case, g, torch.float64, result=False) is None


def test_norm_backward_tangent_float32(cpp_formulas):
    g = gen(25)
    dtype = torch.float32
    for which, case in itertools.product(
        [0, 1],
        [
            layer_case(dtype, [4, 5], g),
            batch_case(dtype, True, g),
            group_case(dtype, g),
        ],
    ):
        assert norm_call(cpp_formulas, which, case, g, dtype).dtype == dtype


@pytest.mark.parametrize("count", [4, 6])
def test_norm_backward_tangent_takes_five_tangents_and_primals(cpp_formulas, count):
    g = gen(26)
    case = layer_case(torch.float64, [5], g)
    primals = [randn(3, 4, 5, g=g), case.input, case.weight, case.mean, case.rstd]
    for tangents, primal_list in [
        ((primals * 2)[:count], primals),
        (primals, (primals * 2)[:count]),
    ]:
        args = (0, torch.zeros(1), "layer", tangents, primal_list, case.extra)
        with pytest.raises(ValueError, match="expected 5"):
            py.norm_backward_tangent(*args)
        with pytest.raises(ValueError, match="expected 5"):
            cpp_formulas.norm_backward_tangent(*args)
