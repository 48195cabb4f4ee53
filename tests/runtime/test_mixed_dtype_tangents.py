"""Tangents of another dtype than their primals: each output tangent in the dtype
native forward AD gives it, with native's values.

`make_dual` keeps a tangent's dtype, as native does (a float32 tangent of a
float64 primal stays float32). Native then evaluates every term of an op's
formula, with zero tangents in the inputs' own dtypes where they have none
(integer and bool inputs too), and keeps the formula's value in its dtype only
where it is laid out as the output is (else it copies it into the output's
dtype): relu gives float64 (threshold_backward promotes), clamp float32,
expand_copy float64 (its formula is a view of the tangent), `x * mask` float64.
dualgen drops absent terms; `dtypes.in_native_dtypes` restores native's dtypes.

The OpInfo part runs each OpInfo with forward AD on its first sample: float32
tangents of float64 inputs, complex64 tangents of complex128 inputs, and
float32, bfloat16 and float64 tangents on one op's several inputs. The pairs
dualgen does not match yet are in `KNOWN` (strict xfails), with the reason.
`python tests/runtime/test_mixed_dtype_tangents.py [--every-sample]` sweeps
every variant (also real tangents of complex inputs and float64 tangents of
float32 inputs, and the in-place variants) and prints a report.
Under `make test` this module runs under both kernel backends; the hand-written
cases at the end switch backends themselves.
"""

from __future__ import annotations

import sys
import warnings

import pytest
import torch
import torch.autograd.forward_ad as native_fwAD
from devices import DEVICE
from torch.utils._pytree import tree_map_only

import dualgen.forward_ad as fwAD
from dualgen import torch_support

F32, F64, BF16 = torch.float32, torch.float64, torch.bfloat16
C64, C128 = torch.complex64, torch.complex128

# variant -> (the samples' dtype, the k-th differentiable input's tangent dtype)
VARIANTS = {
    "f32-of-f64": (F64, lambda k, dtype: F32),
    "c64-of-c128": (C128, lambda k, dtype: C64 if dtype.is_complex else F32),
    "real-of-c128": (C128, lambda k, dtype: F64),
    "mixed": (F64, lambda k, dtype: (F32, BF16, F64)[k % 3]),
    "f64-of-f32": (torch.float32, lambda k, dtype: F64),
}
TESTED = ("f32-of-f64", "c64-of-c128", "mixed")  # (all: the sweep below)

# Native's values are wrong here (tests/coverage/opinfo_known.py; matrix_exp:
# native drops the imaginary part of its block matrix for a real tangent of a
# complex input, finite differences agree with dualgen): dtypes only.
NATIVE_VALUES_WRONG = {
    "cholesky_inverse",
    "cholesky_solve",
    "triangular_solve",
    "logcumsumexp",
    "matrix_exp",
}

# Where dualgen's tangent dtype is not native's, and why.
_AFFINE = (
    "native's norm JVP accumulates a weight's share in place when the weight has "
    "a tangent (keeping the normalized tangent's dtype, or the input's where the "
    "input has none) and multiplies out of place when it has none (promoting with "
    "the weight): dualgen's tangent promotes with the weight either way"
)
KNOWN = {
    **{
        (name, "real-of-c128"): "native refuses a real tangent of a complex "
        "matrix here but for an empty one, whose tangent it gives the output's dtype"
        for name in (
            "svd",
            "linalg.svd",
            "linalg.eigh",
            "linalg.eigvalsh",
            "linalg.svdvals",
        )
    },
    ("diff", "real-of-c128"): "native keeps a real tangent real through diff; "
    "the spec's formula makes it complex",
}

# Where torch 2.14 changed native's formula and the spec writes 2.13's (the
# pinned release): strict xfails on 2.14 and later only.
_MAX_MIN_2_14 = (
    "torch 2.14 writes maximum/minimum's tangent as a where of the tangents (their "
    "promoted dtype); the spec writes 2.13's, promoting with the output"
)
_CLAMP_2_14 = (
    "torch 2.14 gives clamp(self, min, max tensors) the mean of both tangents "
    "where self equals a bound; the spec writes 2.13's (the bound's tangent)"
)
CHANGED_IN_2_14 = {
    **{
        (name, variant): _MAX_MIN_2_14
        for name in ("max.binary", "maximum", "min.binary", "minimum")
        for variant in ("f32-of-f64", "mixed")
    },
    "maximum": _MAX_MIN_2_14,
    "minimum": _MAX_MIN_2_14,
    "clamp_tensor": _CLAMP_2_14,
}
if torch_support.release(torch.__version__) >= (2, 14):
    KNOWN = {
        **KNOWN,
        **{k: v for k, v in CHANGED_IN_2_14.items() if isinstance(k, tuple)},
    }


