"""The rules for the attention kernels scaled_dot_product_attention dispatches to
on CUDA (flash, memory-efficient, cuDNN), proved on CPU through reference kernels
(tests/device_references/): the tangents of output and logsumexp against the
JVP of scaled_dot_product_attention on the math path (native forward AD) and
against central differences in float64, logsumexp's tangent in the kernel's own
layout (padded rows zero, cuDNN's trailing 1), both kernel backends; dropout is
refused with a clear error."""

from __future__ import annotations

import math

import pytest
import torch
import torch.autograd.forward_ad as native_fwAD
import torch.nn.functional as F

import dualgen.forward_ad as fwAD

aten = torch.ops.aten
# Proved on the CPU through its references, whatever the suite's device.
pytestmark = pytest.mark.usefixtures("on_the_cpu")

# (op, uses a bias, computes logsumexp) per kernel; the call takes q, k, v, bias.
KERNELS = {
    "flash": lambda q, k, v, bias, causal, lse, scale: aten._scaled_dot_product_flash_attention(
        q, k, v, 0.0, causal, False, scale=scale
    ),
    "efficient": lambda q, k, v, bias, causal, lse, scale: aten._scaled_dot_product_efficient_attention(
        q, k, v, bias, lse, 0.0, causal, scale=scale
    ),
    "cudnn": lambda q, k, v, bias, causal, lse, scale: aten._scaled_dot_product_cudnn_attention(
        q, k, v, bias, lse, 0.0, causal, False, scale=scale
    ),
}

# (B, H, Hk, L, S, E, bias shape or None, causal, compute logsumexp, scale)
CASES = {
    "plain": (2, 2, 2, 5, 7, 4, None, False, True, None),
    "causal": (1, 2, 2, 6, 6, 4, None, True, True, 0.6),
    "grouped-query": (1, 4, 2, 5, 7, 4, None, False, True, None),
    "bias": (2, 2, 2, 5, 7, 4, (2, 1, 5, 7), False, True, None),
    "bias-causal-no-lse": (1, 2, 2, 6, 6, 4, (6, 6), True, False, None),
    "long": (1, 1, 1, 40, 300, 8, None, False, True, None),  # padded rows, tiles
}


def _valid(kernel: str, case: str) -> bool:
    bias, lse = CASES[case][6], CASES[case][8]
    if kernel == "flash":
        return bias is None and lse
    return True


PARAMS = [(k, c) for k in KERNELS for c in CASES if _valid(k, c)]


def _inputs(case: str, seed: int = 0):
    B, H, Hk, L, S, E, bias_shape, causal, lse, scale = CASES[case]
    g = torch.Generator().manual_seed(seed)

    def rand(*shape):
        return torch.randn(*shape, generator=g, dtype=torch.float64)

    primals = [rand(B, H, L, E), rand(B, Hk, S, E), rand(B, Hk, S, E)]
    primals.append(rand(*bias_shape) if bias_shape else None)
    tangents = [None if p is None else rand(*p.shape) for p in primals]
    return primals, tangents, causal, lse, scale


def _math(q, k, v, bias, causal, scale):
    """(out, logsumexp) by scaled_dot_product_attention on the math path, with
    logsumexp written out."""
    heads = q.size(1)
    if k.size(1) != heads:
        k = k.repeat_interleave(heads // k.size(1), dim=1)
        v = v.repeat_interleave(heads // v.size(1), dim=1)
    mask, math_causal = bias, causal
    if causal and bias is not None:  # sdpa takes one or the other: join them
        above = torch.ones(q.size(2), k.size(2), dtype=torch.bool).triu(1)
        mask, math_causal = bias.masked_fill(above, -math.inf), False
    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH):
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, is_causal=math_causal, scale=scale
        )
    s = (
        q
        @ k.transpose(-2, -1)
        * (1 / math.sqrt(q.size(-1)) if scale is None else scale)
    )
    if bias is not None:
        s = s + bias
    if causal:
        s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool).triu(1), -math.inf)
    return out, torch.logsumexp(s, -1)


def _rows(lse_t, query):
    t = lse_t.squeeze(-1) if lse_t.dim() == 4 else lse_t
    return t.narrow(2, 0, query.size(2))


