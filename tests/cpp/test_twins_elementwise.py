"""The C++ twins of dualgen.formulas.elementwise against their Python helpers."""

from __future__ import annotations

import pytest
import torch
import twin_checks
from devices import DEVICE
from twin_checks import same, same_error

from dualgen import formulas as py

REAL = [torch.float64, torch.float32]
ALL = [torch.float64, torch.complex128]


def rand(*shape, dtype=torch.float64, seed=0):
    g = torch.Generator(DEVICE).manual_seed(seed)
    return torch.randn(*shape, dtype=dtype, generator=g)


def check(cpp, ref):
    """What `same` checks, NaN matching NaN (0 * inf and friends)."""
    same(cpp, ref, equal_nan=True)


def both(cpp_formulas, name, *args):
    return twin_checks.both(cpp_formulas, name, *args, equal_nan=True)


# --- general helpers --------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("factor", [1, 1.0, True, 1 + 0j, 2, -0.5, 0, 2.5 - 1j])
def test_scale_scalar(cpp_formulas, dtype, factor):
    t = rand(3, 4, dtype=dtype)
    if isinstance(factor, complex) and not dtype.is_complex and factor != 1:
        factor = factor.real
    cpp, ref = both(cpp_formulas, "scale", t, factor)
    # A factor of 1 skips the multiplication: the tangent itself comes back.
    assert (cpp is t) == (ref is t)


@pytest.mark.parametrize("dtype", ALL)
def test_scale_tensor_factor(cpp_formulas, dtype):
    t = rand(3, 4, dtype=dtype)
    for factor in (torch.tensor(1.0), rand(4, dtype=dtype, seed=1)):
        cpp, _ = both(cpp_formulas, "scale", t, factor)
        assert cpp is not t


def test_scale_absent_tangent(cpp_formulas):
    assert cpp_formulas.scale(None, 1) is None and py.scale(None, 1) is None


@pytest.mark.parametrize("dtype", ALL)
def test_copy_broadcast(cpp_formulas, dtype):
    like = rand(2, 3, 4)
    for t in (
        rand(2, 3, 4, dtype=dtype),
        rand(3, 1, dtype=dtype),
        rand(4, dtype=dtype),
    ):
        cpp, ref = both(cpp_formulas, "copy_broadcast", t, like)
        assert cpp.data_ptr() != t.data_ptr()
        assert cpp.stride() == ref.stride()


@pytest.mark.parametrize("t_dtype", ALL)
@pytest.mark.parametrize("r_dtype", ALL)
def test_conform(cpp_formulas, t_dtype, r_dtype):
    result = rand(2, 3, 4, dtype=r_dtype, seed=1)
    for t in (
        rand(2, 3, 4, dtype=t_dtype),
        rand(3, 1, dtype=t_dtype),
        rand(4, dtype=t_dtype),
    ):
        cpp, ref = both(cpp_formulas, "conform", t, result)
        assert cpp.stride() == ref.stride()


def test_conform_layout_and_dtype(cpp_formulas):
    result = rand(4, 3).mT  # non-contiguous primal: the tangent takes its layout
    t = rand(3, 1, dtype=torch.float32)
    cpp, ref = both(cpp_formulas, "conform", t, result)
    assert cpp.stride() == ref.stride() and cpp.dtype == torch.float32
    same = rand(3, 4)
    assert cpp_formulas.conform(same, rand(3, 4)) is same


def test_conform_absent(cpp_formulas):
    t, r = rand(3), rand(3)
    both(cpp_formulas, "conform", None, r)
    both(cpp_formulas, "conform", t, None)
    both(cpp_formulas, "conform", None, None)


