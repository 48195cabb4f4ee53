"""Custom torch.autograd.Functions under dualgen, against native forward AD.

Each program takes the forward AD API module (`fwAD`) and runs once under
`torch.autograd.forward_ad` and once under `dualgen.forward_ad`: primals,
tangent presence, tangent values and dtypes, what the user's jvp receives, and
errors with their messages must be the same. Models, reverse-over-forward,
derived JVPs (Functions without `jvp`), `dualgen.register_jvp`, nested levels and
checkpoint are in test_custom_function_more.py.
"""

from __future__ import annotations

import pytest
import torch
import torch.autograd.forward_ad as native_fwAD
from leaks import release_levels
from torch.autograd.function import Function, _SingleLevelFunction
from torch.testing import assert_close

import dualgen.forward_ad as dual_fwAD

DTYPE = torch.float64
ORIGINAL_APPLY = Function.__dict__["apply"].__func__
CTX_HOOKS = ("__init__", "to_save", "saved_for_forward", "dirty_tensors")
CTX_HOOKS += ("non_differentiable", "materialize_grads")


def patched() -> bool:
    """dualgen's hook on Function.apply (installed while a level is active)."""
    return "apply" in _SingleLevelFunction.__dict__


# --------------------------------------------------------------------------------------
# helpers


def randn(*shape, dtype=DTYPE, requires_grad=False):
    return torch.randn(*shape, dtype=dtype, requires_grad=requires_grad)


def assert_same(actual, expected, path="result"):
    """Same structure; tensors of the same shape, dtype and values; None only
    where the reference has None."""
    if actual is None or expected is None:
        assert (
            actual is None and expected is None
        ), f"{path}: dualgen gives {actual!r:.80}, the reference {expected!r:.80}"
    elif isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor), f"{path}: {actual!r:.80}"
        assert actual.dtype == expected.dtype, f"{path}: dtype"
        assert actual.shape == expected.shape, f"{path}: shape"
        assert_close(actual, expected, msg=lambda m: f"{path}: {m}")
    elif isinstance(expected, (tuple, list)):
        assert isinstance(actual, (tuple, list)), f"{path}: {actual!r:.80}"
        assert len(actual) == len(expected), f"{path}: length"
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_same(a, e, f"{path}[{i}]")
    else:
        assert actual == expected, f"{path}: dualgen {actual!r} != {expected!r}"


def run_both(program, seed=0):
    """program(fwAD) under native forward AD and under dualgen; compared."""
    torch.manual_seed(seed)
    expected = program(native_fwAD)
    torch.manual_seed(seed)
    actual = program(dual_fwAD)
    assert_same(actual, expected)
    return actual


def raises_both(program, error, match):
    """program(fwAD) raises `error` matching `match` under both engines."""
    for fwAD in (native_fwAD, dual_fwAD):
        torch.manual_seed(0)
        with pytest.raises(error, match=match):
            program(fwAD)


def unpack_all(fwAD, out):
    """Every tensor in `out` as (primal, tangent); other values as they are."""
    if isinstance(out, torch.Tensor):
        return tuple(fwAD.unpack_dual(out))
    if isinstance(out, (tuple, list)):
        return [unpack_all(fwAD, o) for o in out]
    return out


def apply_dual(fn, *pairs):
    """program(fwAD): fn applied in one level to make_dual of copies of the
    (primal, tangent) pairs (plain copies where tangent is None); the outputs
    unpacked inside the level."""

    def program(fwAD):
        with fwAD.dual_level():
            args = [
                p.clone() if t is None else fwAD.make_dual(p.clone(), t.clone())
                for p, t in pairs
            ]
            return unpack_all(fwAD, fn(*args))

    return program


def seen(tangents):
    """What a jvp received, comparable across engines."""
    return [
        None if t is None else (tuple(t.shape), t.dtype, t.clone()) for t in tangents
    ]


