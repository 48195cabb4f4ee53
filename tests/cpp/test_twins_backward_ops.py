"""The C++ twins of dualgen.formulas.backward_ops held to their Python helpers."""

from __future__ import annotations

import itertools

import pytest
import torch

from dualgen import formulas as py

TOL = {"rtol": 1e-12, "atol": 1e-12}
REAL = [torch.float64, torch.float32]
ALL = [torch.float64, torch.complex128]


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def randn(*shape, dtype=torch.float64, g=None):
    return torch.randn(*shape, dtype=dtype, generator=g)


def positive(*shape, dtype=torch.float64, g=None):
    return torch.rand(*shape, dtype=torch.float64, generator=g).add(0.5).to(dtype)


def same(cpp, ref):
    """Equal values (dtype and shape too), or both None."""
    assert (cpp is None) == (ref is None)
    if ref is not None:
        assert cpp.dtype == ref.dtype
        assert cpp.shape == ref.shape
        torch.testing.assert_close(cpp, ref, **TOL)


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
    with pytest.raises(RuntimeError):
        py.elu_second_derivative(x, 1.0, 1.0, 1.0, False)
    both(cpp_formulas, "elu_second_derivative", x, 1.0, 1.0, 1.0, False)


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
    with pytest.raises(ValueError):
        py.glu_double_backward(self, self, self, 1)
    both(cpp_formulas, "glu_double_backward", self, self, self, 1)


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
    with pytest.raises(RuntimeError):
        py.bce_cross_derivative(self, None)
    both(cpp_formulas, "bce_cross_derivative", self, None)
    both(cpp_formulas, "bce_self_second_derivative", self, self, None)


# ---- convolution_backward ---------------------------------------------------

CONVS = {
    # name: (input shape, weight shape, stride, padding, dilation, transposed,
    #        output_padding, groups)
    "1d": ((2, 3, 9), (4, 3, 3), [1], [0], [1], False, [0], 1),
    "2d": ((2, 4, 7, 6), (6, 2, 3, 2), [2, 1], [1, 0], [1, 2], False, [0, 0], 2),
    "2d_transposed": (
        (2, 4, 5, 5),
        (4, 3, 3, 3),
        [2, 2],
        [1, 1],
        [1, 1],
        True,
        [1, 0],
        1,
    ),
    "3d": (
        (1, 2, 4, 4, 3),
        (2, 1, 2, 2, 2),
        [1, 1, 1],
        [0, 1, 0],
        [1, 1, 1],
        False,
        [0, 0, 0],
        2,
    ),
}


def conv_case(name, dtype, seed):
    """Inputs of one convolution_backward; its results as computed in float64
    (CPU convolutions do not take complex: there they only stand for "computed")."""
    ishape, wshape, stride, padding, dilation, transposed, out_pad, groups = CONVS[name]
    g = gen(seed)
    input = randn(*ishape, dtype=dtype, g=g)
    weight = randn(*wshape, dtype=dtype, g=g)
    args = (stride, padding, dilation, transposed, out_pad, groups)
    out_shape = torch.ops.aten.convolution(
        input.real.double(), weight.real.double(), None, *args
    ).shape
    grad_output = randn(*out_shape, dtype=dtype, g=g)
    grad_output_t = randn(*out_shape, dtype=dtype, g=g)
    results = torch.ops.aten.convolution_backward(
        grad_output.real.double(),
        input.real.double(),
        weight.real.double(),
        None,
        *args,
        [True, True, True],
    )
    tangents = {
        0: randn(*wshape, dtype=dtype, g=g),
        1: randn(*ishape, dtype=dtype, g=g),
    }
    return input, weight, grad_output, grad_output_t, results, tangents, args


@pytest.mark.parametrize("dtype", REAL)
@pytest.mark.parametrize("name", sorted(CONVS))
@pytest.mark.parametrize("which", [0, 1, 2])
@pytest.mark.parametrize("absent", [None, "grad_output_t", "other_t"])
def test_convolution_backward_tangent(cpp_formulas, dtype, name, which, absent):
    input, weight, go, go_t, results, tangents, args = conv_case(name, dtype, 11)
    other_t = None if which == 2 else tangents[which]
    # the kernel passes zeros for an absent tangent (None for output 2's other)
    if absent == "grad_output_t":
        go_t = torch.zeros_like(go)
    elif absent == "other_t" and which != 2:
        other_t = torch.zeros_like(other_t)
    ref = both(
        cpp_formulas,
        "convolution_backward_tangent",
        which,
        results[which],
        go_t,
        other_t,
        go,
        input,
        weight,
        *args,
    )
    assert ref.shape == results[which].shape


