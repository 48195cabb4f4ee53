"""`dualgen.func` against `torch.func` and finite differences, in float64: values,
pytree structures of inputs and outputs, has_aux, argnums, chunk_size, randomness,
nested transforms, nn.Module parameters through functional_call, torch.vmap over
the transforms, and errors (type and message) as torch.func's."""

from __future__ import annotations

import pytest
import torch
import torch.func as tfunc
from devices import DEVICE
from functional_api_checks import assert_same_error
from leaks import release_levels
from torch.utils._pytree import tree_flatten, tree_map

import dualgen.forward_ad as fwAD
import dualgen.func as dfunc

F64 = torch.float64
# torch.func.linearize's constant folding warns about its own graph.
pytestmark = pytest.mark.filterwarnings(
    "ignore:Attempted to insert a get_attr Node:UserWarning"
)


@pytest.fixture(autouse=True)
def no_level_left_behind():
    """Every call leaves no dual level open and no mode pushed, errors included."""
    yield
    assert not release_levels()


def rand(*shape, seed=0):
    gen = torch.Generator(DEVICE).manual_seed(seed)
    return torch.randn(*shape, dtype=F64, generator=gen)


def assert_same_tree(ours, theirs):
    """The same pytree structure, shapes, dtypes and values."""
    ours_flat, ours_spec = tree_flatten(ours)
    theirs_flat, theirs_spec = tree_flatten(theirs)
    assert ours_spec == theirs_spec
    for a, b in zip(ours_flat, theirs_flat):
        assert a.shape == b.shape and a.dtype == b.dtype, (a, b)
        torch.testing.assert_close(a, b)


def finite_difference_jvp(f, primals, tangents, eps=1e-6):
    """(f(p + eps t) - f(p - eps t)) / 2 eps, leaf by leaf of f's output."""

    def shifted(sign):
        return f(*tree_map(lambda p, t: p + sign * eps * t, primals, tangents))

    return tree_map(lambda a, b: (a - b) / (2 * eps), shifted(1), shifted(-1))


# --------------------------------------------------------------------------------------
# jvp


def chain(x):
    return (x.sin() * x.exp()).tanh().sqrt().log1p() + x.pow(3)


def matmuls(x):
    w = torch.arange(12, dtype=x.dtype).view(4, 3) / 7
    return (x.view(2, 4) @ w).relu() @ w.t() @ x.view(4, 2)


def softmax_logsumexp(x):
    return x.view(2, 4).softmax(-1) * x.view(2, 4).logsumexp(-1, keepdim=True)


FUNCTIONS = [chain, matmuls, softmax_logsumexp]


@pytest.mark.parametrize("f", FUNCTIONS)
def test_jvp_matches_torch_func_and_finite_differences(f):
    x, v = rand(8).abs(), rand(8, seed=1)
    ours = dfunc.jvp(f, (x,), (v,))
    assert_same_tree(ours, tfunc.jvp(f, (x,), (v,)))
    torch.testing.assert_close(ours[1], finite_difference_jvp(f, (x,), (v,)))


def dict_and_tuple(x, params):
    out = x.sin() * params["w"] + params["b"].exp().sum()
    return {"out": out, "pair": (out.cumsum(0), params["w"] @ x)}


def test_jvp_with_tuple_and_dict_inputs_and_outputs():
    params = {"w": rand(3, seed=1), "b": rand(2, seed=2)}
    primals = (rand(3), params)
    tangents = (rand(3, seed=3), {"w": rand(3, seed=4), "b": rand(2, seed=5)})
    ours = dfunc.jvp(dict_and_tuple, primals, tangents)
    assert_same_tree(ours, tfunc.jvp(dict_and_tuple, primals, tangents))
    expected = finite_difference_jvp(dict_and_tuple, primals, tangents)
    assert_same_tree(ours[1], expected)


