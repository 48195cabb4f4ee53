"""The C++ twins of dualgen.formulas.reductions against their Python helpers, on
the argument kinds of their call sites in generated/jvp.py."""

from __future__ import annotations

import math

import pytest
import torch
from devices import DEVICE

from dualgen import formulas as F

DTYPES = [torch.float64, torch.complex128]
# Reduction `dim`s: None and [] mean all; ints are one dim (aminmax's `int?`).
DIMS = [None, [], [1], [-1], [0, 2], [2, -3], 1, -2]


def rand(shape, dtype=torch.float64, seed=0):
    g = torch.Generator(DEVICE).manual_seed(seed)
    return torch.randn(shape, dtype=dtype, generator=g)


def tied(shape, dtype=torch.float64, seed=0):
    """Small integers, so that maxima and minima tie."""
    g = torch.Generator(DEVICE).manual_seed(seed)
    return torch.randint(-2, 3, shape, generator=g).to(dtype)


def assert_same(cpp, py):
    """Equal None-ness, dtype, shape and values (NaN where the helper has NaN)."""
    assert (cpp is None) == (py is None)
    if py is not None:
        torch.testing.assert_close(cpp, py, rtol=1e-12, atol=1e-12, equal_nan=True)


def assert_same_error(cpp_call, py_call, error=RuntimeError):
    """Both raise `error` with the same first line of text."""
    with pytest.raises(error) as py_err:
        py_call()
    with pytest.raises(error) as cpp_err:
        cpp_call()
    first = str(py_err.value).splitlines()[0]
    assert str(cpp_err.value).splitlines()[0] == first


def both(cpp_formulas, name, *args):
    """Call the twin `name` and its Python helper on the same arguments."""
    assert_same(getattr(cpp_formulas, name)(*args), getattr(F, name)(*args))


def as_list(dim, ndim):
    """`dim` as aten's reductions read it (an int is one dim; None all)."""
    if dim is None:
        return list(range(ndim))
    return [dim] if isinstance(dim, int) else dim


# amax / amin / aminmax ------------------------------------------------------


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", DIMS)
@pytest.mark.parametrize("op", [torch.amax, torch.amin])
def test_amax_tangent(cpp_formulas, op, dim, keepdim):
    x = tied((3, 4, 5))
    t = rand((3, 4, 5), seed=1)
    if isinstance(dim, int) or dim is None:  # aminmax's int? dim
        lo, hi = torch.aminmax(x, dim=dim, keepdim=keepdim)
        result = lo if op is torch.amin else hi
    else:
        result = op(x, dim, keepdim)
    both(cpp_formulas, "amax_tangent", t, x, result, dim, keepdim)


@pytest.mark.parametrize("dim", [None, [], [0], 0, -1])
def test_amax_tangent_0d_and_mixed_dtypes(cpp_formulas, dim):
    x = torch.tensor(1.5)
    both(cpp_formulas, "amax_tangent", torch.tensor(0.25), x, x.clone(), dim, False)
    # a float64 tangent of a float32 input
    x32 = tied((4, 3)).float()
    res = torch.amax(x32, as_list(dim, 2), True)
    both(cpp_formulas, "amax_tangent", rand((4, 3), seed=2), x32, res, dim, True)


# max.dim / kthvalue / mode / median.dim and sort / topk / cummax -------------


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", [0, 1, -1, -3])
@pytest.mark.parametrize("dtype", DTYPES)
def test_gather_reduced(cpp_formulas, dtype, dim, keepdim):
    x = tied((3, 4, 5), seed=3)
    t = rand((3, 4, 5), dtype, seed=4)
    for _, indices in (
        torch.max(x, dim, keepdim),
        torch.kthvalue(x, 2, dim, keepdim),
        torch.median(x, dim, keepdim),
    ):
        both(cpp_formulas, "gather_reduced", t, dim, indices, keepdim)