@pytest.mark.parametrize("which", [0, 1])
def test_convolution_backward_tangent_complex_error(cpp_formulas, which):
    """CPU convolutions refuse complex: the twin raises what the helper does."""
    input, weight, go, go_t, results, tangents, args = conv_case(
        "2d", torch.complex128, 14
    )
    with pytest.raises(NotImplementedError):
        py.convolution_backward_tangent(
            which, results[which], go_t, tangents[which], go, input, weight, *args
        )
    both(
        cpp_formulas,
        "convolution_backward_tangent",
        which,
        results[which],
        go_t,
        tangents[which],
        go,
        input,
        weight,
        *args,
    )


def test_convolution_backward_tangent_complex_bias(cpp_formulas):
    """Output 2 (a sum) takes complex."""
    input, weight, go, go_t, results, _, args = conv_case("2d", torch.complex128, 15)
    ref = both(
        cpp_formulas,
        "convolution_backward_tangent",
        2,
        results[2],
        go_t,
        None,
        go,
        input,
        weight,
        *args,
    )
    assert ref.dtype == torch.complex128


@pytest.mark.parametrize("which", [0, 1, 2])
def test_convolution_backward_tangent_not_computed(cpp_formulas, which):
    input, weight, go, go_t, _, tangents, args = conv_case("1d", torch.float64, 12)
    other_t = None if which == 2 else tangents[which]
    ref = both(
        cpp_formulas,
        "convolution_backward_tangent",
        which,
        None,
        go_t,
        other_t,
        go,
        input,
        weight,
        *args,
    )
    assert ref is None


def test_convolution_backward_tangent_bad_which(cpp_formulas):
    input, weight, go, go_t, results, tangents, args = conv_case(
        "1d", torch.float64, 13
    )
    with pytest.raises(IndexError):
        py.convolution_backward_tangent(
            3, results[0], go_t, tangents[0], go, input, weight, *args
        )
    both(
        cpp_formulas,
        "convolution_backward_tangent",
        3,
        results[0],
        go_t,
        tangents[0],
        go,
        input,
        weight,
        *args,
    )


# ---- norms' backward --------------------------------------------------------


def layer_case(dtype, normalized_shape, g):
    input = randn(3, 4, 5, dtype=dtype, g=g)
    k = len(normalized_shape)
    dims = list(range(input.dim() - k, input.dim()))
    mean = input.mean(dims, keepdim=True)
    var = ((input - mean).abs() ** 2).mean(dims, keepdim=True)
    rstd = (var + 1e-5).rsqrt().to(dtype)
    weight = randn(*normalized_shape, dtype=dtype, g=g)
    return input, weight, mean, rstd, weight.shape


def batch_case(dtype, train, g):
    input = randn(4, 3, 5, 2, dtype=dtype, g=g)
    if train:
        mean = input.mean([0, 2, 3])
        rstd = (input.var([0, 2, 3], unbiased=False) + 1e-5).rsqrt().to(dtype)
    else:  # running_mean, running_var
        mean = randn(3, dtype=dtype, g=g)
        rstd = positive(3, dtype=dtype, g=g)
    weight = randn(3, dtype=dtype, g=g)
    return input, weight, mean, rstd, weight.shape


def group_case(dtype, g, group=2):
    input = randn(2, 4, 3, 2, dtype=dtype, g=g)
    x = input.reshape(2, group, -1)
    mean = x.mean(-1)
    rstd = (x.var(-1, unbiased=False) + 1e-5).rsqrt().to(dtype)
    weight = randn(4, dtype=dtype, g=g)
    return input, weight, mean, rstd, weight.shape