@pytest.mark.parametrize("kernel, case", PARAMS, ids=[f"{k}-{c}" for k, c in PARAMS])
def test_tangents_match_the_math_path_and_finite_differences(backend, kernel, case):
    primals, tangents, causal, want_lse, scale = _inputs(case)
    call = KERNELS[kernel]
    with fwAD.dual_level():
        duals = [
            None if p is None else fwAD.make_dual(p, t)
            for p, t in zip(primals, tangents)
        ]
        results = call(*duals, causal, want_lse, scale)
        out_t = fwAD.unpack_dual(results[0]).tangent
        lse_t = fwAD.unpack_dual(results[1]).tangent
    out, lse = results[0], results[1]
    assert out_t.shape == out.shape and lse_t.shape == lse.shape
    assert lse_t.dtype == lse.dtype

    # native forward AD through the math path
    with native_fwAD.dual_level():
        duals = [
            None if p is None else native_fwAD.make_dual(p, t)
            for p, t in zip(primals, tangents)
        ]
        math_out, math_lse = _math(*duals, causal, scale)
        expected_out_t = native_fwAD.unpack_dual(math_out).tangent
        expected_lse_t = native_fwAD.unpack_dual(math_lse).tangent
    torch.testing.assert_close(out_t, expected_out_t)
    if lse.numel() == 0:
        assert lse_t.numel() == 0
    else:
        torch.testing.assert_close(_rows(lse_t, primals[0]), expected_lse_t)
        # the padding past L (efficient attention) stays zero
        rows = lse_t.squeeze(-1) if lse_t.dim() == 4 else lse_t
        assert not rows.narrow(
            2, primals[0].size(2), rows.size(2) - primals[0].size(2)
        ).any()

    # central differences of the kernel itself
    eps = 1e-6

    def at(sign):
        moved = [
            None if p is None else p + sign * eps * t for p, t in zip(primals, tangents)
        ]
        return call(*moved, causal, want_lse, scale)

    plus, minus = at(1), at(-1)
    torch.testing.assert_close(
        out_t, (plus[0] - minus[0]) / (2 * eps), rtol=1e-5, atol=1e-6
    )
    if lse.numel():
        torch.testing.assert_close(
            lse_t, (plus[1] - minus[1]) / (2 * eps), rtol=1e-5, atol=1e-6
        )


FOR_PARAMS = [(k, c) for k, c in PARAMS if c != "long"]


@pytest.mark.parametrize(
    "kernel, case", FOR_PARAMS, ids=[f"{k}-{c}" for k, c in FOR_PARAMS]
)
def test_forward_over_reverse_matches_the_math_path(backend, kernel, case):
    """The gradient of out (torch's autograd, which calls the kernel's backward op:
    `_scaled_dot_product_*_attention_backward`) taken inside a level: its tangent
    against native forward over reverse through the math path and against central
    differences of the gradient. The bias gets a gradient from efficient attention
    only, as in torch."""
    primals, tangents, causal, _, scale = _inputs(case)
    call = KERNELS[kernel]
    differentiated = [p is not None for p in primals]
    if kernel == "cudnn":
        differentiated[3] = False
    g = torch.Generator().manual_seed(7)
    cotangent = torch.randn(
        primals[0].shape[:3] + primals[2].shape[-1:], generator=g, dtype=torch.float64
    )

    def gradient(values, api=None, tangents=None, math_path=False):
        leaves = [
            None if v is None else v.clone().requires_grad_(d)
            for v, d in zip(values, differentiated)
        ]
        inputs = leaves
        if api is not None:
            inputs = [
                None if v is None else api.make_dual(v, t)
                for v, t in zip(leaves, tangents)
            ]
        if math_path:
            out = _math(*inputs, causal, scale)[0]
        else:
            out = call(*inputs, causal, True, scale)[0]
        wrt = [v for v, d in zip(leaves, differentiated) if d]
        return torch.autograd.grad(out, wrt, cotangent)

    with fwAD.dual_level():
        grads = gradient(primals, fwAD, tangents)
        got = [fwAD.unpack_dual(t).tangent for t in grads]
    with native_fwAD.dual_level():
        grads = gradient(primals, native_fwAD, tangents, math_path=True)
        expected = [native_fwAD.unpack_dual(t).tangent for t in grads]
    torch.testing.assert_close(got, expected)

    eps = 1e-6
    plus, minus = (
        gradient([None if p is None else p + s * t for p, t in zip(primals, tangents)])
        for s in (eps, -eps)
    )
    fd = [(a - b) / (2 * eps) for a, b in zip(plus, minus)]
    torch.testing.assert_close(got, fd, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kernel", list(KERNELS))
def test_dropout_is_refused(backend, kernel):
    primals, tangents, *_ = _inputs("plain")
    q, k, v, _ = primals
    with fwAD.dual_level():
        dq = fwAD.make_dual(q, tangents[0])
        with pytest.raises(RuntimeError, match="dropout_p=0.1 draws random numbers"):
            if kernel == "flash":
                aten._scaled_dot_product_flash_attention(dq, k, v, 0.1)
            elif kernel == "efficient":
                aten._scaled_dot_product_efficient_attention(dq, k, v, None, True, 0.1)
            else:
                aten._scaled_dot_product_cudnn_attention(dq, k, v, None, True, 0.1)


def test_references_stay_out_of_the_package():
    """The reference kernels are the tests': nothing in dualgen imports them."""
    import dualgen

    root = __import__("pathlib").Path(dualgen.__file__).parent
    assert not any(
        "device_references" in path.read_text() for path in root.rglob("*.py")
    )


def test_validate_reports_a_device_only_op_and_checks_it_through_a_reference():
    """`dualgen validate` in a fresh process (no reference registered): the CUDA
    flash kernel has no CPU kernel, so it is reported as device-only, not failed;
    with `--import tests.device_references` it is checked like any kernel."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    op = "_scaled_dot_product_flash_attention"

    def validate(*extra):
        command = [sys.executable, "-m", "dualgen", "validate", "--no-progress"]
        done = subprocess.run(
            [*command, "--ops", op, *extra],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    bare = validate()
    assert (
        "0 pass, 0 fail, 0 have no derivatives to check, 1 run on devices only" in bare
    )
    assert "1 kernels: 1 pass, 0 fail" in validate(
        "--import", "tests.device_references"
    )
