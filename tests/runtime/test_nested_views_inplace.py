"""In-place writes through chains of views at nested levels, and in-place view
ops of expanded and zero-size duals.

1. A dual written through a chain of views of a complex tensor (conj, slices,
   as_strided, diagonal, real, imag, view_as_real, ...) at two nested levels:
   the base and every view must show the write at both levels and in the outer
   tangent of the inner tangent, also where the base had a tangent at one level
   only (its first tangent at the other level lives on the base, not on a view
   in between that has entries at the other level). Judged against nested
   `torch.func.jvp` and against finite differences of the plain function, an
   oracle that shares no formula with either.
2. In-place view ops (squeeze_, unsqueeze_, transpose_, t_, swapdims_,
   swapaxes_, as_strided_) of expanded and zero-size duals: as native forward AD
   (values, tangents, shapes and strides), at one level and nested.
"""

from __future__ import annotations

import pytest
import torch
import torch.autograd.forward_ad as native_fwAD
from devices import DEVICE
from forward_ad_checks import no_level_left_behind  # noqa: F401 - autouse
from torch.testing import assert_close

import dualgen.forward_ad as dual_fwAD

F64, C128 = torch.float64, torch.complex128
PARTS = ("value", "J u", "J v", "u^T H v")

# --------------------------------------------------------------------------------------
# helpers: the four parts of each output, by dualgen, torch.func and finite differences


def _plain(o: torch.Tensor) -> torch.Tensor:
    return o.detach().resolve_conj().resolve_neg().clone()


def dualgen_parts(f, primals, inner, outer):
    """f's outputs under two dualgen levels (input i dual with outer[i] outside
    and inner[i] inside, where not None): per output, its value, inner tangent,
    outer tangent and the outer tangent of the inner one (None where absent)."""
    with dual_fwAD.dual_level() as lo:
        xs = [
            p.clone() if v is None else dual_fwAD.make_dual(p.clone(), v)
            for p, v in zip(primals, outer)
        ]
        with dual_fwAD.dual_level() as li:
            xs = [
                x if u is None else dual_fwAD.make_dual(x, u) for x, u in zip(xs, inner)
            ]
            parts = []
            for o in f(*xs):
                primal, ju = dual_fwAD.unpack_dual(o, level=li)
                value, jv = dual_fwAD.unpack_dual(primal, level=lo)
                hvp = (
                    None if ju is None else dual_fwAD.unpack_dual(ju, level=lo).tangent
                )
                parts.append(
                    tuple(
                        None if t is None else _plain(t) for t in (value, ju, jv, hvp)
                    )
                )
            return parts


def _zeros_for_none(tangents, primals):
    return tuple(
        torch.zeros_like(p) if t is None else t for t, p in zip(tangents, primals)
    )


def torch_func_parts(f, primals, inner, outer):
    """The same four parts by nested torch.func.jvp (absent tangents are zeros)."""
    inner = _zeros_for_none(inner, primals)
    outer = _zeros_for_none(outer, primals)

    def plain_f(*xs):
        return tuple(o.resolve_conj().resolve_neg().clone() for o in f(*xs))

    def ju_of(*xs):
        return torch.func.jvp(plain_f, xs, inner)[1]

    value, jv = torch.func.jvp(plain_f, tuple(primals), outer)
    ju, hvp = torch.func.jvp(ju_of, tuple(primals), outer)
    return list(zip(value, ju, jv, hvp))


def finite_difference_parts(f, primals, inner, outer, h1=1e-6, h2=1e-4):
    """The four parts by central differences of the plain function along
    s*inner + t*outer (the last by a mixed second difference)."""
    inner = _zeros_for_none(inner, primals)
    outer = _zeros_for_none(outer, primals)

    def at(s, t):
        with torch.no_grad():
            xs = [p + s * u + t * v for p, u, v in zip(primals, inner, outer)]
            return [_plain(o) for o in f(*xs)]

    value = at(0.0, 0.0)
    ju = [(a - b) / (2 * h1) for a, b in zip(at(h1, 0.0), at(-h1, 0.0))]
    jv = [(a - b) / (2 * h1) for a, b in zip(at(0.0, h1), at(0.0, -h1))]
    corners = [at(h2, h2), at(h2, -h2), at(-h2, h2), at(-h2, -h2)]
    hvp = [(a - b - c + d) / (4 * h2 * h2) for a, b, c, d in zip(*corners)]
    return list(zip(value, ju, jv, hvp))