@pytest.mark.parametrize("dtype", ALL)
def test_fill_absent(cpp_formulas, dtype):
    primals = [
        rand(2, dtype=dtype),
        rand(3, 2, dtype=dtype, seed=1),
        rand(1, dtype=dtype),
    ]
    t1 = rand(3, 2, dtype=dtype, seed=2)
    cases = [
        [None, t1, None],
        [rand(2, dtype=dtype), t1, rand(1, dtype=dtype)],
        [None, None, None],
        None,
    ]
    for tangents in cases:
        both(cpp_formulas, "fill_absent", tangents, primals)
        check(
            cpp_formulas.fill_absent_1(tangents, primals),
            py.fill_absent(tangents, primals),
        )
        if tangents is not None:
            kept = cpp_formulas.fill_absent(tangents, primals)[1]
            assert kept is t1 or tangents[1] is None


def test_fill_absent_optional_primals(cpp_formulas):
    primals = [rand(2), None, rand(3)]
    for tangents in ([None, None, rand(3)], [None, rand(4), None], None):
        both(cpp_formulas, "fill_absent", tangents, primals)
    both(cpp_formulas, "fill_absent", [], [])
    both(cpp_formulas, "fill_absent", None, [])


# --- element-wise derivatives -----------------------------------------------


def with_ties(*shape, seed=0, dtype=torch.float64):
    return torch.randint(
        -2, 3, shape, generator=torch.Generator(DEVICE).manual_seed(seed)
    ).to(dtype)


@pytest.mark.parametrize("dtype", REAL)
def test_winner_weight(cpp_formulas, dtype):
    a, b = with_ties(3, 4, dtype=dtype), with_ties(3, 4, seed=1, dtype=dtype)
    cpp, _ = both(cpp_formulas, "winner_weight", a, b)
    assert (cpp == 0.5).any() and (cpp == 1).any() and (cpp == 0).any()
    both(cpp_formulas, "winner_weight", b, a)
    both(cpp_formulas, "winner_weight", a, with_ties(4, seed=2, dtype=torch.float32))
    both(cpp_formulas, "winner_weight", with_ties(4, seed=3, dtype=torch.float32), a)


def positive(*shape, dtype=torch.float64, seed=0):
    return rand(*shape, dtype=dtype, seed=seed).abs() + 0.5


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("exponent", [2, 3.5, 0, 0.0, 1, -1, -0.5, True, False])
def test_pow_self_derivative_scalar(cpp_formulas, dtype, exponent):
    both(cpp_formulas, "pow_self_derivative", positive(3, 4, dtype=dtype), exponent)


def test_pow_self_derivative_complex_scalar(cpp_formulas):
    both(
        cpp_formulas,
        "pow_self_derivative",
        positive(5, dtype=torch.complex128),
        1.5 + 0.5j,
    )
    both(cpp_formulas, "pow_self_derivative", positive(5, dtype=torch.complex128), 0j)


@pytest.mark.parametrize("dtype", ALL)
def test_pow_self_derivative_tensor(cpp_formulas, dtype):
    self = positive(3, 4, dtype=dtype)
    exponent = rand(3, 4, dtype=dtype, seed=1)
    exponent[0, :2] = 0
    cpp, _ = both(cpp_formulas, "pow_self_derivative", self, exponent)
    assert (cpp[0, :2] == 0).all()
    both(cpp_formulas, "pow_self_derivative", self, rand(4, dtype=dtype, seed=2))
    both(cpp_formulas, "pow_self_derivative", self[0], exponent)


@pytest.mark.parametrize("dtype", ALL)
def test_pow_exponent_derivative_tensor(cpp_formulas, dtype):
    self = positive(3, 4, dtype=dtype)
    self[0, :3] = 0
    exponent = rand(3, 4, dtype=dtype, seed=1)
    result = self.pow(exponent)
    cpp, _ = both(cpp_formulas, "pow_exponent_derivative", self, exponent, result)
    assert cpp.isnan().any() == (~torch.isfinite(cpp)).any()
    exponent_row = rand(4, dtype=dtype, seed=2)
    both(
        cpp_formulas,
        "pow_exponent_derivative",
        self,
        exponent_row,
        self.pow(exponent_row),
    )


