"""The helpers of dualgen.formulas.attention (the CPU flash-attention kernel and
its backward, the device kernels behind scaled_dot_product_attention and their
backward kernels) against torch's autograd and forward AD of attention written out
(softmax(scale q k^T + mask) v, logsumexp), float64; the kernels refuse complex.
The lower kernels' are in test_formulas_attention_lower.py."""

from __future__ import annotations

import device_references as references
import pytest
import torch
from formula_checks import R, close, jvp, vjp

from dualgen import formulas as F

FLASH = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
FLASH_BACKWARD = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


# (query shape, key heads, S, mask shape or None, is_causal, scale)
CASES = [
    ((2, 2, 3, 4), 2, 5, None, False, None),
    ((1, 4, 4, 4), 2, 3, None, True, 0.7),  # grouped-query, causal with L > S
    ((2, 2, 3, 4), 2, 5, (3, 5), False, None),
    ((2, 2, 3, 4), 1, 5, (2, 1, 3, 5), True, 0.5),
    # Several (query block, key block) tiles: 256 keys and, with 8 batch-heads,
    # 128 query rows per tile; the last blocks are shorter, causal tiles above
    # the diagonal are skipped.
    ((2, 4, 300, 8), 2, 600, None, True, None),
    ((1, 8, 200, 8), 8, 530, (1, 1, 1, 530), False, 0.3),  # key padding
    ((1, 8, 260, 8), 4, 300, (260, 300), True, None),
    ((1, 8, 600, 4), 8, 300, (1, 8, 600, 300), True, None),  # causal, L > S
]


def _inputs(case):
    (b, h, l, e), hk, s, mask_shape, causal, scale = case
    q = torch.randn(b, h, l, e, dtype=R)
    k, v = torch.randn(b, hk, s, e, dtype=R), torch.randn(b, hk, s, e, dtype=R)
    mask = None if mask_shape is None else torch.randn(mask_shape, dtype=R)
    return q, k, v, mask, causal, scale