def assert_parts(actual, expected, rtol, atol, what):
    """dualgen's parts against a reference's; an absent tangent must be zero there."""
    assert len(actual) == len(expected)
    for i, (got, want) in enumerate(zip(actual, expected)):
        for part, a, e in zip(PARTS, got, want):
            msg = f"{what}: output {i}, {part}"
            if a is None:
                assert_close(e, torch.zeros_like(e), rtol=0, atol=atol, msg=msg)
                continue
            assert (a.shape, a.dtype) == (e.shape, e.dtype), msg
            assert_close(a, e, rtol=rtol, atol=atol, msg=_prefixed(msg))


def _prefixed(prefix: str):
    return lambda message: f"{prefix}: {message}"


def check_second_order(f, primals, inner, outer):
    """dualgen against nested torch.func.jvp (to rounding) and finite differences."""
    actual = dualgen_parts(f, primals, inner, outer)
    assert_parts(
        actual, torch_func_parts(f, primals, inner, outer), 1e-7, 1e-9, "torch.func"
    )
    fd = finite_difference_parts(f, primals, inner, outer)
    assert_parts(actual, fd, 1e-5, 1e-5, "finite differences")


# --------------------------------------------------------------------------------------
# 1. writes through chains of views of a complex tensor, nested levels

# Chains of two views or more, a step at a time: the first view gets the outer
# tangent by the view rule, and a first inner tangent written through the last
# must still reach the base (and the other way round).
CHAINS = {
    "conj_slice": (torch.conj, lambda v: v[0:1:2]),
    "conj_slices": (torch.conj, lambda v: v[1:, ::2]),
    "as_strided_select": (
        lambda v: v.as_strided((2,), (1,), v.storage_offset() + 4),
        lambda v: v[0],
    ),
    "unsqueeze_as_strided": (
        lambda v: v.unsqueeze(0),
        lambda v: v.as_strided((3, 2), (1, 4), 2),
    ),
    "conj_diagonal": (torch.conj, lambda v: v.diagonal(0, 1, 2)),
    "transpose_select": (lambda v: v.transpose(0, 2), lambda v: v[1]),
    "transpose_real": (lambda v: v.transpose(0, 2), torch.real),
    "slice_imag": (lambda v: v[:, 1:], torch.imag),
    "conj_imag_select": (torch.conj, torch.imag, lambda v: v[0]),  # a negative view
    "select_view_as_real": (lambda v: v[1], torch.view_as_real, lambda v: v[..., 0]),
    "view_as_real_complex": (
        torch.view_as_real,
        lambda v: v[0],
        torch.view_as_complex,
    ),
    "alias_conj_transpose": (
        lambda v: v.view_as(v),
        torch.conj,
        lambda v: v.transpose(0, 1),
    ),
}


def _source(w: torch.Tensor) -> torch.Tensor:
    """A real 0-d dual computed from w (its tangents are not w's own)."""
    return torch.log(w.abs() + 1).sum()


def _mask(t: torch.Tensor) -> torch.Tensor:
    mask = torch.zeros(t.shape, dtype=torch.bool)
    mask.view(-1)[::2] = True
    return mask


# Each writes a dual computed from w into the view t, in place.
OPS = {
    "copy_": lambda t, w: t.copy_(_source(w)),
    "setitem": lambda t, w: t.__setitem__(
        ..., w[: t.shape[-1]] * 2 if t.dim() else w.sum()
    ),
    "add_": lambda t, w: t.add_(torch.linalg.vector_norm(w, dim=0), alpha=2),
    "sub_": lambda t, w: t.sub_(w.sum()),
    "mul_": lambda t, w: t.mul_(w.sum()),
    "div_": lambda t, w: t.div_(w.pow(2).sum() + 1),
    "fill_": lambda t, w: t.fill_((w * w).sum()),
    "fill_same_dtype": lambda t, w: t.fill_((w * w).sum().to(t.dtype)),
    "masked_fill_": lambda t, w: t.masked_fill_(_mask(t), w.prod()),
    "lerp_": lambda t, w: t.lerp_(_source(w).to(t.dtype).expand(t.shape), 0.25),
    "addcmul_": lambda t, w: t.addcmul_(w[0].sin(), w[1].exp(), value=0.5),
    "index_put_": lambda t, w: t.index_put_((_mask(t),), (w.sum() * 3).to(t.dtype)),
}

