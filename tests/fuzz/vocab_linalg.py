"""Normalizations (layer_norm, batch_norm in training, instance_norm, group_norm,
rms_norm, each maybe with weight and bias variables) and linear algebra (det,
logdet, slogdet, inv, solve, solve_ex, tensorsolve).

Nested programs judge these by finite differences alone: torch.func's nested jvp
gets several of their second derivatives wrong (native_defects.py), so agreeing
with it proves nothing. Finite differences are reliable only where the function
is tame, so each op is used only where its input is well-conditioned at the
primal: every normalized group spread (variance at least MIN_SPREAD), every
matrix `a[..., :k, :k] + c * I` with singular values in [MIN_SINGULAR,
MAX_SINGULAR] (c the smallest of (0, 2, 4, 8) from a drawn one that gives that).
"""

from __future__ import annotations

import torch
import torch.autograd.forward_ad as native_fwAD
from hypothesis import strategies as st

from .state import DrawFn, GenState, Var, pick

KIND = "normalization or linear algebra"
MIN_SPREAD = 0.05
MIN_SINGULAR, MAX_SINGULAR = 0.5, 30.0
SHIFTS = (0, 2, 4, 8)
F = "torch.nn.functional"


def _primal(t: torch.Tensor) -> torch.Tensor:
    return native_fwAD.unpack_dual(t).primal.detach()


def _spread(groups: torch.Tensor) -> bool:
    """Each row (a normalized group) has two or more elements, spread out."""
    if groups.numel() == 0 or groups.shape[-1] < 2:
        return False
    return bool(groups.double().var(-1, unbiased=False).min() >= MIN_SPREAD)


def _norm_options(a: torch.Tensor) -> list[tuple[str, tuple]]:
    """(call with `{a}` and `{affine}`, the shape of weight and bias) for each
    normalization a's shape allows and whose groups a's primal spreads out."""
    p, out = _primal(a).double(), []
    if a.dim() >= 1 and p.numel():
        last = tuple(a.shape[-1:])
        if _spread(p.reshape(-1, a.shape[-1])):
            out.append((f"{F}.layer_norm({{a}}, {last}{{affine}})", last))
        if bool(p.square().mean(-1).min() >= MIN_SPREAD):  # rms: away from zero
            out.append((f"{F}.rms_norm({{a}}, {last}{{weight}})", last))
    if a.dim() >= 2 and p.numel():
        n, c = a.shape[0], a.shape[1]
        if _spread(p.transpose(0, 1).reshape(c, -1)):
            call = f"{F}.batch_norm({{a}}, None, None{{affine}}, training=True)"
            out.append((call, (c,)))
        for g in (1, 2):
            if c % g == 0 and _spread(p.reshape(n * g, -1)):
                out.append((f"{F}.group_norm({{a}}, {g}{{affine}})", (c,)))
    if a.dim() >= 3 and p.numel() and _spread(p.reshape(n * c, -1)):
        out.append((f"{F}.instance_norm({{a}}{{affine}})", (c,)))
    return out


def normalization(draw: DrawFn, state: GenState):
    """A recipe of one line: a normalization of a spread-out real variable."""
    a = pick(draw, state, lambda v: v.dtype.is_floating_point and v.ndim >= 1)
    if a is None:
        return
    options = _norm_options(a.tensor)
    if not options:
        return
    call, shape = draw(st.sampled_from(options))
    affine = ""
    w = pick(draw, state, lambda v: v.shape == shape and v.dtype == a.dtype)
    if w is not None and draw(st.booleans()):
        b = pick(draw, state, lambda v: v.shape == shape and v.dtype == a.dtype)
        bias = f", bias={b.name}" if b is not None and "rms_norm" not in call else ""
        affine = f", weight={w.name}{bias}"
    code = call.format(a=a.name, affine=affine, weight=affine)
    if (yield f"{state.fresh()} = {code}"):
        state.mark(KIND)


def _matrix(draw: DrawFn, a: Var) -> tuple[str, int, torch.Tensor] | None:
    """`a[..., :k, :k] + c * torch.eye(k)` well-conditioned at the primal, with
    its size and primal."""
    k = min(a.shape[-2:])
    if a.numel == 0:
        return None
    square = a.shape[-1] == a.shape[-2]
    block = "{a}" if square else f"{{a}}[..., :{k}, :{k}]"
    p = _primal(a.tensor)[..., :k, :k]
    first = draw(st.integers(0, len(SHIFTS) - 1))
    for c in SHIFTS[first:]:
        m = p + c * torch.eye(k, dtype=p.dtype)
        singular = torch.linalg.svdvals(m)
        if singular.min() >= MIN_SINGULAR and singular.max() <= MAX_SINGULAR:
            code = block if c == 0 else f"{block} + {c} * torch.eye({k})"
            return code.format(a=a.name), k, m
    return None


def linear_algebra(draw: DrawFn, state: GenState):
    """A recipe of one line: det, solve, inv... of a well-conditioned matrix."""
    a = pick(draw, state, lambda v: v.ndim >= 2)
    if a is None:
        return
    made = _matrix(draw, a)
    if made is None:
        return
    m_code, k, m = made
    options = [
        "torch.linalg.det({m})",
        "torch.det({m})",
        "torch.linalg.slogdet({m}).logabsdet",
        "torch.linalg.inv({m})",
        "torch.linalg.inv_ex({m}).inverse",
    ]
    if m.is_complex():
        options.append("torch.linalg.slogdet({m}).sign")
    elif bool((torch.linalg.det(m) > 0).all()):  # logdet's branch: a real log
        options.append("torch.logdet({m})")
    b = pick(
        draw,
        state,
        lambda v: v.ndim >= 1 and v.shape[-1] >= k and v.dtype == m.dtype,
    )
    if b is not None:
        rhs = b.name if b.shape[-1] == k else f"{b.name}[..., :{k}]"
        options += [
            f"torch.linalg.solve({{m}}, {rhs})",
            f"torch.linalg.solve_ex({{m}}, {rhs}).result",
        ]
        if m.dim() == 2 and b.ndim == 1:
            options.append(f"torch.linalg.tensorsolve({{m}}, {rhs})")
    code = draw(st.sampled_from(options)).format(m=m_code)
    if (yield f"{state.fresh()} = {code}"):
        state.mark(KIND)


LINALG = (normalization, linear_algebra)
