"""`dualgen.functional` against `torch.autograd.functional`, `torch.func` and finite
differences, in float64: values, return structures (tensor or tuple, by the
tuple-ness of inputs and outputs), differentiable results (create_graph=True
followed by backward) and errors (type and message) as torch's."""

from __future__ import annotations

import pytest
import torch
import torch.autograd.functional as TF
from devices import DEVICE
from functional_api_checks import (  # noqa: F401 - no_level_left_open: autouse
    C128,
    F64,
    W_CAPTURED,
    X3,
    as_tuples,
    assert_same,
    directions,
    errors_are_torchs,
    no_level_left_open,
    rand,
)

import dualgen.functional as AF

# --------------------------------------------------------------------------------------
# Functions: element-wise chains, matrix products, softmax and logsumexp


def chain(x):
    return x.sin().exp() * x.tanh() + x.pow(3)


def to_tuple(x):
    return x.cos() * x, x.sum()


def matmul(x, w):
    return (w @ x).sigmoid()


def softmax_pair(x, w):
    return (w * x).softmax(-1), (w @ x).logsumexp(0)


def one_tuple(x):
    return (x.exp(),)


JVP_CASES = {
    "tensor_to_tensor": (chain, lambda: rand(2, 3)),
    "tensor_to_tuple": (to_tuple, lambda: rand(3)),
    "tuple_to_tensor": (matmul, lambda: (rand(3, seed=1), rand(2, 3, seed=2))),
    "tuple_to_tuple": (softmax_pair, lambda: (rand(3, seed=1), rand(4, 3, seed=2))),
    "one_tuple": (one_tuple, lambda: (rand(2),)),
}


@pytest.mark.parametrize("case", JVP_CASES)
def test_jvp_matches_torch_functional_and_torch_func(case):
    fn, make = JVP_CASES[case]
    inputs = make()
    v = directions(inputs)
    ours = AF.jvp(fn, inputs, v)
    assert_same(ours, TF.jvp(fn, inputs, v))
    as_tuple = inputs if isinstance(inputs, tuple) else (inputs,)
    v_tuple = v if isinstance(v, tuple) else (v,)
    assert_same(ours, torch.func.jvp(fn, as_tuple, v_tuple))


def test_jvp_is_detached_without_create_graph():
    x = rand(3).requires_grad_()
    out, jv = AF.jvp(chain, x, rand(3, seed=1).requires_grad_())
    assert not out.requires_grad and not jv.requires_grad


def test_jvp_gives_zeros_for_an_output_without_tangent():
    x, v = rand(3), rand(3, seed=1)

    def fn(x):
        return x.exp(), torch.ones(2, dtype=F64)

    assert_same(AF.jvp(fn, x, v), TF.jvp(fn, x, v))


def test_jvp_gives_zeros_for_an_integer_output_where_torch_raises():
    """torch's double-backward trick needs every output to take a gradient."""
    x, v = rand(3), rand(3, seed=1)

    def fn(x):
        return x.exp(), x.argmax()

    with pytest.raises(RuntimeError, match="floating point and complex dtype"):
        TF.jvp(fn, x, v)
    assert_same(AF.jvp(fn, x, v), torch.func.jvp(fn, (x,), (v,)))


def test_jvp_with_create_graph_is_differentiable_in_inputs_and_v():
    def loss(api):
        x = rand(3, seed=1).requires_grad_()
        w = rand(2, 3, seed=2).requires_grad_()
        v = (rand(3, seed=3).requires_grad_(), rand(2, 3, seed=4).requires_grad_())
        out, jv = api.jvp(matmul, (x, w), v, create_graph=True)
        assert out.grad_fn is not None and jv.grad_fn is not None
        total = (jv * out).sum() + jv.pow(2).sum()
        return torch.autograd.grad(total, (x, w, *v))

    assert_same(loss(AF), loss(TF))


def test_jvp_v_may_be_none_for_a_one_element_input():
    for x in (torch.tensor(0.7, dtype=F64), rand(1, 1)):
        assert_same(AF.jvp(chain, x), TF.jvp(chain, x))