# Which levels the complex input (the written tensor's base) is dual at; the
# real input w is dual at both.
TARGET_LEVELS = ("both", "outer", "inner")


def _inputs(levels: str):
    g = torch.Generator(DEVICE).manual_seed(0)
    x = torch.randn(2, 3, 4, dtype=C128, generator=g)
    w = torch.randn(5, dtype=F64, generator=g)
    u, v = (torch.randn(2, 3, 4, dtype=C128, generator=g) for _ in range(2))
    a, b = (torch.randn(5, dtype=F64, generator=g) for _ in range(2))
    inner = [None if levels == "outer" else u, a]
    outer = [None if levels == "inner" else v, b]
    return [x, w], inner, outer


def _through_chain(chain, op):
    def f(x, w):
        base = x * x
        views = [base]
        for step in CHAINS[chain]:
            views.append(step(views[-1]))
        op(views[-1], w)
        return (base, *views[1:], x)

    return f


# (aten's index_put_ cannot index a 0-d tensor)
WRITES = [
    (chain, op)
    for chain in CHAINS
    for op in OPS
    if not (chain == "as_strided_select" and op == "index_put_")
]


@pytest.mark.parametrize("levels", TARGET_LEVELS)
@pytest.mark.parametrize("chain, op", WRITES)
def test_write_through_views_of_complex_nested(chain, op, levels):
    primals, inner, outer = _inputs(levels)
    check_second_order(_through_chain(chain, OPS[op]), primals, inner, outer)


def _copy_into_conj_slice(x, w):
    v = (x * x).conj()
    v[0:1:2].copy_(torch.log(w.abs() + 1).sum())
    return v, v._base if v._base is not None else v


def _add_into_as_strided(x, w):
    y = torch.stack([x, x], 0) + x
    n = torch.linalg.vector_norm(w, dim=0)
    y.as_strided((2,), (1,), y.storage_offset() + 4)[0].add_(n, alpha=2)
    return (y,)


def _fill_conj_of_cumsum(x, w):
    c = x.cumsum(1)
    v = c.conj()
    v[1:, ::2].fill_((w * w).sum().to(C128))
    return v, c


REPORTED = {
    "copy_into_conj_slice": (_copy_into_conj_slice, (2, 3, 4)),
    "add_into_as_strided": (_add_into_as_strided, (2, 1, 3)),
    "fill_complex_into_conj_of_cumsum": (_fill_conj_of_cumsum, (2, 3, 4)),
}


@pytest.mark.parametrize("levels", TARGET_LEVELS)
@pytest.mark.parametrize("name", REPORTED)
def test_reported_writes_into_views_of_complex(name, levels):
    f, shape = REPORTED[name]
    g = torch.Generator(DEVICE).manual_seed(1)
    x, u, v = (torch.randn(*shape, dtype=C128, generator=g) for _ in range(3))
    w, a, b = (torch.randn(5, dtype=F64, generator=g) for _ in range(3))
    inner = [None if levels == "outer" else u, a]
    outer = [None if levels == "inner" else v, b]
    check_second_order(f, [x, w], inner, outer)


def test_inner_tangent_dual_at_the_outer_level():
    """The inner tangent of s is a dual of the outer level itself (a2): the
    outer tangent of the inner one adds J a2 (torch.func.jvp over (s, a))."""
    g = torch.Generator(DEVICE).manual_seed(2)
    x, v = (torch.randn(2, 3, 4, dtype=C128, generator=g) for _ in range(2))
    s, a, b, a2 = (torch.randn(5, dtype=F64, generator=g) for _ in range(4))

    def f(x, w):
        base = x.cumsum(2)
        view = base.conj()[1].transpose(0, 1)
        view[::2].mul_(w.sum()).add_(w.prod())
        return base, view

    def ju(x, w, u, a):
        return torch.func.jvp(
            lambda *p: tuple(o.resolve_conj() for o in f(*p)), (x, w), (u, a)
        )[1]

    u = torch.zeros_like(x)  # x has no inner tangent: its first comes from s
    expected = torch.func.jvp(ju, (x, s, u, a), (v, b, u, a2))[1]
    with dual_fwAD.dual_level() as lo:
        xo, so = dual_fwAD.make_dual(x, v), dual_fwAD.make_dual(s, b)
        with dual_fwAD.dual_level() as li:
            si = dual_fwAD.make_dual(so, dual_fwAD.make_dual(a, a2, level=lo))
            outs = f(xo, si)
            for out, want in zip(outs, expected):
                inner = dual_fwAD.unpack_dual(out, level=li).tangent
                got = dual_fwAD.unpack_dual(inner, level=lo).tangent
                assert_close(_plain(got), want.resolve_conj())