def test_jvp_has_aux():
    def f(x):
        return x.sin(), {"cos": x.cos()}

    x, v = rand(3), rand(3, seed=1)
    ours = dfunc.jvp(f, (x,), (v,), has_aux=True)
    assert len(ours) == 3
    assert_same_tree(ours, tfunc.jvp(f, (x,), (v,), has_aux=True))


def test_an_output_independent_of_the_inputs_gets_zeros_or_strict_raises():
    def f(x):
        return x * 2, torch.ones(2, dtype=F64)

    x, v = rand(3), rand(3, seed=1)
    ours = dfunc.jvp(f, (x,), (v,))
    assert_same_tree(ours, tfunc.jvp(f, (x,), (v,)))
    assert torch.equal(ours[1][1], torch.zeros(2, dtype=F64))
    assert_same_error(
        lambda: dfunc.jvp(f, (x,), (v,), strict=True),
        lambda: tfunc.jvp(f, (x,), (v,), strict=True),
    )
    assert_same_tree(
        dfunc.jvp(torch.sin, (x,), (v,), strict=True),
        tfunc.jvp(torch.sin, (x,), (v,), strict=True),
    )


X, V = rand(3), rand(3, seed=1)
JVP_MISTAKES = {
    "primals a list": (torch.sin, [X], [V], {}),
    "other structures": (torch.sin, (X,), [V], {}),
    "a primal no tensor": (torch.sin, (1.0,), (1.0,), {}),
    "no primals": (torch.sin, (), (), {}),
    "a tangent no tensor": (torch.sin, (X,), (1.0,), {}),
    "another shape": (torch.sin, (X,), (rand(4),), {}),
    "an integer tangent": (torch.sin, (X,), (torch.ones(3, dtype=torch.long),), {}),
    "returns None": (lambda x: None, (X,), (V,), {}),
    "returns an int": (lambda x: 3, (X,), (V,), {}),
    "returns a tensor and a string": (lambda x: (x, "s"), (X,), (V,), {}),
    "has_aux without a pair": (torch.sin, (X,), (V,), {"has_aux": True}),
    "aux not tensors": (lambda x: (x, {"n": 3}), (X,), (V,), {"has_aux": True}),
}


@pytest.mark.parametrize("case", JVP_MISTAKES)
def test_jvp_errors_are_torch_funcs(case):
    f, primals, tangents, kwargs = JVP_MISTAKES[case]
    assert_same_error(
        lambda: dfunc.jvp(f, primals, tangents, **kwargs),
        lambda: tfunc.jvp(f, primals, tangents, **kwargs),
    )


def test_jvp_inside_jvp_is_forward_over_forward():
    x, u, v = rand(8), rand(8, seed=1), rand(8, seed=2)

    def first(jvp):
        return lambda p: jvp(softmax_logsumexp, (p,), (u,))[1]

    ours = dfunc.jvp(first(dfunc.jvp), (x,), (v,))
    assert_same_tree(ours, tfunc.jvp(first(tfunc.jvp), (x,), (v,)))


# --------------------------------------------------------------------------------------
# jacfwd


@pytest.mark.parametrize("f", FUNCTIONS)
@pytest.mark.parametrize("chunk_size", [None, 1, 3])
def test_jacfwd_matches_torch_func(f, chunk_size):
    x = rand(8).abs()
    ours = dfunc.jacfwd(f, chunk_size=chunk_size)(x)
    assert_same_tree(ours, tfunc.jacfwd(f)(x))


ACTIVATIONS = {
    "gelu": torch.nn.functional.gelu,
    "gelu_tanh": lambda x: torch.nn.functional.gelu(x, approximate="tanh"),
    "silu": torch.nn.functional.silu,
    "mish": torch.nn.functional.mish,
    "elu": torch.nn.functional.elu,
    "hardswish": torch.nn.functional.hardswish,
    "softplus": torch.nn.functional.softplus,
    "leaky_relu": lambda x: torch.nn.functional.leaky_relu(x, 0.1),
    "logsigmoid": torch.nn.functional.logsigmoid,
}