def _changed_in_this_release(name: str) -> list:
    """The xfail mark of a hand case whose native formula changed (see above)."""
    if torch_support.release(torch.__version__) >= (2, 14) and name in CHANGED_IN_2_14:
        return [pytest.mark.xfail(strict=True, reason=CHANGED_IN_2_14[name])]
    return []


def _is_diff(t) -> bool:
    return isinstance(t, torch.Tensor) and (t.is_floating_point() or t.is_complex())


def _map(value, fn):
    """`fn` applied to every tensor in a nest of lists, tuples and dicts."""
    return tree_map_only(torch.Tensor, fn, value)


def _tangents(sample, pick, generator) -> list[torch.Tensor]:
    """A seeded tangent per differentiable tensor, in the dtype `pick` gives."""
    tangents = []

    def make(t):
        if _is_diff(t):
            dtype = pick(len(tangents), t.dtype)
            value = torch.randn(t.shape, generator=generator, dtype=F64)
            if dtype.is_complex:
                imag = torch.randn(t.shape, generator=generator, dtype=F64)
                value = torch.complex(value, imag)
            tangents.append(value.to(dtype))
        return t

    _map((sample.input, sample.args, sample.kwargs), make)
    return tangents


def _run(fn, sample, tangents, module, inplace=False) -> list:
    """The output tangents of fn on the sample under `module`'s forward AD."""
    pending = iter([t.clone() for t in tangents])  # in-place ops write them
    torch.manual_seed(0)
    with module.dual_level():

        def dual(t):
            if not _is_diff(t):
                return t
            return module.make_dual(t.clone() if inplace else t, next(pending))

        args = _map((sample.input, sample.args, sample.kwargs), dual)
        out = fn(args[0], *args[1], **args[2])
        flat = []
        _map(out, flat.append)
        result = []
        for o in flat:
            tangent = module.unpack_dual(o).tangent if _is_diff(o) else None
            result.append(None if tangent is None else tangent.clone())
    return result


def _difference(got, expected, tangents, values=True) -> str | None:
    """The first way dualgen's output tangents differ from native's. Absent
    against zeros is no difference (docs/differences.md)."""
    if len(got) != len(expected):
        return f"{len(got)} outputs, native {len(expected)}"
    low = any(t.dtype in (BF16, torch.float16) for t in tangents)
    tolerance = 2e-2 if low else 1e-4
    for k, (a, b) in enumerate(zip(got, expected)):
        if a is None or b is None:
            present = a if a is not None else b
            if present is not None and present.numel() and present.abs().max() != 0:
                return f"output {k}: tangent present {a is not None}, native {b is not None}"
            continue
        if a.dtype != b.dtype or a.shape != b.shape:
            return f"output {k}: {a.dtype} {tuple(a.shape)}, native {b.dtype} {tuple(b.shape)}"
        wide = C128 if a.is_complex() or b.is_complex() else F64
        if values and not torch.allclose(
            a.to(wide), b.to(wide), rtol=tolerance, atol=tolerance, equal_nan=True
        ):
            worst = (a.to(wide) - b.to(wide)).abs().max().item()
            return f"output {k}: values differ by {worst:.3g}"
    return None