# --------------------------------------------------------------------------------------
# where a first tangent written through a view lives: on the view's forward base,
# a make_dual result or unpack_dual's primal (native keeps their forward
# gradients their own), never on a view in between


def test_first_inner_tangent_through_a_view_of_an_outer_dual_stays_its_own():
    """Two duals of one primal keep independent tangents: a first inner tangent
    written through a view of one reaches neither the other nor the primal."""
    x = torch.randn(2, 3, dtype=F64)
    with dual_fwAD.dual_level():
        d = dual_fwAD.make_dual(x, torch.randn(2, 3, dtype=F64))
        other = dual_fwAD.make_dual(x, torch.randn(2, 3, dtype=F64))
        with dual_fwAD.dual_level():
            s = dual_fwAD.make_dual(
                torch.tensor(2.0, dtype=F64), torch.tensor(3.0, dtype=F64)
            )
            view = d.t()[1:]  # its first view has d's outer tangent by the view rule
            view.copy_(s)
            expected = torch.zeros(2, 3, dtype=F64)
            expected[:, 1:] = 3.0
            assert_close(dual_fwAD.unpack_dual(d).tangent, expected)
            assert dual_fwAD.unpack_dual(other).tangent is None
            assert dual_fwAD.unpack_dual(x).tangent is None


def _views_of_an_earlier_levels_dual(fwAD, complex_):
    """Views made of a dual (and of unpack_dual's primal) at one level, written
    through at the next: the first tangents live on the dual and on the
    unpacked primal, each its own (native makes neither a forward view)."""
    dtype = C128 if complex_ else F64
    p = torch.randn(2, 3, dtype=dtype)
    with fwAD.dual_level():
        d = fwAD.make_dual(p, torch.randn(2, 3, dtype=dtype))
        unpacked = fwAD.unpack_dual(d).primal
        chain = d.conj() if complex_ else d.t()
        view = chain[0] if complex_ else chain[1]
        primal_view = unpacked.t()[:, 1:]
        fwAD.unpack_dual(view)
    with fwAD.dual_level():
        s = fwAD.make_dual(torch.tensor(2.0, dtype=F64), torch.tensor(-1.5, dtype=F64))
        view.copy_(s)
        primal_view.mul_(s)
        tensors = (p, d, unpacked, chain, view, primal_view)
        return [fwAD.unpack_dual(t).tangent for t in tensors]


@pytest.mark.parametrize("complex_", [False, True], ids=["real", "complex"])
def test_views_of_an_earlier_levels_dual_against_native(complex_):
    results = []
    for fwAD in (native_fwAD, dual_fwAD):
        torch.manual_seed(0)
        results.append(_views_of_an_earlier_levels_dual(fwAD, complex_))
    for i, (actual, expected) in enumerate(zip(*results[::-1])):
        if expected is None:
            assert actual is None, f"tensor {i}: dualgen has a tangent, native none"
        else:
            assert actual is not None, f"tensor {i}: native has a tangent, dualgen none"
            assert_close(_plain(actual), _plain(expected), msg=f"tensor {i}")


# --------------------------------------------------------------------------------------
# 2. in-place view ops of expanded and zero-size duals

# Each changes only its argument's geometry: the tangent takes the same geometry,
# and no element of it is written (its elements may share memory).
INPLACE_VIEW_OPS = {
    "squeeze_": lambda v: v.squeeze_(),
    "squeeze_dim": lambda v: v.squeeze_(0),
    "squeeze_dims": lambda v: v.squeeze_((0,)),
    "unsqueeze_": lambda v: v.unsqueeze_(0),
    "unsqueeze_last": lambda v: v.unsqueeze_(-1),
    "transpose_": lambda v: v.transpose_(0, 1),
    "t_": lambda v: v.t_(),
    "swapdims_": lambda v: v.swapdims_(0, 1),
    "swapaxes_": lambda v: v.swapaxes_(1, 0),
    "as_strided_": lambda v: v.as_strided_((v.shape[1], 2), (1, 0)),
    "as_strided_shared": lambda v: v.as_strided_((3, 2, v.shape[1]), (0, 0, 1)),
    "unsqueeze_then_transpose": lambda v: v.unsqueeze_(1).transpose_(0, 2),
}