@pytest.mark.parametrize("dtype", [torch.float32, F64], ids=str)
@pytest.mark.parametrize("f", ACTIVATIONS.values(), ids=list(ACTIVATIONS))
def test_jacfwd_through_activations_in_each_precision(f, dtype):
    """The activations' tangent kernels on tangents batched over the columns, in
    float32 too, where some CPU kernels take other paths (gelu_backward through
    oneDNN, which raised on the batch broadcast against the primal)."""
    x = rand(3, 5).to(dtype)
    assert_same_tree(dfunc.jacfwd(f)(x), tfunc.jacfwd(f)(x))


def test_jacfwd_argnums_tuple_with_dict_inputs_and_outputs():
    params = {"w": rand(3, seed=1), "b": rand(2, seed=2)}
    for argnums in [0, 1, (0, 1), (1, 0), -1]:
        ours = dfunc.jacfwd(dict_and_tuple, argnums=argnums)(rand(3), params)
        theirs = tfunc.jacfwd(dict_and_tuple, argnums=argnums)(rand(3), params)
        assert_same_tree(ours, theirs)


def test_chunk_sizes_give_equal_jacobians():
    params = {"w": rand(3, seed=1), "b": rand(2, seed=2)}
    whole = dfunc.jacfwd(dict_and_tuple, argnums=(0, 1))(rand(3), params)
    for chunk_size in [1, 2, 4, 100]:
        jac = dfunc.jacfwd(dict_and_tuple, argnums=(0, 1), chunk_size=chunk_size)
        assert_same_tree(jac(rand(3), params), whole)


def test_jacfwd_has_aux_scalars_and_independent_outputs():
    def f(x, y):
        return (x.exp().sum(), y * 2, torch.ones(2, dtype=F64)), {"aux": x.cos()}

    for chunk_size in [None, 1]:
        jac = dfunc.jacfwd(f, argnums=(0, 1), has_aux=True, chunk_size=chunk_size)
        ours = jac(rand(3), torch.tensor(2.0, dtype=F64))
        theirs = tfunc.jacfwd(f, argnums=(0, 1), has_aux=True)(
            rand(3), torch.tensor(2.0, dtype=F64)
        )
        assert_same_tree(ours, theirs)


def test_jacfwd_of_an_empty_input():
    x = torch.ones(0, 2, dtype=F64)
    assert_same_tree(dfunc.jacfwd(torch.sin)(x), tfunc.jacfwd(torch.sin)(x))


JACFWD_MISTAKES = {
    "argnum out of range": (lambda x: x, {"argnums": 3}, (X,)),
    "argnums repeated": (lambda x, y: x * y, {"argnums": (0, 0)}, (X, X)),
    "argnums empty": (lambda x, y: x * y, {"argnums": ()}, (X, X)),
    "argnums a list": (lambda x, y: x * y, {"argnums": [0]}, (X, X)),
    "a complex input": (lambda x: x * 2, {}, (X.to(torch.complex128),)),
    "a complex output": (lambda x: x * 1j, {}, (X,)),
    "returns an int": (lambda x: 3, {}, (X,)),
    "an integer input": (lambda x: x * 2.0, {}, (torch.ones(3, dtype=torch.long),)),
    "a float input": (lambda x: x * 2.0, {}, (2.0,)),
    "randomness unknown": (torch.sin, {"randomness": "sometimes"}, (X,)),
    "a random op": (lambda x: x * torch.rand(3, dtype=F64), {}, (X,)),
    "dropout": (lambda x: torch.nn.functional.dropout(x, 0.5), {}, (X,)),
}


@pytest.mark.parametrize("case", JACFWD_MISTAKES)
def test_jacfwd_errors_are_torch_funcs(case):
    f, kwargs, args = JACFWD_MISTAKES[case]
    assert_same_error(
        lambda: dfunc.jacfwd(f, **kwargs)(*args),
        lambda: tfunc.jacfwd(f, **kwargs)(*args),
    )


def test_chunk_size_must_be_positive():
    with pytest.raises(ValueError, match="jacfwd: `chunk_size` should be greater"):
        dfunc.jacfwd(torch.sin, chunk_size=0)