@pytest.mark.parametrize(
    "dtype,base",
    [(d, b) for d in ALL for b in (2, 0.5, 0, 0.0, -1.5)]
    + [(torch.complex128, 3 + 1j)],
)
def test_pow_exponent_derivative_scalar(cpp_formulas, dtype, base):
    exponent = rand(3, 4, dtype=dtype, seed=1)
    exponent[0, 0] = 0
    result = torch.pow(base, exponent)
    both(cpp_formulas, "pow_exponent_derivative", base, exponent, result)


@pytest.mark.parametrize("dtype", REAL)
@pytest.mark.parametrize(
    "bounds",
    [(-0.5, 0.5), (None, 0.3), (-0.2, None), (None, None), (0, 1), (1, -1), (0.5, 0.5)],
)
def test_clamp_mask(cpp_formulas, dtype, bounds):
    self = rand(4, 5, dtype=dtype)
    self[0, 0], self[0, 1] = 0.5, -0.5
    cpp, _ = both(cpp_formulas, "clamp_mask", self, *bounds)
    assert cpp.dtype == torch.bool


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("t_dtype", ALL)
def test_finite_parts(cpp_formulas, dtype, t_dtype):
    self = rand(6, dtype=dtype)
    if dtype.is_complex:
        self[0] = complex(float("nan"), 1.0)
        self[1] = complex(2.0, float("inf"))
        self[2] = complex(float("-inf"), float("nan"))
    else:
        self[0], self[1], self[2] = float("nan"), float("inf"), float("-inf")
    t = rand(6, dtype=t_dtype, seed=1)
    cpp, _ = both(cpp_formulas, "finite_parts", t, self)
    assert (cpp[2] == 0).all()


@pytest.mark.parametrize("dtype", REAL)
@pytest.mark.parametrize("p", [1, 2, 5])
def test_mvlgamma_derivative(cpp_formulas, dtype, p):
    self = positive(3, 4, dtype=dtype) + (p - 1) / 2
    both(cpp_formulas, "mvlgamma_derivative", self, p)
    both(cpp_formulas, "mvlgamma_derivative", self[0, 0], p)


@pytest.mark.parametrize("dtype", REAL)
@pytest.mark.parametrize("eps", [None, 0.1, 0.0, 0.6])
def test_logit_derivative(cpp_formulas, dtype, eps):
    self = torch.linspace(-0.5, 1.5, 21, dtype=dtype)
    cpp, _ = both(cpp_formulas, "logit_derivative", self, eps)
    if eps is None:
        assert cpp.isnan().any()


@pytest.mark.parametrize("dtype", ALL)
def test_angle_tangent(cpp_formulas, dtype):
    self_p = rand(3, 4, dtype=dtype)
    self_p[0, 0] = 0
    self_t = rand(3, 4, dtype=dtype, seed=1)
    cpp, _ = both(cpp_formulas, "angle_tangent", self_t, self_p)
    assert cpp.dtype == (torch.float64 if dtype.is_complex else dtype)
    if dtype.is_complex:
        assert cpp[0, 0] == 0 and (cpp[1:] != 0).all()


def test_angle_tangent_real_tangent(cpp_formulas):
    # A real tangent of a complex primal (conj(z) * t is complex: no error).
    self_p = rand(3, dtype=torch.complex128)
    self_p[1] = 0
    both(cpp_formulas, "angle_tangent", rand(3), self_p)


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("mode", [None, "trunc", "floor"])
def test_unless_rounded(cpp_formulas, dtype, mode):
    t = rand(3, 4, dtype=dtype)
    cpp, ref = both(cpp_formulas, "unless_rounded", t, mode)
    assert (cpp is t) == (ref is t) == (mode is None)