# (the primal, the view of its dual that the op updates): expanded (elements
# share memory), zero-size, or both.
EXPANDED = {
    "empty_expanded": (
        lambda: torch.randn(1, dtype=F64)[1::2],
        lambda x: x.expand(2, 0),
    ),
    "expanded": (lambda: torch.randn(3, dtype=F64), lambda x: x.expand(2, 3)),
    "size1_expanded": (
        lambda: torch.randn(3, dtype=F64),
        lambda x: x[None].expand(2, 3),
    ),
    "strided_expanded": (
        lambda: torch.randn(6, dtype=F64)[::2],
        lambda x: x.expand(2, 3),
    ),
    "empty": (lambda: torch.randn(2, 0, dtype=F64), lambda x: x),
    "empty_transposed": (lambda: torch.randn(0, 2, dtype=F64), lambda x: x.t()),
}


def _geometry(t: torch.Tensor | None):
    return None if t is None else (tuple(t.shape), t.stride(), t.dtype)


def _inplace_view_run(fwAD, case, op):
    make, view_of = EXPANDED[case]
    p = make()
    with fwAD.dual_level():
        x = fwAD.make_dual(p, torch.randn(p.shape, dtype=F64))
        v = view_of(x)
        out = INPLACE_VIEW_OPS[op](v)
        assert out is v
        primal, tangent = fwAD.unpack_dual(v)
        x_tangent = fwAD.unpack_dual(x).tangent
        return [
            (_geometry(t), None if t is None else t.clone())
            for t in (primal, tangent, x_tangent)
        ]


@pytest.mark.parametrize("op", INPLACE_VIEW_OPS)
@pytest.mark.parametrize("case", EXPANDED)
def test_inplace_view_op_of_expanded_or_empty_dual_against_native(case, op):
    """Values, tangents, shapes and strides as native forward AD's."""
    results = []
    for fwAD in (native_fwAD, dual_fwAD):
        torch.manual_seed(0)
        results.append(_inplace_view_run(fwAD, case, op))
    for what, (actual, expected) in zip(
        ("primal", "tangent", "x's tangent"), zip(*results[::-1])
    ):
        assert (
            actual[0] == expected[0]
        ), f"{what}: geometry {actual[0]} != {expected[0]}"
        assert_close(actual[1], expected[1], rtol=0, atol=0, msg=what)


def _nested_inplace_view(op, view_of):
    def f(x):
        v = view_of(x * x)  # x * x: second-order tangents that are not zero
        INPLACE_VIEW_OPS[op](v)
        return (v,)

    return f


@pytest.mark.parametrize("op", INPLACE_VIEW_OPS)
@pytest.mark.parametrize("case", EXPANDED)
def test_inplace_view_op_of_expanded_or_empty_dual_nested(case, op):
    """Two levels: each level's tangent and the outer tangent of the inner one
    have the primal's shape and strides, and the values of nested torch.func.jvp
    and of finite differences."""
    make, view_of = EXPANDED[case]
    torch.manual_seed(0)
    p = make()
    u, v = torch.randn(p.shape, dtype=F64), torch.randn(p.shape, dtype=F64)
    f = _nested_inplace_view(op, view_of)
    check_second_order(f, [p], [u], [v])
    with dual_fwAD.dual_level() as lo:
        xo = dual_fwAD.make_dual(p, v)
        with dual_fwAD.dual_level() as li:
            (out,) = f(dual_fwAD.make_dual(xo, u))
            primal, inner = dual_fwAD.unpack_dual(out, level=li)
            outer = dual_fwAD.unpack_dual(primal, level=lo).tangent
            second = dual_fwAD.unpack_dual(inner, level=lo).tangent
            for t in (inner, outer, second):
                assert (t.shape, t.stride()) == (out.shape, out.stride())