@pytest.fixture(autouse=True)
def clean_state():
    """No level, mode or patch is left behind by a test."""
    yield
    leaked = release_levels()
    assert not leaked, f"left behind: {leaked}"
    assert_unpatched()


def assert_unpatched():
    """Function.apply is torch's again. (The ctx class's hooks stay once
    installed, inert without a level: `test_ctx_hooks_are_inert_without_a_level`.)"""
    assert Function.__dict__["apply"].__func__ is ORIGINAL_APPLY
    assert not patched()


# --------------------------------------------------------------------------------------
# Functions


class STE(Function):
    """Straight-through estimator: round forward, identity derivative."""

    @staticmethod
    def forward(ctx, x):
        return x.round()

    @staticmethod
    def backward(ctx, g):
        return g

    @staticmethod
    def jvp(ctx, t):
        return t


RECEIVED = []  # what the jvps below were given


class CtxMul(Function):
    """x * y * scale + shift, forward(ctx, ...) style."""

    @staticmethod
    def forward(ctx, x, y, scale=2.0, shift=None):
        ctx.save_for_forward(x, y)
        ctx.scale = scale
        out = x * y * scale
        return out if shift is None else out + shift

    @staticmethod
    def jvp(ctx, xt, yt, *more):  # one tangent per argument given, as native
        RECEIVED.append(seen([xt, yt, *more]))
        x, y = ctx.saved_tensors
        out = (xt * y + x * yt) * ctx.scale
        return out if len(more) < 2 or more[1] is None else out + more[1]


class SetupMul(Function):
    """The same with forward(...) + setup_context."""

    @staticmethod
    def forward(x, y, scale=2.0, shift=None):
        out = x * y * scale
        return out if shift is None else out + shift

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, y, scale, _ = inputs
        ctx.save_for_forward(x, y)
        ctx.scale = scale

    @staticmethod
    def jvp(ctx, xt, yt, scale_t, shift_t):
        RECEIVED.append(seen([xt, yt, scale_t, shift_t]))
        x, y = ctx.saved_tensors
        out = (xt * y + x * yt) * ctx.scale
        return out if shift_t is None else out + shift_t


class Unmaterialized(Function):
    """set_materialize_grads(False): jvp gets None for inputs without tangents."""

    @staticmethod
    def forward(ctx, x, y):
        ctx.set_materialize_grads(False)
        ctx.save_for_forward(x, y)
        return x * y

    @staticmethod
    def jvp(ctx, xt, yt):
        RECEIVED.append(seen([xt, yt]))
        x, y = ctx.saved_tensors
        out = None if xt is None else xt * y
        if yt is not None:
            out = x * yt if out is None else out + x * yt
        return out


class SinCos(Function):
    """Several outputs, some not tensors, an integer one."""

    @staticmethod
    def forward(ctx, x, label):
        ctx.save_for_forward(x)
        return x.sin(), label, x.cos(), x.argmax(), 7

    @staticmethod
    def jvp(ctx, t, _):
        (x,) = ctx.saved_tensors
        return t * x.cos(), None, -t * x.sin(), None, None


class SortNonDiff(Function):
    """Sorted values and their (float) positions, marked non-differentiable."""

    @staticmethod
    def forward(ctx, x):
        values, index = x.sort()
        ctx.save_for_forward(index)
        positions = index.to(x.dtype)
        ctx.mark_non_differentiable(positions)
        return values, positions

    @staticmethod
    def jvp(ctx, t):
        (index,) = ctx.saved_tensors
        return t.gather(-1, index), None


class MulInPlace(Function):
    """x *= y (mark_dirty); jvp updates x's tangent in place."""

    @staticmethod
    def forward(ctx, x, y):
        ctx.mark_dirty(x)
        ctx.save_for_forward(x.clone(), y)
        return x.mul_(y)

    @staticmethod
    def jvp(ctx, xt, yt):
        x, y = ctx.saved_tensors
        return xt.mul_(y).add_(x * yt)


