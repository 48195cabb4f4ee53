"""Steps that take a view: the tangent of a view must be the same view of its base's
tangent, also after either of them is updated in place, and also where the view
changes the dtype (`.real`, `.imag`, `view_as_real`, `view_as_complex`) or the
conjugate bit (`conj`).
"""

from __future__ import annotations

from hypothesis import strategies as st

from .state import DrawFn, GenState, Var, pick, pick_dim


def _templates(a: Var) -> list[str]:
    """View expressions valid (or nearly: the generator drops failures) for `a`."""
    out = ["{a}.view(-1)", "{a}.reshape(-1)", "{a}.unsqueeze({d})", "{a}.squeeze()"]
    out += ["{a}.view_as({a})", "{a}.conj()", "{a}.real"]
    if a.ndim >= 1:
        out += ["{a}.flatten()", "{a}[1:]", "{a}[..., ::2]", "{a}.narrow({d}, 0, 1)"]
        out += ["{a}.movedim(0, -1)", "{a}.split(1, {d})[0]", "{a}.chunk(2, {d})[-1]"]
        if a.shape[0] > 0:
            out += ["{a}[{i}]", "{a}.select(0, {i})", "{a}.unbind(0)[{i}]"]
        if a.ndim <= 2:
            out.append("{a}.t()")
        out.append("{a}.expand({expanded})")
    if a.ndim >= 2:
        out += ["{a}.transpose(0, 1)", "{a}.mT", "{a}.diagonal()", "{a}.diagonal(1)"]
        out += ["{a}[:, 1:]", "{a}.permute({perm})", "{a}.reshape({reversed})"]
    if a.is_complex:
        out += ["{a}.imag", "torch.view_as_real({a})", "{a}.conj().imag"]
        out += ["{a}.conj().real", "torch.view_as_real({a}.conj().resolve_conj())"]
    elif a.ndim >= 1 and a.shape[-1] == 2:
        out += ["torch.view_as_complex({a})"]
    out.append("{a}.expand(2, *{a}.shape)")
    return out


def view(draw: DrawFn, state: GenState) -> str | None:
    a = pick(draw, state)
    template = draw(st.sampled_from(_templates(a)))
    d = pick_dim(draw, a)
    i = draw(st.integers(0, max(a.shape[0] - 1, 0))) if a.ndim else 0
    expanded = ", ".join(str(2 if n == 1 else n) for n in a.shape) or "2"
    perm = ", ".join(str(p) for p in reversed(range(a.ndim)))
    reversed_shape = ", ".join(str(n) for n in reversed(a.shape))
    code = template.format(
        a=a.name, d=d, i=i, expanded=expanded, perm=perm, reversed=reversed_shape
    )
    return f"{state.fresh()} = {code}"


VIEWS = (view,)