def test_gather_reduced_0d(cpp_formulas):
    x = torch.tensor(2.0)
    _, indices = torch.max(x, 0, False)
    both(cpp_formulas, "gather_reduced", torch.tensor(0.5), 0, indices, False)
    both(cpp_formulas, "gather_reduced", torch.tensor(0.5 + 1j), -1, indices, True)


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("dtype", DTYPES)
def test_gather_selected(cpp_formulas, dtype, dim):
    x = tied((3, 4, 5), seed=5)
    t = rand((3, 4, 5), dtype, seed=6)
    for indices in (
        torch.sort(x, dim)[1],
        torch.sort(x, stable=True, dim=dim, descending=True)[1],
        torch.topk(x, 2, dim)[1],
        torch.cummax(x, dim)[1],
        torch.cummin(x, dim)[1],
    ):
        both(cpp_formulas, "gather_selected", t, dim, indices)
    x0 = torch.tensor(3.0)
    both(cpp_formulas, "gather_selected", torch.tensor(1.0), 0, torch.sort(x0)[1])


def test_gather_errors(cpp_formulas):
    t = rand((3, 4))
    bad = torch.full((3, 4), 7)
    assert_same_error(
        lambda: cpp_formulas.gather_selected(t, 1, bad),
        lambda: F.gather_selected(t, 1, bad),
    )
    assert_same_error(
        lambda: cpp_formulas.gather_reduced(t, 1, bad[:, 0], False),
        lambda: F.gather_reduced(t, 1, bad[:, 0], False),
    )


# norms and dist -------------------------------------------------------------

ORDS = [None, 0, 1, 2, 3, 0.5, 1.5, 2.5, math.inf, -math.inf]