def _scores(q, k, mask, causal, scale):
    kk = k.repeat_interleave(q.size(1) // k.size(1), 1)
    sc = q.size(-1) ** -0.5 if scale is None else scale
    s = q @ kk.transpose(-2, -1) * sc
    if mask is not None:
        s = s + mask
    if causal:
        keep = torch.ones(s.shape[-2:], dtype=torch.bool).tril()
        s = s.masked_fill(~keep, float("-inf"))
    return s


def reference(q, k, v, mask, causal, scale):
    """Attention written out: (P v, logsumexp) with P = softmax(S)."""
    s = _scores(q, k, mask, causal, scale)
    vv = v.repeat_interleave(q.size(1) // v.size(1), 1)
    return torch.softmax(s, -1) @ vv, torch.logsumexp(s, -1)


def reference_backward(g, q, k, v, o, lse, mask, causal, scale):
    """The backward kernel written out, out and logsumexp taken as given."""
    group = q.size(1) // k.size(1)
    kk, vv = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    sc = q.size(-1) ** -0.5 if scale is None else scale
    p = (_scores(q, k, mask, causal, scale) - lse.unsqueeze(-1)).exp()
    ds = p * (g @ vv.transpose(-2, -1) - (g * o).sum(-1, keepdim=True))
    b, hk, s, e = k.shape
    gk = (ds.transpose(-2, -1) @ q * sc).reshape(b, hk, group, s, e).sum(2)
    gv = (p.transpose(-2, -1) @ g).reshape(b, hk, group, s, e).sum(2)
    return ds @ kk * sc, gk, gv


@pytest.mark.parametrize("case", CASES)
def test_flash_attention_forward_matches_reference(case):
    q, k, v, mask, causal, scale = _inputs(case)
    out, lse = FLASH(q, k, v, 0.0, causal, attn_mask=mask, scale=scale)
    ref_out, ref_lse = reference(q, k, v, mask, causal, scale)
    close(out, ref_out)
    close(lse, ref_lse)


@pytest.mark.parametrize("case", CASES)
def test_flash_attention_tangent_matches_forward_ad(case):
    q, k, v, mask, causal, scale = _inputs(case)
    out, lse = FLASH(q, k, v, 0.0, causal, attn_mask=mask, scale=scale)
    primals = [q, k, v] + ([] if mask is None else [mask])
    tangents = [torch.randn_like(t) for t in primals]

    def fn(q, k, v, m=None):
        return reference(q, k, v, m, causal, scale)

    expected = jvp(fn, primals, tangents)
    mt = tangents[3] if mask is not None else None
    actual = F.flash_attention_tangent(
        *tangents[:3], mt, q, k, v, mask, out, lse, 0.0, causal, scale
    )
    assert len(actual) == 2
    for index in (0, 1):
        close(actual[index], expected[index])


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("which", ["both", "output", "logsumexp"])
def test_flash_attention_grads_match_autograd(case, which):
    q, k, v, mask, causal, scale = _inputs(case)
    out, lse = FLASH(q, k, v, 0.0, causal, attn_mask=mask, scale=scale)
    g_out = None if which == "logsumexp" else torch.randn_like(out)
    g_lse = None if which == "output" else torch.randn_like(lse)
    primals = [q, k, v] + ([] if mask is None else [mask])

    def fn(q, k, v, m=None):
        o, l = reference(q, k, v, m, causal, scale)
        total = 0
        if g_out is not None:
            total = total + (o * g_out).sum()
        if g_lse is not None:
            total = total + (l * g_lse).sum()
        return total

    expected = vjp(fn, primals, torch.tensor(1.0, dtype=R))
    actual = F.flash_attention_grads(
        g_out, g_lse, q, k, v, mask, out, lse, 0.0, causal, scale
    )
    for a, e in zip(actual, expected):
        close(a, e)
    assert (actual[3] is None) == (mask is None)


def test_a_row_masked_everywhere_has_zero_derivatives():
    q, k, v, _, _, _ = _inputs(CASES[0])
    mask = torch.zeros(3, 5, dtype=R)
    mask[1] = float("-inf")
    out, lse = FLASH(q, k, v, 0.0, False, attn_mask=mask)
    assert out[:, :, 1].abs().max() == 0 and lse[:, :, 1].abs().max() == 0
    ts = [torch.randn_like(t) for t in (q, k, v, mask)]
    for t in F.flash_attention_tangent(*ts, q, k, v, mask, out, lse, 0.0, False, None):
        assert torch.isfinite(t).all() and t[:, :, 1].abs().max() == 0
    grads = F.flash_attention_grads(
        torch.randn_like(out),
        torch.randn_like(lse),
        q,
        k,
        v,
        mask,
        out,
        lse,
        0.0,
        False,
        None,
    )
    assert all(torch.isfinite(g).all() for g in grads)
    assert grads[3][1].abs().max() == 0


@pytest.mark.parametrize("case", CASES)
def test_flash_attention_backward_matches_reference(case):
    q, k, v, mask, causal, scale = _inputs(case)
    g, o = torch.randn_like(q), torch.randn_like(q)
    lse = torch.randn(q.shape[:3], dtype=R)
    actual = FLASH_BACKWARD(
        g, q, k, v, o, lse, 0.0, causal, attn_mask=mask, scale=scale
    )
    for a, e in zip(
        actual, reference_backward(g, q, k, v, o, lse, mask, causal, scale)
    ):
        close(a, e)


def _backward_primals(case):
    q, k, v, mask, causal, scale = _inputs(case)
    g, o = torch.randn_like(q), torch.randn_like(q)
    lse = torch.randn(q.shape[:3], dtype=R)
    return [g, q, k, v, o, lse] + ([] if mask is None else [mask]), mask, causal, scale


@pytest.mark.parametrize("case", CASES)
def test_flash_attention_backward_tangent_matches_forward_ad(case):
    primals, mask, causal, scale = _backward_primals(case)
    tangents = [torch.randn_like(t) for t in primals]

    def fn(g, q, k, v, o, lse, m=None):
        return reference_backward(g, q, k, v, o, lse, m, causal, scale)

    expected = jvp(fn, primals, tangents)
    mt = tangents[6] if mask is not None else None
    for index in range(3):
        actual = F.flash_attention_backward_tangent(
            index, *tangents[:6], mt, *primals[:6], mask, 0.0, causal, scale
        )
        close(actual, expected[index])


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize(
    "present", [(True, True, True), (True, False, False), (False, True, True)]
)
def test_flash_attention_backward_grads_match_autograd(case, present):
    primals, mask, causal, scale = _backward_primals(case)
    cots = [torch.randn_like(t) if p else None for t, p in zip(primals[1:4], present)]

    def fn(g, q, k, v, o, lse, m=None):
        outs = reference_backward(g, q, k, v, o, lse, m, causal, scale)
        return sum((x * c).sum() for x, c in zip(outs, cots) if c is not None)

    expected = vjp(fn, primals, torch.tensor(1.0, dtype=R))
    actual = F.flash_attention_backward_grads(
        *cots, *primals[:6], mask, 0.0, causal, scale
    )
    for a, e in zip(actual, expected):
        close(a, e)
    assert (actual[6] is None) == (mask is None)


def test_dropout_is_refused():
    q, k, v, _, _, _ = _inputs(CASES[0])
    out, lse = FLASH(q, k, v)
    with pytest.raises(RuntimeError, match="dropout_p=0.1 draws random numbers"):
        F.flash_attention_tangent(
            q, k, v, None, q, k, v, None, out, lse, 0.1, False, None
        )
    with pytest.raises(RuntimeError, match="only dropout_p=0 is differentiable"):
        F.flash_attention_grads(out, None, q, k, v, None, out, lse, 0.5, False, None)
    with pytest.raises(RuntimeError, match="no derivative"):
        F.flash_attention_backward_tangent(
            0,
            out,
            q,
            k,
            v,
            out,
            lse,
            None,
            out,
            q,
            k,
            v,
            out,
            lse,
            None,
            0.1,
            False,
            None,
        )
    with pytest.raises(RuntimeError, match="no derivative"):
        F.flash_attention_backward_grads(
            out, None, None, out, q, k, v, out, lse, None, 0.1, False, None
        )


# The device kernels' logsumexp layouts: (B, H, L) (flash), rows padded to a
# multiple of 32 (efficient attention), a trailing 1 (cuDNN), none computed.
def _lse_layout(lse, layout):
    if layout == "rows":
        return lse
    if layout == "padded":
        rows = -(-lse.size(2) // 32) * 32
        padding = lse.new_zeros(*lse.shape[:2], rows - lse.size(2))
        return torch.cat([lse, padding], 2)
    if layout == "trailing-one":
        return lse.unsqueeze(-1)
    return lse.new_zeros(*lse.shape[:2], 0)  # "none"


LAYOUTS = ["rows", "padded", "trailing-one", "none"]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("case", CASES[:4])
def test_device_attention_tangent_in_each_logsumexp_layout(case, layout):
    """The tangents of the CUDA kernels' outputs: forward AD through attention
    written out, logsumexp's tangent laid out as the kernel's logsumexp (zero
    padding; nothing where none was computed)."""
    q, k, v, mask, causal, scale = _inputs(case)
    out, lse = reference(q, k, v, mask, causal, scale)
    kernel_lse = _lse_layout(lse, layout)
    primals = [q, k, v] + ([] if mask is None else [mask])
    tangents = [torch.randn_like(t) for t in primals]
    expected = jvp(
        lambda *a: reference(*a[:3], a[3] if len(a) > 3 else None, causal, scale),
        primals,
        tangents,
    )
    mt = tangents[3] if mask is not None else None
    out_t, lse_t = F.device_attention_tangent(
        *tangents[:3], mt, q, k, v, mask, out, kernel_lse, 0.0, causal, scale
    )
    close(out_t, expected[0])
    assert lse_t.shape == kernel_lse.shape
    if layout != "none":
        close(_lse_layout(expected[1], layout), lse_t)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("case", CASES[:4])
def test_device_attention_grads_are_the_adjoint_of_the_tangent(case, layout):
    """device_attention_grads pairs with device_attention_tangent: <grads, t> =
    <g, tangents> for the gradients of output and logsumexp (in its layout)."""
    q, k, v, mask, causal, scale = _inputs(case)
    out, lse = reference(q, k, v, mask, causal, scale)
    kernel_lse = _lse_layout(lse, layout)
    primals = [q, k, v] + ([] if mask is None else [mask])
    tangents = [torch.randn_like(t) for t in primals]
    g_out = torch.randn_like(out)
    g_lse = None if layout == "none" else torch.randn_like(kernel_lse)
    if g_lse is not None and layout == "padded":
        g_lse[:, :, lse.size(2) :] = 0  # no gradient reaches padding
    mt = tangents[3] if mask is not None else None
    out_t, lse_t = F.device_attention_tangent(
        *tangents[:3], mt, q, k, v, mask, out, kernel_lse, 0.0, causal, scale
    )
    grads = F.device_attention_grads(
        g_out, g_lse, q, k, v, mask, out, kernel_lse, 0.0, causal, scale
    )
    pairs = [(g, t) for g, t in zip(grads, tangents) if g is not None]
    lhs = sum(float((g * t).sum()) for g, t in pairs)
    rhs = float((g_out * out_t).sum())
    if g_lse is not None:
        rhs += float((g_lse * lse_t).sum())
    assert abs(lhs - rhs) <= 1e-8 * max(1.0, abs(rhs))


# (query shape, key heads, S, bias shape or None, is_causal, logsumexp layout)
DEVICE_BACKWARD = [
    ((1, 2, 3, 4), 2, 5, None, False, "rows"),  # flash
    ((1, 4, 4, 4), 2, 4, None, True, "rows"),
    ((2, 2, 3, 4), 2, 5, (2, 2, 3, 5), False, "padded"),  # efficient
    ((1, 2, 4, 4), 2, 4, (4, 4), True, "padded"),
    ((1, 2, 3, 4), 1, 5, (1, 1, 3, 5), False, "trailing"),  # cuDNN
]


def _device_backward_inputs(case):
    (b, h, l, e), hk, s, bias_shape, causal, layout = case
    q, out, g = (torch.randn(b, h, l, e, dtype=R) for _ in range(3))
    k, v = (torch.randn(b, hk, s, e, dtype=R) for _ in range(2))
    lse = torch.randn(b, h, {"rows": l, "padded": 32, "trailing": l}[layout], dtype=R)
    if layout == "trailing":
        lse = lse.unsqueeze(-1)
    bias = None if bias_shape is None else torch.randn(*bias_shape, dtype=R)
    return [g, q, k, v, out, lse, bias], causal


def _device_backward(g, q, k, v, out, lse, bias, causal):
    """The backward kernels written out (tests/device_references/), with the
    bias's gradient (dS summed to its shape) where there is a bias."""
    rows = lse.squeeze(-1) if lse.dim() == 4 else lse[..., : q.size(2)]
    gq, gk, gv, ds = references.attention_backward(
        g, q, k, v, out, rows, bias, causal, 0.5
    )
    return (gq, gk, gv) if bias is None else (gq, gk, gv, ds.sum_to_size(bias.shape))


@pytest.mark.parametrize("case", DEVICE_BACKWARD)
def test_device_attention_backward_tangents_and_grads(case):
    values, causal = _device_backward_inputs(case)
    has_bias = values[6] is not None
    primals = values if has_bias else values[:6]
    tangents = [torch.randn_like(p) for p in primals]

    def backward(*args):
        return _device_backward(*args, *([None] if not has_bias else []), causal)

    expected = jvp(backward, primals, tangents)
    bias_t = tangents[6] if has_bias else None
    for index in range(3):
        got = F.device_attention_backward_tangent(
            index, *tangents[:6], bias_t, *values, 0.0, causal, 0.5
        )
        close(got, expected[index])
    if has_bias:
        result = torch.zeros_like(values[6])
        got = F.device_attention_backward_bias_tangent(
            result, *tangents[:6], bias_t, *values, causal, 0.5
        )
        close(got, expected[3])
        assert (
            F.device_attention_backward_bias_tangent(
                None, *tangents[:6], bias_t, *values, causal, 0.5
            )
            is None
        )

    outputs = backward(*primals)
    cotangents = [torch.randn_like(o) for o in outputs]
    expected = vjp(backward, primals, cotangents)
    g, q, k, v, out, lse, bias = values
    got = F.device_attention_backward_grads_with_bias(
        *cotangents[:3],
        cotangents[3] if has_bias else None,
        g,
        q,
        k,
        v,
        bias,
        out,
        lse,
        0.0,
        causal,
        0.5,
    )
    order = [0, 1, 2, 3, 5, 6] + (
        [4] if has_bias else []
    )  # schema order: bias after value
    close([got[i] for i in order], list(expected))
    if not has_bias:
        plain = F.device_attention_backward_grads(
            *cotangents[:3], g, q, k, v, out, lse, 0.0, causal, 0.5
        )
        close(list(plain), [got[i] for i in (0, 1, 2, 3, 5, 6)])