def full_name(op) -> str:
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def check(op, variant, samples=1, inplace=False) -> tuple[int, list[str]]:
    """(samples compared, problems) for op under `variant`: dualgen against native
    on the op's first `samples` samples (None: all) native runs."""
    dtype, pick = VARIANTS[variant]
    fn = op.inplace_variant if inplace else op
    generator = torch.Generator(DEVICE).manual_seed(0)
    torch.manual_seed(0)
    compared, problems = 0, []
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # repeated indices (max_unpool) pick one winner
    try:
        for n, sample in enumerate(op.sample_inputs("cpu", dtype)):
            if samples is not None and compared >= samples:
                break
            tangents = _tangents(sample, pick, generator)
            if variant == "mixed" and len(tangents) < 2:
                break  # (one input: the f32-of-f64 case)
            if not tangents:
                continue
            try:
                expected = _run(fn, sample, tangents, native_fwAD, inplace)
            except Exception:  # noqa: BLE001, S112 - native refuses it: no reference
                continue
            compared += 1
            try:
                got = _run(fn, sample, tangents, fwAD, inplace)
            except Exception as exc:  # noqa: BLE001 - dualgen's failure is the verdict
                problems.append(f"sample {n}: {type(exc).__name__}: {exc}")
                continue
            values = op.name not in NATIVE_VALUES_WRONG
            problem = _difference(got, expected, tangents, values)
            if problem and not _difference(got, expected, tangents, values=False):
                again = _run(fn, sample, tangents, native_fwAD, inplace)
                if _difference(again, expected, tangents):
                    continue  # native disagrees with itself: no reference values
            if problem:
                problems.append(f"sample {n}: {problem}")
    finally:
        torch.set_num_threads(threads)
    return compared, problems


def forward_ad_ops(variant, inplace=False) -> list:
    from torch.testing._internal.common_methods_invocations import op_db

    dtype = VARIANTS[variant][0]
    return [
        op
        for op in op_db
        if op.supports_forward_ad
        and dtype in op.supported_dtypes("cpu")
        and dtype in op.supported_backward_dtypes("cpu")
        and (not inplace or (op.inplace_variant and op.supports_inplace_autograd))
    ]


def _cases():
    for variant in TESTED:
        for op in forward_ad_ops(variant):
            key = (full_name(op), variant)
            marks = ()
            if key in KNOWN:
                marks = pytest.mark.xfail(strict=True, reason=KNOWN[key])
            yield pytest.param(op, variant, id=f"{key[0]}-{variant}", marks=marks)


@pytest.mark.parametrize("op, variant", list(_cases()))
def test_opinfo_tangent_dtypes_match_native(op, variant):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, problems = check(op, variant)
    assert not problems, f"{full_name(op)} {variant}: " + "\n".join(problems)


# --------------------------------------------------------------------------------------
# hand-written cases, each kernel backend


def _side_by_side(fn, *inputs) -> list:
    """fn's output tangents under native and under dualgen, as (dualgen, native)
    pairs; inputs are (primal, tangent or None)."""

    def run(module):
        with module.dual_level():
            args = [
                p.clone() if t is None else module.make_dual(p.clone(), t.clone())
                for p, t in inputs
            ]
            out = fn(*args)
            outs = out if isinstance(out, (tuple, list)) else (out,)
            return [module.unpack_dual(o).tangent for o in outs]

    return list(zip(run(fwAD), run(native_fwAD)))


def _assert_as_native(fn, *inputs, dtype=None) -> None:
    tangents = [t for _, t in inputs if t is not None]
    for k, (got, expected) in enumerate(_side_by_side(fn, *inputs)):
        assert expected is not None and got is not None, f"output {k}"
        assert (
            got.dtype == expected.dtype
        ), f"output {k}: {got.dtype}, native {expected.dtype}"
        if dtype is not None:
            assert got.dtype == dtype, f"output {k}: {got.dtype}"
        assert _difference([got], [expected], tangents) is None


X = torch.linspace(-2, 2, 12, dtype=F64).reshape(3, 4)
Y = torch.linspace(1, -1.5, 12, dtype=F64).reshape(3, 4)
T32 = torch.linspace(0.5, -0.7, 12, dtype=F32).reshape(3, 4)
T16 = torch.linspace(-0.3, 0.9, 12, dtype=F32).reshape(3, 4).to(BF16)
INDEX = torch.tensor([[2, 0, 1, 1], [0, 0, 2, 1], [1, 2, 0, 0]])


def _named(cases) -> list:
    return [
        pytest.param(*rest, id=name, marks=_changed_in_this_release(name))
        for name, *rest in cases
    ]