def function_with(forward, jvp, dirty=None, name="F"):
    """A Function of one input; dirty(x, out) is what it gives mark_dirty."""

    def forward_(ctx, x):
        out = forward(x)
        if dirty is not None:
            ctx.mark_dirty(dirty(x, out))
        return out

    def jvp_(ctx, t):
        return jvp(t)

    methods = {"forward": staticmethod(forward_), "jvp": staticmethod(jvp_)}
    return type(name, (Function,), methods)


# Views of the input; jvps return the same views of the tangent.
Diagonal = function_with(torch.diagonal, torch.diagonal, name="Diagonal")
Identity = function_with(lambda x: x, lambda t: t.view_as(t), name="Identity")


class GradReverse(Function):
    """Identity forward (a view), gradient times -alpha backward."""

    @staticmethod
    def forward(ctx, x, alpha):
        ctx.alpha = alpha
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        return -ctx.alpha * g, None

    @staticmethod
    def jvp(ctx, t, _):
        return t.view_as(t)


# --------------------------------------------------------------------------------------
# the jvp is used, with native's arguments


def test_straight_through_estimator_tangent_is_the_input_tangent():
    x, t = randn(5) * 3, randn(5)
    primal, tangent = run_both(apply_dual(STE.apply, (x, t)))
    assert_close(primal, x.round())
    assert_close(tangent, t)  # the jvp's, not round's derivative (0)


@pytest.mark.parametrize("fn", [CtxMul, SetupMul], ids=["ctx", "setup_context"])
@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda F, x, y: F.apply(x, y), id="positional"),
        pytest.param(lambda F, x, y: F.apply(x, y, 3.0), id="scale"),
        pytest.param(lambda F, x, y: F.apply(x, y=y), id="y-keyword"),
        pytest.param(lambda F, x, y: F.apply(x, y, 2.0, shift=x), id="shift-keyword"),
        pytest.param(lambda F, x, y: F.apply(x, scale=0.5, y=y), id="keywords"),
    ],
)
@pytest.mark.parametrize("which", ["x", "y", "both"])
def test_jvp_gets_one_tangent_per_input(fn, call, which):
    """Inputs without tangents get zeros (materialize_grads), non-tensors None."""
    x, y = randn(3), randn(3)
    tx = randn(3) if which != "y" else None
    ty = randn(3) if which != "x" else None

    def program(fwAD):
        RECEIVED.clear()
        result = apply_dual(lambda a, b: call(fn, a, b), (x, tx), (y, ty))(fwAD)
        return result, list(RECEIVED)

    run_both(program)


@pytest.mark.parametrize("which", ["x", "y", "both"])
def test_unmaterialized_jvp_gets_none_for_inputs_without_tangents(which):
    x, y = randn(3), randn(3)
    tx = randn(3) if which != "y" else None
    ty = randn(3) if which != "x" else None

    def program(fwAD):
        RECEIVED.clear()
        result = apply_dual(Unmaterialized.apply, (x, tx), (y, ty))(fwAD)
        return result, list(RECEIVED)

    run_both(program)


def test_jvp_gets_none_for_integer_and_non_tensor_inputs():
    """A tensor inside a list is no input: its tangent is neither passed nor seen."""

    class F(Function):
        @staticmethod
        def forward(ctx, x, index, items, n):
            ctx.index, ctx.n = index, n
            return x[index] * n + items[0]

        @staticmethod
        def jvp(ctx, *tangents):
            RECEIVED.append(seen(tangents))
            return tangents[0][ctx.index] * ctx.n

    def program(fwAD):
        RECEIVED.clear()
        with fwAD.dual_level():
            x = fwAD.make_dual(randn(3), randn(3))
            item = fwAD.make_dual(randn(2), randn(2))
            out = F.apply(x, torch.tensor([2, 0]), [item], 3)
            return fwAD.unpack_dual(out), list(RECEIVED)

    run_both(program)