@pytest.mark.parametrize("which", ["self", "min", "max"])
@pytest.mark.parametrize(
    "present", [(True, True), (True, False), (False, True), (False, False)]
)
def test_clamp_tensor_weight(cpp_formulas, which, present):
    self_p = with_ties(4, 5)
    min_p = with_ties(4, 5, seed=1) if present[0] else None
    max_p = with_ties(5, seed=2) if present[1] else None
    args = (self_p, min_p, max_p, which)
    try:
        ref = py.clamp_tensor_weight(*args)
    except KeyError as error:
        with pytest.raises(RuntimeError, match=str(error)):
            cpp_formulas.clamp_tensor_weight(*args)
        return
    check(cpp_formulas.clamp_tensor_weight(*args), ref)


def test_clamp_tensor_weight_partition(cpp_formulas):
    # Exactly one input wins at each element when both bounds are given.
    self_p, min_p, max_p = with_ties(30), with_ties(30, seed=1), with_ties(30, seed=2)
    masks = [
        cpp_formulas.clamp_tensor_weight(self_p, min_p, max_p, w)
        for w in ("self", "min", "max")
    ]
    assert (sum(m.int() for m in masks) == 1).all()


def test_clamp_tensor_weight_unknown(cpp_formulas):
    # No input is named "mid": no mask takes it, in both languages.
    _, ref = both(cpp_formulas, "clamp_tensor_weight", rand(3), None, None, "mid")
    assert not ref.any()


@pytest.mark.parametrize("dtype", ALL)
def test_sgn_derivative(cpp_formulas, dtype):
    self = rand(3, 4, dtype=dtype)
    self[0, 0] = 0
    v = rand(3, 4, dtype=dtype, seed=1)
    cpp, _ = both(cpp_formulas, "sgn_derivative", v, self, self.sgn())
    if dtype.is_complex:
        assert cpp[0, 0] == 0 and (cpp[1:] != 0).all()
    both(cpp_formulas, "sgn_derivative", rand(4, dtype=dtype, seed=2), self, self.sgn())


C = torch.complex128
ERRORS = [
    ("clamp_mask", lambda: (rand(3, dtype=C), 0, 1)),
    ("logit_derivative", lambda: (rand(3, dtype=C), None)),
    ("logit_derivative", lambda: (rand(3, dtype=C), 0.1)),
    ("mvlgamma_derivative", lambda: (rand(3), -1)),
    ("winner_weight", lambda: (rand(3, dtype=C), rand(3, dtype=C))),
    ("copy_broadcast", lambda: (rand(3), rand(2))),
    ("conform", lambda: (rand(4), rand(3))),
    ("sgn_derivative", lambda: (rand(3, dtype=C), rand(2, dtype=C), rand(2, dtype=C))),
    ("finite_parts", lambda: (rand(3), rand(2))),
    ("pow_self_derivative", lambda: (rand(3), rand(2))),
    ("pow_exponent_derivative", lambda: (rand(3).abs(), rand(2), rand(3))),
]


@pytest.mark.parametrize("name,make_args", ERRORS)
def test_errors_match(cpp_formulas, name, make_args):
    """Where the Python helper raises, its twin raises the same error and text."""
    same_error(cpp_formulas, name, *make_args(), error=RuntimeError)


@pytest.mark.parametrize("grad_dtype", ALL)
@pytest.mark.parametrize("like_dtype", ALL)
@pytest.mark.parametrize(
    "grad_shape, like_shape",
    [((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 3, 4), (3, 1)), ((5,), (1,))],
)
def test_unbroadcast(cpp_formulas, grad_dtype, like_dtype, grad_shape, like_shape):
    grad = rand(*grad_shape, dtype=grad_dtype)
    like = rand(*like_shape, dtype=like_dtype, seed=1)
    both(cpp_formulas, "unbroadcast", grad, like)


@pytest.mark.parametrize("t_dtype", ALL)
@pytest.mark.parametrize("like_dtype", ALL)
def test_as_real_like(cpp_formulas, t_dtype, like_dtype):
    both(
        cpp_formulas, "as_real_like", rand(3, dtype=t_dtype), rand(3, dtype=like_dtype)
    )