def test_jvp_of_complex_inputs_matches_torch():
    def fn(z, w):
        return z.sin() * w.conj(), (z * w).abs()

    z, w = rand(3, dtype=C128), rand(3, dtype=C128, seed=1)
    v = (rand(3, dtype=C128, seed=2), rand(3, dtype=C128, seed=3))
    ours = AF.jvp(fn, (z, w), v)
    assert_same(ours, TF.jvp(fn, (z, w), v))
    assert_same(ours, torch.func.jvp(fn, (z, w), v))


JVP_ERRORS = {
    "v_none_for_many_elements": {"func": chain, "inputs": X3},
    "v_of_other_size": {"func": chain, "inputs": X3, "v": rand(4)},
    "v_of_other_length": {"func": matmul, "inputs": (X3, rand(2, 3)), "v": (X3,)},
    "v_of_other_size_in_tuple": {
        "func": matmul,
        "inputs": (X3, rand(2, 3)),
        "v": (X3, rand(3, 2)),
    },
    "inputs_a_list": {"func": chain, "inputs": [X3], "v": X3},
    "v_not_a_tensor": {"func": chain, "inputs": X3, "v": (1.0,)},
    "output_a_list": {"func": lambda x: [x], "inputs": X3, "v": X3},
    "complex_v_none": {"func": torch.sin, "inputs": torch.tensor(1j, dtype=C128)},
    "strict_output_without_grad": {
        "func": lambda x: torch.ones(2, dtype=F64),
        "inputs": X3,
        "v": X3,
        "strict": True,
    },
    "strict_unused_input": {
        "func": lambda x, y: x.sin(),
        "inputs": (X3, X3),
        "v": (X3, X3),
        "strict": True,
    },
    "strict_output_without_tangent": {
        "func": lambda x: (x.sin(), W_CAPTURED * 2),
        "inputs": X3,
        "v": X3,
        "strict": True,
    },
    "strict_create_graph_linear": {
        "func": lambda x: 2 * x,
        "inputs": X3,
        "v": X3,
        "strict": True,
        "create_graph": True,
    },
}


test_jvp_errors_are_torchs = errors_are_torchs(JVP_ERRORS, "jvp")


def test_jvp_strict_computes_when_every_output_depends_on_every_input():
    inputs, v = (rand(3, seed=1), rand(4, 3, seed=2)), directions((X3, rand(4, 3)))
    ours = AF.jvp(softmax_pair, inputs, v, strict=True, create_graph=True)
    assert_same(ours, TF.jvp(softmax_pair, inputs, v, create_graph=True))


def module_loss():
    """A loss of an nn.Module's parameters through torch.func.functional_call."""
    module = torch.nn.Sequential(
        torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2)
    ).double()
    names = [name for name, _ in module.named_parameters()]
    params = tuple(p.detach() for p in module.parameters())
    data = rand(5, 3, seed=3)

    def loss(*values):
        out = torch.func.functional_call(module, dict(zip(names, values)), (data,))
        return out.softmax(-1)[:, 0].pow(2).mean()

    return loss, params


def test_jvp_and_hvp_of_module_parameters_through_functional_call():
    loss, params = module_loss()
    v = directions(params)
    assert_same(AF.jvp(loss, params, v), TF.jvp(loss, params, v))
    assert_same(AF.hvp(loss, params, v), TF.hvp(loss, params, v))


def test_vjp_is_torchs():
    inputs = (rand(3, seed=1), rand(4, 3, seed=2))
    u = (rand(4, 3, seed=3), rand((), seed=4))
    assert_same(AF.vjp(softmax_pair, inputs, u), TF.vjp(softmax_pair, inputs, u))


# --------------------------------------------------------------------------------------
# jacobian


JACOBIAN_CASES = [
    "tensor_to_tensor",
    "tensor_to_tuple",
    "tuple_to_tensor",
    "tuple_to_tuple",
]