def test_several_outputs_with_non_tensor_and_integer_outputs():
    x, t = randn(4), randn(4)
    sin, label, _, argmax, seven = run_both(
        apply_dual(lambda a: SinCos.apply(a, "label"), (x, t))
    )
    assert label == "label" and seven == 7 and argmax[1] is None
    assert_close(sin[1], t * x.cos())


def test_mark_non_differentiable_output_has_no_tangent():
    x, t = randn(2, 5), randn(2, 5)
    values, positions = run_both(apply_dual(SortNonDiff.apply, (x, t)))
    assert positions[1] is None and values[1] is not None


def test_complex_function():
    x, t = randn(3, dtype=torch.complex128), randn(3, dtype=torch.complex128)
    y = randn(3, dtype=torch.complex128)
    run_both(apply_dual(lambda a, b: SetupMul.apply(a, b), (x, t), (y, None)))


def test_tangent_dtype_is_kept_as_the_jvp_returns_it():
    fn = function_with(lambda x: x * 2, lambda t: (2 * t).to(torch.float32))
    _, tangent = run_both(apply_dual(fn.apply, (randn(3), randn(3))))
    assert tangent.dtype == torch.float32


# --------------------------------------------------------------------------------------
# in-place, views, inputs returned as-is


def test_mark_dirty_updates_the_tangent_in_place():
    x, tx, y, ty = randn(4), randn(4), randn(4), randn(4)

    def program(fwAD):
        with fwAD.dual_level():
            dual = fwAD.make_dual(x.clone(), tx.clone())
            a = dual.clone()  # not a leaf
            tangent_before = fwAD.unpack_dual(a).tangent
            out = MulInPlace.apply(a, fwAD.make_dual(y.clone(), ty.clone()))
            assert out is a
            tangent = fwAD.unpack_dual(a).tangent
            # for both engines: the very tensor, updated in place
            return fwAD.unpack_dual(out), tangent is tangent_before

    _, same = run_both(program)
    assert same


def test_mark_dirty_on_an_input_without_tangent_gives_it_one():
    x, y, ty = randn(4), randn(4), randn(4)
    run_both(apply_dual(lambda a, b: MulInPlace.apply(a, b), (x, None), (y, ty)))


def test_mark_dirty_on_a_view_updates_the_base_tangent():
    x, tx, y, ty = randn(2, 3), randn(2, 3), randn(3), randn(3)

    def program(fwAD):
        with fwAD.dual_level():
            base = fwAD.make_dual(x.clone(), tx.clone()).clone()
            MulInPlace.apply(base[1], fwAD.make_dual(y.clone(), ty.clone()))
            return fwAD.unpack_dual(base)

    run_both(program)


@pytest.mark.parametrize(
    "fn, shape",
    [(Diagonal, (3, 3)), (Identity, (2, 3)), (GradReverse, (4,))],
    ids=["diagonal", "input-as-is", "view_as"],
)
def test_view_outputs_get_views_of_the_input_tangent(fn, shape):
    x, t = randn(*shape), randn(*shape)
    args = (1.0,) if fn is GradReverse else ()

    def program(fwAD):
        with fwAD.dual_level():
            dual = fwAD.make_dual(x.clone(), t.clone())
            out = fn.apply(dual, *args)
            tangent = fwAD.unpack_dual(out).tangent
            shares = tangent.untyped_storage().data_ptr() == (
                fwAD.unpack_dual(dual).tangent.untyped_storage().data_ptr()
            )
            return fwAD.unpack_dual(out), out._base is not None, shares

    run_both(program)


def test_view_output_of_an_input_without_tangent_gets_the_jvp_tangent():
    class F(Function):
        @staticmethod
        def forward(ctx, x, y):
            return x[0], y * 2

        @staticmethod
        def jvp(ctx, xt, yt):
            return xt[0], yt * 2

    x, y, ty = randn(2, 3), randn(3), randn(3)

    def program(fwAD):
        with fwAD.dual_level():
            base = x.clone()
            view, double = F.apply(base, fwAD.make_dual(y.clone(), ty.clone()))
            return [fwAD.unpack_dual(t) for t in (view, base, double)]

    # the view's tangent lives on its base, as native
    view, base = run_both(lambda fwAD: program(fwAD)[:2])
    assert view[1] is not None and base[1] is not None
    # Native returns from its loop over outputs after such a view, so `double`
    # gets no tangent there; dualgen gives every later output its tangent.
    _, _, (_, double_tangent) = program(dual_fwAD)
    assert_close(double_tangent, 2 * ty)