ONE_INPUT = _named(
    [
        ("relu", torch.relu, F64),  # threshold_backward promotes (its meta kernel not)
        ("relu_module", torch.nn.functional.relu, F64),
        ("threshold", lambda a: torch.nn.functional.threshold(a, 0.5, 2.0), F64),
        ("clamp", lambda a: a.clamp(-0.5, 0.5), F32),
        ("clamp_tensor", lambda a: a.clamp(torch.full_like(X, -0.5), X.abs()), F64),
        ("hardtanh", torch.nn.functional.hardtanh, F64),
        ("where_other_tensor", lambda a: torch.where(a > 0, a, Y), F64),
        ("where_other_number", lambda a: torch.where(a > 0, a, 0.0), F32),
        ("masked_fill", lambda a: a.masked_fill(a > 1, 0.0), F32),
        ("times_bool_mask", lambda a: a * (a > 0), F64),  # other_t: a bool zero
        ("over_int_tensor", lambda a: a / torch.tensor([1, 2, 3, 4]), F64),
        ("plus_int_tensor", lambda a: a + torch.tensor([1, 2, 3, 4]), F32),
        # a strided tangent: native's formula makes a new tensor, kept float32
        ("strided_plus_0d", lambda a: a[:, ::2] + torch.tensor(0.0, dtype=F64), F32),
        ("maximum_plain", lambda a: torch.maximum(a, Y), F64),
        ("max_reduction", lambda a: a.max(), F32),
        ("max_dim", lambda a: a.max(1).values, F32),
        ("sort", lambda a: a.sort(1).values, F32),
        ("topk", lambda a: a.topk(2).values, F32),
        ("gather", lambda a: a.gather(1, INDEX), F32),
        ("index_select", lambda a: a.index_select(0, INDEX[0, :3]), F32),
        ("take", lambda a: a.take(INDEX[0]), F32),
        ("max_pool_indices", lambda a: torch.nn.functional.max_pool1d(a[None], 2), F32),
        ("dropout", lambda a: torch.nn.functional.dropout(a, 0.0), None),
        ("sum", lambda a: a.sum(0), F32),
        ("view", lambda a: a.view(12), F32),  # a view of the tangent, as native
        ("expand_copy", lambda a: torch.expand_copy(a[:, :1], (3, 5)), F64),
        ("transpose_copy", lambda a: torch.transpose_copy(a, 0, 1), F64),
        ("select_copy", lambda a: torch.select_copy(a, 0, 1), F64),
        ("narrow_copy", lambda a: torch.narrow_copy(a, 0, 0, 2), F32),
        ("unbind_copy", lambda a: torch.unbind_copy(a, 1), F64),
        ("diag", lambda a: torch.diag(a[:, :3]), F64),
    ],
)


@pytest.mark.parametrize("fn, dtype", ONE_INPUT)
def test_one_tangent_of_another_dtype(backend, fn, dtype):
    """A float32 tangent of a float64 input: the output tangent's dtype is
    native's (float64 where the formula promotes or native copies)."""
    _assert_as_native(fn, (X, T32), dtype=dtype)


@pytest.mark.parametrize(
    "fn",
    _named(
        [
            ("maximum", torch.maximum),
            ("minimum", torch.minimum),
            ("where", lambda a, b: torch.where(a > b, a, b)),
            ("add", torch.add),
            ("mul", torch.mul),
            ("stack", lambda a, b: torch.stack([a, b])),
            ("cat", lambda a, b: torch.cat([a, b], 1)),
            ("clamp_between", lambda a, b: a.clamp(b - 1, b + 1)),
        ]
    ),
)
def test_inputs_with_tangents_of_different_dtypes(backend, fn):
    """A float32 tangent on one float64 input, a bfloat16 one on the other."""
    _assert_as_native(fn, (X, T32), (Y, T16))
    _assert_as_native(fn, (X, T32), (Y, None))
    _assert_as_native(fn, (X, None), (Y, T16))


@pytest.mark.parametrize(
    "fn",
    _named(
        [
            ("relu_", lambda a: a.relu_()),
            ("clamp_", lambda a: a.clamp_(-0.5, 0.5)),
            ("mul_mask_", lambda a: a.mul_(a > 0)),
            ("mul_", lambda a: a.mul_(Y)),
            ("zeros_add_", lambda a: torch.zeros_like(X).add_(a)),
            ("zeros_copy_", lambda a: torch.zeros_like(X).copy_(a)),
            ("zeros_mul_", lambda a: torch.ones_like(X).mul_(a)),
        ]
    ),
)
def test_in_place(backend, fn):
    """In place: self's tangent keeps its dtype (native updates it in place);
    a tensor without one gets native's."""
    _assert_as_native(fn, (X, T32))