@pytest.mark.parametrize("vectorize", [True, False])
@pytest.mark.parametrize("case", JACOBIAN_CASES)
def test_forward_mode_jacobian_matches_reverse_mode(case, vectorize):
    fn, make = JVP_CASES[case]
    inputs = make()
    ours = AF.jacobian(fn, inputs, vectorize=vectorize, strategy="forward-mode")
    assert_same(ours, TF.jacobian(fn, inputs))
    native = TF.jacobian(fn, inputs, vectorize=True, strategy="forward-mode")
    assert_same(ours, as_tuples(native))


def test_forward_mode_jacobian_column_by_column_where_torch_raises():
    fn, make = JVP_CASES["tuple_to_tuple"]
    with pytest.raises(NotImplementedError):
        TF.jacobian(fn, make(), strategy="forward-mode")
    ours = AF.jacobian(fn, make(), strategy="forward-mode")
    assert_same(ours, TF.jacobian(fn, make()))


def test_forward_mode_jacobian_of_outputs_independent_of_an_input():
    def fn(x, y):
        return x.exp(), torch.ones(2, dtype=F64), y.argmax()

    inputs = (rand(3), rand(2, seed=1))
    for vectorize in (True, False):
        ours = AF.jacobian(fn, inputs, vectorize=vectorize, strategy="forward-mode")
        native = TF.jacobian(fn, inputs, vectorize=True, strategy="forward-mode")
        assert_same(ours, as_tuples(native))


@pytest.mark.parametrize("vectorize", [True, False])
def test_forward_mode_jacobian_with_create_graph_is_differentiable(vectorize):
    def gradients(api, **options):
        x = rand(3, seed=1).requires_grad_()
        w = rand(2, 3, seed=2).requires_grad_()
        jx, jw = api.jacobian(matmul, (x, w), create_graph=True, **options)
        return torch.autograd.grad((jx.pow(2).sum() + jw.sin().sum()), (x, w))

    ours = gradients(AF, vectorize=vectorize, strategy="forward-mode")
    assert_same(ours, gradients(TF))


def test_jacobian_is_detached_without_create_graph():
    x = rand(3).requires_grad_()
    for vectorize in (True, False):
        jac = AF.jacobian(chain, x, vectorize=vectorize, strategy="forward-mode")
        assert not jac.requires_grad


JACOBIAN_ERRORS = {
    name: {"func": chain, "inputs": X3, **options}
    for name, options in {
        "strict_forward_vectorized": {
            "strict": True,
            "strategy": "forward-mode",
            "vectorize": True,
        },
        "strict_forward": {"strict": True, "strategy": "forward-mode"},
        "bad_strategy": {"strategy": "sideways"},
        "reverse": {"strict": True, "vectorize": True},
    }.items()
}
test_jacobian_errors_are_torchs = errors_are_torchs(JACOBIAN_ERRORS, "jacobian")


LU_FUNCTIONS = {
    "det": torch.linalg.det,
    "slogdet": lambda a: torch.linalg.slogdet(a)[1],
    "solve": lambda a: torch.linalg.solve(a, torch.arange(3.0, dtype=a.dtype) + 1),
    "lu_factor": lambda a: torch.linalg.lu_factor(a)[0],
    "lu": lambda a: torch.linalg.lu(a)[2],
}


@pytest.mark.parametrize("name", list(LU_FUNCTIONS))
def test_vectorized_forward_jacobian_through_lu_factorizations(backend, name):
    """The LU helpers slice whole dimensions (`t[..., :k]`), which torch turns into
    `alias`, a view legacy vmap has no rule for: dualgen gives it one, so the
    vectorized forward-mode jacobian of det, slogdet, solve and the LU ops runs
    (it raised) and equals reverse mode's."""
    f = LU_FUNCTIONS[name]
    a = torch.randn(
        3, 3, dtype=torch.float64, generator=torch.Generator(DEVICE).manual_seed(4)
    )
    expected = TF.jacobian(f, a)
    actual = AF.jacobian(f, a, vectorize=True, strategy="forward-mode")
    torch.testing.assert_close(actual, expected)