def random_scale(x):
    return x * torch.rand(4, dtype=F64)


@pytest.mark.parametrize("chunk_size", [None, 1, 3])
def test_randomness_same_draws_once_for_every_column(chunk_size):
    x = rand(4)
    torch.manual_seed(1)
    ours = dfunc.jacfwd(random_scale, randomness="same", chunk_size=chunk_size)(x)
    after = torch.rand(1)
    torch.manual_seed(1)
    theirs = tfunc.jacfwd(random_scale, randomness="same")(x)
    assert_same_tree((ours, after), (theirs, torch.rand(1)))
    torch.manual_seed(1)
    torch.testing.assert_close(ours, torch.diag(torch.rand(4, dtype=F64)))


def test_randomness_different_draws_anew_for_each_column():
    x = rand(4)
    torch.manual_seed(1)
    jac = dfunc.jacfwd(random_scale, randomness="different")(x)
    torch.manual_seed(1)
    draws = torch.stack([torch.rand(4, dtype=F64) for _ in range(4)])
    torch.testing.assert_close(jac, torch.diag(draws.diagonal()))


def test_randomness_error_puts_the_generator_back():
    torch.manual_seed(1)
    expected = torch.rand(2)
    torch.manual_seed(1)
    with pytest.raises(RuntimeError, match="vmap: called random operation"):
        dfunc.jacfwd(random_scale)(rand(4))
    torch.testing.assert_close(torch.rand(2), expected)


# --------------------------------------------------------------------------------------
# nested transforms, hessian


def quartic(x):
    return (x.sin() * x.roll(1)).sum() * x.tanh().sum() + x.pow(4).sum()


def test_jacfwd_of_jacfwd():
    def f(x):
        return x.sin() * x.exp().sum()

    x = rand(4)
    assert_same_tree(dfunc.jacfwd(dfunc.jacfwd(f))(x), tfunc.jacfwd(tfunc.jacfwd(f))(x))
    twice = dfunc.jacfwd(dfunc.jacfwd(f, chunk_size=1), chunk_size=2)(x)
    assert_same_tree(twice, tfunc.jacfwd(tfunc.jacfwd(f))(x))


@pytest.mark.parametrize("f", [quartic, lambda x: softmax_logsumexp(x).sum()])
def test_hessian_matches_torch_func_and_finite_differences(f):
    x = rand(8)
    ours = dfunc.hessian(f)(x)
    assert_same_tree(ours, tfunc.hessian(f)(x))
    assert not ours.requires_grad  # as torch.func's, for inputs not requiring grad
    gradient = tfunc.grad(f)
    for column in range(3):
        e = torch.zeros(8, dtype=F64)
        e[column] = 1
        expected = finite_difference_jvp(gradient, (x,), (e,))
        torch.testing.assert_close(ours[:, column], expected, atol=1e-6, rtol=1e-6)


def test_hessian_argnums_tuple_and_a_vector_output():
    def f(x, y):
        return (x.sin() * y.exp()).cumsum(0), (x * y).sum()

    x, y = rand(3), rand(3, seed=1)
    for argnums in [0, (0, 1)]:
        ours = dfunc.hessian(f, argnums=argnums)(x, y)
        assert_same_tree(ours, tfunc.hessian(f, argnums=argnums)(x, y))


def test_hessian_of_a_function_calling_jvp():
    v = rand(4, seed=1)

    def via(jvp):
        return lambda x: jvp(lambda z: z.sin() * z.sum(), (x,), (v,))[1].sum()

    x = rand(4)
    assert_same_tree(dfunc.hessian(via(dfunc.jvp))(x), tfunc.hessian(via(tfunc.jvp))(x))


def test_jacfwd_of_hessian_is_the_third_derivative():
    def f(x):
        return x.sin().prod()

    x = rand(4)
    assert_same_tree(
        dfunc.jacfwd(dfunc.hessian(f))(x), tfunc.jacfwd(tfunc.hessian(f))(x)
    )