NON_DIFFERENTIABLE_OUTPUTS = {
    "input-as-is": lambda x: x,
    "view": lambda x: x[0],
    "view_as": lambda x: x.view_as(x),
    "detached": lambda x: x.detach(),
    "detached-view": lambda x: x.detach()[0],
    "computed": lambda x: x * 2,
}


@pytest.mark.parametrize("requires_grad", [False, True])
@pytest.mark.parametrize("case", list(NON_DIFFERENTIABLE_OUTPUTS))
def test_non_differentiable_outputs(case, requires_grad):
    """As native: no tangent from the jvp, but a view of an input (an input
    returned as-is included) still sees the input's tangent through its base."""
    forward = NON_DIFFERENTIABLE_OUTPUTS[case]

    class F(Function):
        @staticmethod
        def forward(ctx, x):
            out = forward(x)
            ctx.mark_non_differentiable(out)
            return out

        @staticmethod
        def jvp(ctx, t):
            return None

    def program(fwAD):
        with fwAD.dual_level():
            p = randn(2, 3, requires_grad=requires_grad)
            out = F.apply(fwAD.make_dual(p, randn(2, 3)))
            return fwAD.unpack_dual(out), out.requires_grad

    run_both(program)


# --------------------------------------------------------------------------------------
# native's errors for a jvp that breaks the rules


def double_inplace(x):
    return x.mul_(2)


def the_input(x, out):
    return x


class NonDiffOutput(Function):
    @staticmethod
    def forward(ctx, x):
        mask = (x > 0).to(x.dtype)
        ctx.mark_non_differentiable(mask)
        return x * 2, mask

    @staticmethod
    def jvp(ctx, t):
        return t * 2, t


NOT_DIFFERENTIABLE = (
    "jvp returned a gradient at position 1, but  the corresponding forward output is "
    "not a differentiable Tensor"
)
JVP_ERRORS = {
    "count": (
        function_with(lambda x: x * 2, lambda t: (t, t)),
        r"jvp returned an invalid number of forward gradients \(expected 1 but got 2\)",
    ),
    "not-a-tensor": (
        function_with(lambda x: x * 2, lambda t: 3.0),
        r"expected Variable or None \(got float\) for grad output 0",
    ),
    "shape": (
        function_with(lambda x: x * 2, lambda t: t.sum()),
        r"Tensor is of size \[2, 3\] while the given forward gradient is of size \[\]",
    ),
    "integer-tangent": (
        function_with(lambda x: x * 2, lambda t: t.long()),
        "Expected both tensor and its forward grad to be floating point or complex",
    ),
    "integer-output": (
        function_with(lambda x: (x * 2, x.argmax()), lambda t: (t * 2, t.sum())),
        NOT_DIFFERENTIABLE,
    ),
    "non-differentiable-output": (NonDiffOutput, NOT_DIFFERENTIABLE),
    "input-as-is": (
        function_with(lambda x: x, lambda t: t),
        r"returning a view \(or an input as-is\) but the jvp is not returning a view",
    ),
    "input-as-is-shape": (
        function_with(lambda x: x, lambda t: t[0]),
        r"Tensor is of size \[2, 3\] while the given forward gradient is of size \[3\]",
    ),
    "view-shape": (
        function_with(lambda x: x[0, :2], lambda t: t[1]),
        r"Tensor is of size \[2\] while the given forward gradient is of size \[3\]",
    ),
    "view-not-a-view": (
        function_with(lambda x: x[0], lambda t: t[0].clone()),
        r"returning a view \(or an input as-is\) but the jvp is not returning a view",
    ),
    "view-of-another": (
        function_with(lambda x: x[0], lambda t: t.clone()[0]),
        "jvp is not returning a view of the given grad input",
    ),
    "inplace-not-inplace": (
        function_with(double_inplace, lambda t: t * 2, dirty=the_input),
        "is not modifying the forward mode gradients inplace",
    ),
    "inplace-none": (
        function_with(double_inplace, lambda t: None, dirty=the_input),
        "is not modifying the forward mode gradients inplace",
    ),
    "inplace-not-as-is": (
        function_with(double_inplace, lambda t: t.mul_(2).view_as(t), dirty=the_input),
        "is not returning the forward mode gradients as-is",
    ),
    "dirty-not-an-input": (
        function_with(lambda x: x * 2, lambda t: t * 2, dirty=lambda x, out: out),
        "Only input Tensors should be given to ctx.mark_dirty()",
    ),
}