def norm_call(
    cpp_formulas,
    which,
    kind,
    input,
    weight,
    mean,
    rstd,
    wshape,
    extra,
    absent,
    weighted,
    stat_tangents,
    g,
    dtype,
    result=True,
    **kw,
):
    """Both helpers on one norm case; `absent` names the tangent left out: None
    (weight_t, as the kernel passes for grad_weight), or zeros (what the kernel
    passes for an absent grad_out_t / input_t)."""
    grad_out = randn(*input.shape, dtype=dtype, g=g)
    grad_out_t = randn(*input.shape, dtype=dtype, g=g)
    input_t = randn(*input.shape, dtype=dtype, g=g)
    weight_t = randn(*wshape, dtype=dtype, g=g) if weighted else None
    if absent == "grad_out_t":
        grad_out_t = torch.zeros_like(grad_out)
    elif absent == "input_t":
        input_t = torch.zeros_like(input)
    elif absent == "weight_t":
        weight_t = None
    if not weighted:
        weight = None
    mean_t = rstd_t = None
    if stat_tangents:
        mean_t = randn(*mean.shape, dtype=dtype, g=g)
        rstd_t = randn(*rstd.shape, dtype=dtype, g=g)
    res = torch.zeros(1) if result else None
    return both(
        cpp_formulas,
        "norm_backward_tangent",
        which,
        res,
        kind,
        grad_out_t,
        input_t if which != 2 else None,
        weight_t if which == 0 else None,
        mean_t,
        rstd_t,
        grad_out,
        input,
        weight,
        mean,
        rstd,
        extra,
        **kw,
    )


ABSENT = [None, "grad_out_t", "input_t", "weight_t"]


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("which", [0, 1, 2])
@pytest.mark.parametrize("normalized_shape", [[5], [4, 5]])
@pytest.mark.parametrize("weighted", [True, False])
@pytest.mark.parametrize("absent", ABSENT)
def test_norm_backward_tangent_layer(
    cpp_formulas, dtype, which, normalized_shape, weighted, absent
):
    g = gen(20)
    input, weight, mean, rstd, wshape = layer_case(dtype, normalized_shape, g)
    ref = norm_call(
        cpp_formulas,
        which,
        "layer",
        input,
        weight,
        mean,
        rstd,
        wshape,
        list(normalized_shape),
        absent,
        weighted,
        False,
        g,
        dtype,
    )
    assert ref.shape == (input.shape if which == 0 else wshape)


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("which", [0, 1, 2])
@pytest.mark.parametrize("train", [True, False])
@pytest.mark.parametrize("weighted", [True, False])
@pytest.mark.parametrize("absent", ABSENT)
def test_norm_backward_tangent_batch(
    cpp_formulas, dtype, which, train, weighted, absent
):
    g = gen(21)
    input, weight, mean, rstd, wshape = batch_case(dtype, train, g)
    ref = norm_call(
        cpp_formulas,
        which,
        "batch",
        input,
        weight,
        mean,
        rstd,
        wshape,
        None,
        absent,
        weighted,
        False,
        g,
        dtype,
        train=train,
        eps=1e-3,
    )
    assert ref.shape == (input.shape if which == 0 else wshape)


def test_norm_backward_tangent_batch_eps_matters(cpp_formulas):
    """Eval batch norm reads eps: two eps give two answers, both matched."""
    outs = []
    for eps in (1e-5, 0.5):
        g = gen(22)
        input, weight, mean, rstd, wshape = batch_case(torch.float64, False, g)
        outs.append(
            norm_call(
                cpp_formulas,
                0,
                "batch",
                input,
                weight,
                mean,
                rstd,
                wshape,
                None,
                None,
                True,
                False,
                g,
                torch.float64,
                train=False,
                eps=eps,
            )
        )
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
    input, weight, mean, rstd, wshape = group_case(dtype, g)
    ref = norm_call(
        cpp_formulas,
        which,
        "group",
        input,
        weight,
        mean,
        rstd,
        wshape,
        2,
        absent,
        weighted,
        stat_tangents,
        g,
        dtype,
    )
    assert ref.shape == (input.shape if which == 0 else wshape)


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
    ref = norm_call(
        cpp_formulas,
        which,
        kind,
        *case,
        extra,
        None,
        True,
        False,
        g,
        torch.float64,
        result=False,
    )
    assert ref is None


def test_norm_backward_tangent_float32(cpp_formulas):
    g = gen(25)
    dtype = torch.float32
    for which, (kind, case, extra) in itertools.product(
        [0, 1],
        [
            ("layer", layer_case(dtype, [4, 5], g), [4, 5]),
            ("batch", batch_case(dtype, True, g), None),
            ("group", group_case(dtype, g), 2),
        ],
    ):
        ref = norm_call(
            cpp_formulas, which, kind, *case, extra, None, True, False, g, dtype
        )
        assert ref.dtype == dtype