def test_hessian_is_differentiable_when_the_input_requires_grad():
    x = rand(4).requires_grad_()
    hess = dfunc.hessian(quartic)(x)
    assert hess.requires_grad
    (ours,) = torch.autograd.grad(hess.pow(2).sum(), x)
    theirs = tfunc.grad(lambda p: tfunc.hessian(quartic)(p).pow(2).sum())(x.detach())
    torch.testing.assert_close(ours, theirs)


def test_a_transform_calling_forward_ad_itself_is_redone_column_by_column():
    """f makes its own duals: under jacfwd's batched tangents that needs an alias
    the legacy vmap cannot batch, so jacfwd computes those columns one by one."""
    v = rand(4, seed=1)

    def own_jvp(x):
        with fwAD.dual_level():
            return fwAD.unpack_dual((fwAD.make_dual(x, v).sin() * x).exp()).tangent

    def torch_jvp(x):
        return tfunc.jvp(lambda z: (z.sin() * x).exp(), (x,), (v,))[1]

    x = rand(4)
    assert_same_tree(dfunc.jacfwd(own_jvp)(x), tfunc.jacfwd(torch_jvp)(x))


# --------------------------------------------------------------------------------------
# nn.Module parameters through functional_call


@pytest.fixture
def mlp():
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2)
    ).double()
    return model, {name: p.detach() for name, p in model.named_parameters()}


def test_module_parameters_jvp_and_jacobian(mlp):
    model, params = mlp
    x = rand(5, 3)
    tangents = {
        name: rand(*p.shape, seed=i) for i, (name, p) in enumerate(params.items())
    }

    def f(p):
        return tfunc.functional_call(model, p, (x,))

    assert_same_tree(
        dfunc.jvp(f, (params,), (tangents,)), tfunc.jvp(f, (params,), (tangents,))
    )
    assert_same_tree(dfunc.jacfwd(f)(params), tfunc.jacrev(f)(params))


def test_module_parameters_hessian_and_hvp(mlp):
    model, params = mlp
    x = rand(5, 3)
    tangents = {
        name: rand(*p.shape, seed=i) for i, (name, p) in enumerate(params.items())
    }

    def loss(p, x):
        return tfunc.functional_call(model, p, (x,)).pow(2).mean()

    assert_same_tree(dfunc.hessian(loss)(params, x), tfunc.hessian(loss)(params, x))
    primals, vectors = (params, x), (tangents, rand(5, 3, seed=9))
    assert_same_tree(
        dfunc.hvp(loss, primals, vectors),
        tfunc.jvp(tfunc.grad(loss), primals, vectors),
    )


# --------------------------------------------------------------------------------------
# linearize, hvp


def test_linearize_reused_with_several_tangents():
    def f(x, params):
        return {"y": chain(x) * params["w"].sum(), "z": x @ params["w"]}

    primals = (rand(3).abs(), {"w": rand(3, seed=1)})
    output, jvp_fn = dfunc.linearize(f, *primals)
    their_output, their_jvp_fn = tfunc.linearize(f, *primals)
    assert_same_tree(output, their_output)
    for seed in range(3):
        tangents = (rand(3, seed=seed), {"w": rand(3, seed=seed + 10)})
        if seed == 2:  # the same tangents again give the same JVP
            tangents = (rand(3, seed=0), {"w": rand(3, seed=10)})
        assert_same_tree(jvp_fn(*tangents), their_jvp_fn(*tangents))


LINEARIZE_MISTAKES = {
    "two tangents for one primal": (X, X),
    "another shape": (rand(4),),
    "another dtype": (X.float(),),
}


@pytest.mark.parametrize("case", LINEARIZE_MISTAKES)
def test_linearize_errors_are_torch_funcs(case):
    tangents = LINEARIZE_MISTAKES[case]
    _, jvp_fn = dfunc.linearize(torch.sin, X)
    _, their_jvp_fn = tfunc.linearize(torch.sin, X)
    assert_same_error(lambda: jvp_fn(*tangents), lambda: their_jvp_fn(*tangents))