@pytest.mark.parametrize("case", list(JVP_ERRORS))
def test_jvp_breaking_the_rules_raises_native_errors(case):
    fn, match = JVP_ERRORS[case]

    def program(fwAD):
        with fwAD.dual_level():
            x = fwAD.make_dual(randn(2, 3), randn(2, 3)).clone()
            fn.apply(x)

    raises_both(program, RuntimeError, match)


def test_view_of_a_view_tangent_must_share_its_base():
    fn = function_with(lambda x: x.view(-1), lambda t: t.clone().view(-1))

    def program(fwAD):
        with fwAD.dual_level():
            x = fwAD.make_dual(randn(2, 3), randn(2, 3))
            fn.apply(x[1])

    raises_both(program, RuntimeError, "not returning a view of the same base")


@pytest.mark.parametrize("where", ["forward", "jvp"])
def test_errors_in_forward_or_jvp_propagate_and_leave_the_level_usable(where):
    def fail(value):
        raise ValueError(f"broken {where}")

    fn = function_with(
        fail if where == "forward" else torch.sin, fail if where == "jvp" else torch.cos
    )

    def program(fwAD):
        with fwAD.dual_level():
            x = fwAD.make_dual(randn(3), randn(3))
            with pytest.raises(ValueError, match=f"broken {where}"):
                fn.apply(x)
            return fwAD.unpack_dual(STE.apply(x))

    run_both(program)


# --------------------------------------------------------------------------------------
# no tangents, no level, the patch


def test_inputs_without_tangents_give_no_tangent_and_forward_is_not_differentiated():
    weight, tw = randn(3), randn(3)

    class UsesClosure(Function):
        @staticmethod
        def forward(ctx, x):
            return x * captured[0]

        @staticmethod
        def jvp(ctx, t):
            return t * 100

    captured = []

    def program(fwAD):
        with fwAD.dual_level():
            captured[:] = [fwAD.make_dual(weight.clone(), tw.clone())]
            plain = UsesClosure.apply(randn(3))
            dual = UsesClosure.apply(
                fwAD.make_dual(randn(3), torch.ones(3, dtype=DTYPE))
            )
            return fwAD.unpack_dual(plain), fwAD.unpack_dual(dual)

    (_, no_tangent), (_, tangent) = run_both(program)
    assert no_tangent is None
    assert_close(tangent, torch.full((3,), 100.0, dtype=DTYPE))  # the closure's unseen


def test_function_without_level_is_plain_torch():
    x = randn(4, requires_grad=True)
    out = STE.apply(x * 3)
    assert type(out.grad_fn).__name__ == "STEBackward"
    out.sum().backward()
    assert_close(x.grad, torch.full((4,), 3.0, dtype=DTYPE))
    assert_unpatched()


ste = STE.apply  # bound before any level is entered, as libraries do


def test_apply_bound_before_the_level_uses_the_jvp():
    x, t = randn(5) * 3, randn(5)
    _, tangent = run_both(apply_dual(ste, (x, t)))
    assert_close(tangent, t)