NORMS = _named(
    [
        ("layer_norm", lambda a, w, b: torch.nn.functional.layer_norm(a, (4,), w, b)),
        (
            "batch_norm",
            lambda a, w, b: torch.nn.functional.batch_norm(
                a, None, None, w, b, training=True
            ),
        ),
        ("group_norm", lambda a, w, b: torch.nn.functional.group_norm(a, 2, w, b)),
    ]
)


@pytest.mark.parametrize("fn", NORMS)
@pytest.mark.parametrize("primal, tangent", [(F64, F32), (F32, F64)])
@pytest.mark.parametrize("duals", ["x", "xw", "xb", "xwb", "w", "wb", "b"])
def test_normalization_affine_dtypes(backend, fn, primal, tangent, duals):
    """A normalization's tangent with tangents on some of input, weight and
    bias: native adds the weight's and bias's shares in place where they have
    tangents and multiplies by a weight without one out of place, so which of
    them carry tangents sets the dtype (norm_affine_tangent)."""
    weight = torch.linspace(0.5, 2.0, 4, dtype=primal)
    bias = torch.linspace(-1.0, 1.0, 4, dtype=primal)
    t4 = torch.linspace(0.3, -0.2, 4, dtype=tangent)
    _assert_as_native(
        fn,
        (X.to(primal), T32.to(tangent) if "x" in duals else None),
        (weight, t4 if "w" in duals else None),
        (bias, t4.flip(0) if "b" in duals else None),
    )


def test_refused_as_native(backend):
    """Writing values whose tangent has another dtype into a tensor without one
    by index (index_put_, index_copy_, scatter_): native's formula, and the
    spec's, write the tangent into zeros of the target's dtype, which these
    ops refuse; both raise."""
    for fn in (
        lambda a: torch.zeros_like(X).index_put_((INDEX[0, :3],), a),
        lambda a: torch.zeros_like(X).index_copy_(0, INDEX[0, :3], a),
        lambda a: torch.zeros_like(X).scatter_(0, INDEX, a),
    ):
        for module in (native_fwAD, fwAD):
            with module.dual_level(), pytest.raises(RuntimeError, match="dtype"):
                fn(module.make_dual(X.clone(), T32.clone()))


def test_complex_output_of_real_tangent(backend):
    """A real tangent of a complex input, and a complex64 one."""
    Z = torch.complex(X, Y)
    for tangent in (T32.double(), torch.complex(T32, T32)):
        _assert_as_native(lambda z: z * Z, (Z, tangent))
        _assert_as_native(lambda z: z.abs(), (Z, tangent))
        _assert_as_native(lambda z: torch.where(z.abs() > 1, z, Z), (Z, tangent))
        _assert_as_native(lambda z: z.sum(), (Z, tangent))
    _assert_as_native(lambda x: torch.polar(x.abs(), x), (X, T32))


ONE_DTYPE_OPS = {
    "dot": lambda a, v: a[0] @ v,
    "vdot": lambda a, v: torch.vdot(v, a[1]),
    "mv": lambda a, v: a @ v,
    "mm": lambda a, v: a @ a.conj_physical(),
    "addmm": lambda a, v: torch.addmm(a, a, a.T),
    "bmm": lambda a, v: torch.bmm(a[None], a[None]),
    "solve": lambda a, v: torch.linalg.solve(a + 4 * torch.eye(3), v),
}


@pytest.mark.parametrize("fn", ONE_DTYPE_OPS.values(), ids=list(ONE_DTYPE_OPS))
def test_real_tangent_of_complex_input_to_an_op_of_one_dtype(backend, fn):
    """A real tangent t of a complex input is t + 0i: through ops that take one
    dtype (dot, mm, solve), whose formulas would mix a real tangent with complex
    values, the tangent is that of t + 0i (native raises)."""
    gen = torch.Generator().manual_seed(3)
    a = torch.randn(3, 3, dtype=C128, generator=gen)
    v = torch.randn(3, dtype=C128, generator=gen)
    ta = torch.randn(3, 3, dtype=F64, generator=gen)
    tv = torch.randn(3, dtype=F64, generator=gen)

    def tangent(ta, tv):
        with fwAD.dual_level():
            out = fn(fwAD.make_dual(a, ta), fwAD.make_dual(v, tv))
            return fwAD.unpack_dual(out).tangent

    expected = tangent(ta.to(C128), tv.to(C128))
    torch.testing.assert_close(tangent(ta, tv), expected)
    # and against central differences along the real direction
    h = 1e-6
    diff = (fn(a + h * ta, v + h * tv) - fn(a - h * ta, v - h * tv)) / (2 * h)
    torch.testing.assert_close(expected, diff, atol=1e-6, rtol=1e-6)