def norm_input(dtype, seed):
    """Random, with zeros and (for the inf-norms) ties of the largest |x|."""
    x = rand((3, 4, 5), dtype, seed)
    x[0, 1] = 0
    x[1, :, 2] = 0
    x[2, 0, 0] = x[2].abs().max() * (1 if dtype.is_complex else -1)
    x[2, 3, 4] = x[2].abs().max()
    return x


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", [None, [], [1], [-1, 0], 2])
@pytest.mark.parametrize("ord", ORDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_vector_norm_tangent(cpp_formulas, dtype, ord, dim, keepdim):
    x = norm_input(dtype, seed=7)
    t = rand((3, 4, 5), dtype, seed=8)
    p = 2 if ord is None else ord
    result = torch.linalg.vector_norm(x, p, dim, keepdim)
    both(cpp_formulas, "vector_norm_tangent", t, x, ord, dim, keepdim, result)


@pytest.mark.parametrize("ord", [2, 1.5, math.inf])
def test_vector_norm_tangent_broadcast_and_0d(cpp_formulas, ord):
    # A tangent that broadcasts to the primal; a real tangent of a complex input.
    x = norm_input(torch.complex128, seed=9)
    result = torch.linalg.vector_norm(x, ord, [1], False)
    t = rand((1, 4, 5), seed=10)
    both(cpp_formulas, "vector_norm_tangent", t, x, ord, [1], False, result)
    # norm.Scalar: dim None, keepdim False; a 0-d input.
    x0 = torch.tensor(-3.0)
    r0 = torch.linalg.vector_norm(x0, ord)
    both(
        cpp_formulas, "vector_norm_tangent", torch.tensor(0.5), x0, ord, None, False, r0
    )
    # linalg_vector_norm's dtype: a float32 input normed in float64.
    x32 = norm_input(torch.float32, seed=11)
    r64 = torch.linalg.vector_norm(x32, ord, [0, 2], True, dtype=torch.float64)
    t32 = rand((3, 4, 5), seed=12).float()
    both(cpp_formulas, "vector_norm_tangent", t32, x32, ord, [0, 2], True, r64)


def test_vector_norm_tangent_error(cpp_formulas):
    x = rand((3, 4))
    result = torch.linalg.vector_norm(x)
    t = rand((2, 4))  # does not expand to x's shape
    assert_same_error(
        lambda: cpp_formulas.vector_norm_tangent(t, x, 2, None, False, result),
        lambda: F.vector_norm_tangent(t, x, 2, None, False, result),
    )


@pytest.mark.parametrize("p", [2, 0, 1, 3, 1.5, math.inf, -math.inf])
@pytest.mark.parametrize("dtype", DTYPES)
def test_dist_tangent(cpp_formulas, dtype, p):
    a = norm_input(dtype, seed=13)[0]
    b = rand((5,), dtype, seed=14)
    b[1] = a[0, 1]  # a zero of the difference
    result = torch.dist(a, b, p)
    a_t, b_t = rand((4, 5), dtype, seed=15), rand((5,), dtype, seed=16)
    both(cpp_formulas, "dist_tangent", a_t, a, b, p, result)
    both(cpp_formulas, "dist_tangent", b_t, a, b, p, result)  # other's tangent


# var / std / mean -----------------------------------------------------------


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("correction", [None, 0, 1, 2, 0.5])
@pytest.mark.parametrize("dim", [None, [], [1], [0, -1], 2])
@pytest.mark.parametrize("dtype", DTYPES)
def test_var_std_tangent(cpp_formulas, dtype, dim, correction, keepdim):
    x = rand((3, 4, 5), dtype, seed=17)
    x[1] = 2.0  # a constant slice: std 0 along the last dims
    t = rand((3, 4, 5), dtype, seed=18)
    kwargs = {} if correction is None else {"correction": correction}
    var = torch.var(x, dim, keepdim=keepdim, **kwargs)
    std = torch.std(x, dim, keepdim=keepdim, **kwargs)
    both(cpp_formulas, "var_tangent", t, x, dim, correction, keepdim, var)
    both(cpp_formulas, "std_tangent", t, x, dim, correction, keepdim, std)


@pytest.mark.filterwarnings("ignore:var\\(\\)")
@pytest.mark.parametrize("correction", [None, 0, 1.5])
def test_var_std_tangent_0d_and_float32(cpp_formulas, correction):
    x = torch.tensor(1.25)
    kwargs = {} if correction is None else {"correction": correction}
    var = torch.var(x, **kwargs)
    for name, result in (("var_tangent", var), ("std_tangent", var.sqrt())):
        both(cpp_formulas, name, torch.tensor(0.5), x, None, correction, False, result)
        both(cpp_formulas, name, torch.tensor(0.5), x, [0], correction, True, result)
    x32 = rand((4, 6), torch.complex64, seed=19)
    var32 = torch.var(x32, [1], keepdim=False, **kwargs)
    t = rand((4, 6), torch.complex64, seed=20)
    both(cpp_formulas, "var_tangent", t, x32, [1], correction, False, var32)
    both(cpp_formulas, "std_tangent", t, x32, [1], correction, False, var32.sqrt())


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", DIMS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_mean_tangent(cpp_formulas, dtype, dim, keepdim):
    x = rand((3, 4, 5), dtype, seed=21)
    t = rand((3, 4, 5), dtype, seed=22)
    both(cpp_formulas, "mean_tangent", t, x, dim, keepdim)
    x0 = torch.tensor(2.0, dtype=dtype)
    for d in (None, [], [0]):
        both(
            cpp_formulas, "mean_tangent", torch.tensor(3.0, dtype=dtype), x0, d, keepdim
        )


# logsumexp and prod ---------------------------------------------------------


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", [[], [1], [-1], [0, 2], 1])
@pytest.mark.parametrize("dtype", DTYPES)
def test_logsumexp_tangent(cpp_formulas, dtype, dim, keepdim):
    x = rand((3, 4, 5), dtype, seed=23)
    t = rand((3, 4, 5), dtype, seed=24)
    result = torch.logsumexp(x, as_list(dim, 3) or list(range(3)), keepdim)
    both(cpp_formulas, "logsumexp_tangent", t, x, dim, keepdim, result)


def test_logsumexp_tangent_mixed_dtypes_and_0d(cpp_formulas):
    x32 = rand((3, 4), seed=25).float()
    r32 = torch.logsumexp(x32, [1], True)
    for t in (rand((3, 4), seed=26), rand((3, 4), torch.complex128, seed=27)):
        both(cpp_formulas, "logsumexp_tangent", t, x32, [1], True, r32)
    x0 = torch.tensor(0.5)
    r0 = torch.logsumexp(x0, [0])
    both(cpp_formulas, "logsumexp_tangent", torch.tensor(2.0), x0, [0], False, r0)


def prod_input(dtype, seed):
    x = rand((3, 4, 5), dtype, seed)
    x[0, 1, 2] = 0  # one zero in some reductions
    x[1, 2, 0] = x[1, 2, 3] = 0  # two zeros in others
    x[2, 0, 1] = x[2, 3, 1] = 0
    return x


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", [None, 0, 1, -1])
@pytest.mark.parametrize("dtype", DTYPES)
def test_prod_tangent(cpp_formulas, dtype, dim, keepdim):
    t = rand((3, 4, 5), dtype, seed=29)
    for x in (prod_input(dtype, seed=28), rand((3, 4, 5), dtype, seed=30)):
        if dim is None:
            result, keepdim = torch.prod(x), False  # prod: None, False
        else:
            result = torch.prod(x, dim, keepdim)
        both(cpp_formulas, "prod_tangent", t, x, dim, keepdim, result)


def test_prod_tangent_dtypes_and_0d(cpp_formulas):
    # A float64 tangent of a float32 input stays float64; prod's dtype argument.
    x32 = prod_input(torch.float32, seed=31)
    t64 = rand((3, 4, 5), seed=32)
    both(cpp_formulas, "prod_tangent", t64, x32, 1, False, torch.prod(x32, 1))
    r64 = torch.prod(x32, dtype=torch.float64)
    both(cpp_formulas, "prod_tangent", t64.float(), x32, None, False, r64)
    x0 = torch.tensor(-2.0)
    both(cpp_formulas, "prod_tangent", torch.tensor(0.5), x0, None, False, x0.prod())
    both(cpp_formulas, "prod_tangent", torch.tensor(0.5), x0, 0, True, x0.prod(0))


# full max / min / median ----------------------------------------------------


@pytest.mark.parametrize("op", [torch.max, torch.min, torch.median, torch.nanmedian])
def test_evenly_read_tangent(cpp_formulas, op):
    x = tied((4, 5), seed=33)
    t = rand((4, 5), seed=34)
    both(cpp_formulas, "evenly_read_tangent", t, x, op(x))
    x[1, 2] = math.nan  # NaN matches NaN (nanmedian skips it)
    both(cpp_formulas, "evenly_read_tangent", t, x, op(x))
    x0 = torch.tensor(1.0)
    both(cpp_formulas, "evenly_read_tangent", torch.tensor(3.0), x0, op(x0))
    x32 = x.float()
    both(cpp_formulas, "evenly_read_tangent", t, x32, op(x32))
    # a result no element equals: 0, not 0 / 0
    both(cpp_formulas, "evenly_read_tangent", t, x, torch.tensor(100.0))


# renorm ---------------------------------------------------------------------


@pytest.mark.parametrize("maxnorm", [1, 2.5])
@pytest.mark.parametrize("p", [1, 2, 3, 1.5, math.inf])
@pytest.mark.parametrize("dim", [0, 1, -1, 5])
@pytest.mark.parametrize("dtype", DTYPES)
def test_renorm_tangent(cpp_formulas, dtype, dim, p, maxnorm):
    # Some slices over maxnorm and some under; dim 5 wraps as Python's 5 % 3.
    x = rand((3, 4, 5), dtype, seed=35) * torch.linspace(
        0.1, 1.5, 5, dtype=torch.float64
    )
    t = rand((3, 4, 5), dtype, seed=36)
    both(cpp_formulas, "renorm_tangent", t, x, p, dim, maxnorm)


def test_renorm_tangent_1d(cpp_formulas):
    x = torch.tensor([0.5, -3.0, 0.0, 2.0], dtype=torch.float64)
    t = rand((4,), seed=37)
    both(cpp_formulas, "renorm_tangent", t, x, 2, 0, 1.0)


# cumprod / logcumsumexp -----------------------------------------------------


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("dtype", DTYPES)
def test_scan_tangent_cumprod(cpp_formulas, dtype, dim):
    x = prod_input(dtype, seed=38)
    t = rand((3, 4, 5), dtype, seed=39)
    both(cpp_formulas, "scan_tangent", t, x, dim, "cumprod")
    # the call site's self_t.to(result.dtype): a float32 input, float64 result
    x32 = x.to(torch.complex64 if dtype.is_complex else torch.float32)
    result = torch.cumprod(x32, dim, dtype=dtype)
    both(
        cpp_formulas,
        "scan_tangent",
        t.to(result.dtype),
        x32.to(result.dtype),
        dim,
        "cumprod",
    )


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("dtype", DTYPES)
def test_scan_tangent_logcumsumexp(cpp_formulas, dtype, dim):
    x = rand((3, 4, 5), dtype, seed=40)
    x[0] = -math.inf  # leading -inf: 0 rather than NaN partials
    x[1, 2, 3] = -math.inf
    t = rand((3, 4, 5), dtype, seed=41)
    both(cpp_formulas, "scan_tangent", t, x, dim, "logcumsumexp")


@pytest.mark.parametrize("kind", ["cumprod", "logcumsumexp"])
def test_scan_tangent_0d_and_single(cpp_formulas, kind):
    both(cpp_formulas, "scan_tangent", torch.tensor(0.5), torch.tensor(2.0), 0, kind)
    both(
        cpp_formulas,
        "scan_tangent",
        rand((1, 3), seed=42),
        rand((1, 3), seed=43),
        0,
        kind,
    )


def test_scan_tangent_error(cpp_formulas):
    x, t = rand((3, 4)), rand((3, 4), seed=44)
    assert_same_error(
        lambda: cpp_formulas.scan_tangent(t, x, 2, "cumprod"),
        lambda: F.scan_tangent(t, x, 2, "cumprod"),
        IndexError,
    )


def test_twins_are_not_the_python_helpers(cpp_formulas):
    """The module under test holds the C++ twins, not Python functions."""
    for name in [
        "amax_tangent",
        "dist_tangent",
        "evenly_read_tangent",
        "gather_reduced",
        "gather_selected",
        "logsumexp_tangent",
        "mean_tangent",
        "prod_tangent",
        "renorm_tangent",
        "scan_tangent",
        "std_tangent",
        "var_tangent",
        "vector_norm_tangent",
    ]:
        twin = getattr(cpp_formulas, name)
        assert twin is not getattr(F, name)
        assert type(twin).__name__ == "builtin_function_or_method"


# _foreach_norm ---------------------------------------------------------------


@pytest.mark.parametrize("ord", [2, 0, 1, 3, 1.5, math.inf, -math.inf])
@pytest.mark.parametrize("dtype", DTYPES)
def test_foreach_norm_tangents(cpp_formulas, dtype, ord):
    xs = [norm_input(dtype, seed=40), rand((4,), dtype, seed=41), rand((), dtype, 42)]
    ts = [rand(x.shape, dtype, seed=43 + i) for i, x in enumerate(xs)]
    result = torch._foreach_norm(xs, ord)
    cpp = cpp_formulas.foreach_norm_tangents(ts, xs, ord, result)
    py = F.foreach_norm_tangents(ts, xs, ord, result)
    assert len(cpp) == len(py) == 3
    for c, p in zip(cpp, py):
        assert_same(c, p)


def test_foreach_norm_tangents_dtype_and_empty(cpp_formulas):
    # _foreach_norm's dtype: float32 tensors normed in float64; an empty list.
    xs = [rand((3, 2), seed=50).float(), rand((5,), seed=51).float()]
    ts = [rand(x.shape, seed=52).float() for x in xs]
    result = torch._foreach_norm(xs, 2, dtype=torch.float64)
    cpp = cpp_formulas.foreach_norm_tangents(ts, xs, 2, result)
    py = F.foreach_norm_tangents(ts, xs, 2, result)
    for c, p in zip(cpp, py):
        assert c.dtype == torch.float64
        assert_same(c, p)
    assert cpp_formulas.foreach_norm_tangents([], [], 2, []) == []