@pytest.mark.parametrize("argnums", [0, 1, (0, 1)])
def test_hvp_is_jvp_of_grad(argnums):
    def f(x, y):
        return quartic(x * y) + (x.exp() * y).sum()

    primals, tangents = (rand(4), rand(4, seed=1)), (rand(4, seed=2), rand(4, seed=3))
    ours = dfunc.hvp(f, primals, tangents, argnums=argnums)
    theirs = tfunc.jvp(tfunc.grad(f, argnums=argnums), primals, tangents)
    assert_same_tree(ours, theirs)


def test_hvp_against_finite_differences_of_the_gradient():
    x, v = rand(5), rand(5, seed=1)
    gradient, hvp = dfunc.hvp(quartic, (x,), (v,))
    torch.testing.assert_close(gradient, tfunc.grad(quartic)(x))
    expected = finite_difference_jvp(tfunc.grad(quartic), (x,), (v,))
    torch.testing.assert_close(hvp, expected, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("f", [lambda x: x.sin(), lambda x: 3, lambda x: (x.sum(),)])
def test_hvp_errors_are_torch_funcs(f):
    assert_same_error(
        lambda: dfunc.hvp(f, (X,), (V,)),
        lambda: tfunc.jvp(tfunc.grad(f), (X,), (V,)),
    )


# --------------------------------------------------------------------------------------
# torch.vmap and torch.func.grad around dualgen.func


@pytest.mark.parametrize("in_dims", [(0, 0), (None, 0), (0, None)])
def test_vmap_over_jvp(in_dims):
    x = rand(3, 8) if in_dims[0] == 0 else rand(8)
    v = rand(3, 8, seed=1) if in_dims[1] == 0 else rand(8, seed=1)

    def batched(jvp):
        return tfunc.vmap(lambda x, v: jvp(softmax_logsumexp, (x,), (v,)), in_dims)

    assert_same_tree(batched(dfunc.jvp)(x, v), batched(tfunc.jvp)(x, v))


def test_nested_vmap_over_jvp_with_a_batched_closure():
    xs, vs, ws = rand(2, 3, 4), rand(3, 4, seed=1), rand(3, 4, seed=2)

    def batched(jvp):
        def one(x, v, w):
            return jvp(lambda z: chain(z.abs()) * w, (x,), (v,))

        return tfunc.vmap(tfunc.vmap(one), in_dims=(0, None, None))

    assert_same_tree(batched(dfunc.jvp)(xs, vs, ws), batched(tfunc.jvp)(xs, vs, ws))


def test_vmap_over_jacfwd():
    xs = rand(3, 8).abs()
    assert_same_tree(
        tfunc.vmap(dfunc.jacfwd(chain))(xs), tfunc.vmap(tfunc.jacfwd(chain))(xs)
    )


def test_grad_of_jvp_raises_and_autograd_grad_does_it():
    v = rand(4, seed=1)

    def f(jvp):
        return lambda x: jvp(chain, (x,), (v,))[1].sum()

    x = rand(4).abs()
    with pytest.raises(RuntimeError, match="with torch.autograd.grad instead"):
        tfunc.grad(f(dfunc.jvp))(x)
    leaf = x.clone().requires_grad_()
    (ours,) = torch.autograd.grad(f(dfunc.jvp)(leaf), leaf)
    torch.testing.assert_close(ours, tfunc.grad(f(tfunc.jvp))(x))


@pytest.mark.parametrize(
    "transform",
    [
        lambda: tfunc.vmap(lambda v: dfunc.hvp(quartic, (X,), (v,)))(rand(2, 3)),
        lambda: tfunc.vmap(dfunc.hessian(quartic))(rand(2, 3)),
    ],
)
def test_vmap_over_the_reverse_half_raises(transform):
    with pytest.raises(RuntimeError, match="cannot run under torch.vmap"):
        transform()