def test_nested_levels_with_mixed_dtypes(backend):
    """Tangents of another dtype at two levels (float32 outside, bfloat16
    inside): each level's tangent in native's dtype, and the values of nested
    torch.func.jvp."""
    u = T16.reshape(12)[:5]
    v = T32.reshape(12)[:5]
    x = X.reshape(12)[:5]
    for f in (torch.relu, lambda a: a * (a > 0), lambda a: a.clamp(-0.5, 0.5)):

        def g(a, f=f):
            return f(a) * a.cos()  # (a second derivative too)

        def inner(a, g=g):
            return torch.func.jvp(g, (a,), (u,))

        (_, inner_t), (outer_t, outer_inner_t) = torch.func.jvp(inner, (x,), (v,))
        with fwAD.dual_level():
            outer = fwAD.make_dual(x, v)
            with fwAD.dual_level():
                y = f(fwAD.make_dual(outer, u))
                y_inner_t = fwAD.unpack_dual(y).tangent
                out = g(fwAD.make_dual(outer, u))
                got_inner_t = fwAD.unpack_dual(out).tangent
            got_outer_t = fwAD.unpack_dual(out).tangent
            got_outer_inner_t = fwAD.unpack_dual(got_inner_t).tangent
            y_outer_t = fwAD.unpack_dual(y).tangent
        with native_fwAD.dual_level():  # each level alone, as native
            expected = native_fwAD.unpack_dual(f(native_fwAD.make_dual(x, u))).tangent
            assert y_inner_t.dtype == expected.dtype
            expected = native_fwAD.unpack_dual(f(native_fwAD.make_dual(x, v))).tangent
            assert y_outer_t.dtype == expected.dtype
        for got, want in (
            (got_inner_t, inner_t),
            (got_outer_t, outer_t),
            (got_outer_inner_t, outer_inner_t),
        ):
            assert got.dtype == want.dtype
            torch.testing.assert_close(
                got.double(), want.double(), rtol=2e-2, atol=2e-2
            )


# --------------------------------------------------------------------------------------
# the whole sweep, as a report


def main(argv) -> int:
    every = "--every-sample" in argv
    samples = None if every else 1
    wrong = 0
    for inplace in (False, True):
        for variant in VARIANTS:
            ops = forward_ad_ops(variant, inplace)
            compared = failing = 0
            for op in ops:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    n, problems = check(op, variant, samples, inplace)
                compared += n
                if problems:
                    failing += 1
                    known = KNOWN.get((full_name(op), variant))
                    print(f"  {full_name(op)} {variant}: {problems[0][:200]}")
                    if known:
                        print(f"    known: {known}")
            wrong += failing
            kind = "in-place " if inplace else ""
            print(
                f"{kind}{variant}: {len(ops)} ops, {compared} samples, "
                f"{failing} ops differ from native"
            )
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


@pytest.mark.filterwarnings("ignore:Casting complex values to real")
def test_complex_tangent_of_another_precision_written_into_real_memory(backend):
    """copy_ of a complex128 dual with a complex64 tangent into a real tensor:
    the real part, as a real tangent (native keeps the complex one as it is, a
    registered defect: tests/fuzz/native_defects.py)."""
    with fwAD.dual_level():
        z = fwAD.make_dual(
            torch.tensor([0.5 + 0.5j], dtype=C128),
            torch.tensor([0.25 + 0.125j], dtype=C64),
        )
        x = torch.zeros(1, dtype=F64)
        x.copy_(z)
        tangent = fwAD.unpack_dual(x).tangent
    assert not tangent.is_complex()
    torch.testing.assert_close(tangent.double(), torch.tensor([0.25], dtype=F64))
