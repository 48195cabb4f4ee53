"""In-place kernels derived from an entry whose `self` is non-differentiable.

The runtime passes a kernel the tangents of its differentiable inputs only, so
such a kernel has no `self_t`: self's new tangent is the formula's value from the
other tangents, as in the out-of-place program `self = op(self, other)`. (It
once branched on `self_t` anyway: a NameError, and an auto_linear formula that
applied the in-place op to the tangents updated self's primal.)
"""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
import torch

from dualgen.tools.cli import generate_files
from dualgen.tools.validate import load_kernels

REPO = Path(__file__).resolve().parents[2]

ATAN2_SELF = "  self: unbroadcast(grad * other / (self * self + other * other), self)\n"
ATAN2_RESULT = (
    "  result: (self_t * other_p - other_t * self_p) / "
    "(self_p * self_p + other_p * other_p)\n"
)
MUL_SELF = "  self: unbroadcast(grad * other.conj(), self)\n"
MUL_RESULT = (
    "  result: other_t * self_p + self_t * other_p  # (native's order: the first "
    "term lays out the sum, whose layout decides a mixed-dtype tangent's dtype)\n"
)
IGAMMA = """\
- name: igamma(Tensor self, Tensor other) -> Tensor
  sample: self=positive, other=positive
  non_differentiable: [self]
  other: unbroadcast(grad * torch.exp((self - 1) * other.log() - other - torch.lgamma(self)), other)
  result: torch.exp((self_p - 1) * other_p.log() - other_p - torch.lgamma(self_p)) * other_t

"""


def _scratch_spec(path: Path) -> None:
    """The real spec with self non-differentiable in atan2 (a formula) and
    mul.Tensor (auto_linear; mul_.Tensor inherits it), and igamma added."""
    text = (REPO / "derivatives.yaml").read_text(encoding="utf-8")
    non_differentiable = "  non_differentiable: [self]\n"
    edits = [
        (ATAN2_SELF, non_differentiable),
        (
            ATAN2_RESULT,
            "  result: -other_t * self_p / (self_p * self_p + other_p * other_p)\n",
        ),
        (MUL_SELF, non_differentiable),
        (MUL_RESULT, "  result: auto_linear\n"),
        ("- name: mvlgamma(", IGAMMA + "- name: mvlgamma("),
    ]
    for old, new in edits:
        assert text.count(old) == 1, f"the real spec changed: {old!r}"
        text = text.replace(old, new)
    path.write_text(text, encoding="utf-8")


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    spec = tmp_path_factory.mktemp("inplace_nondiff") / "x.yaml"
    _scratch_spec(spec)
    files = generate_files(spec).files
    return files, load_kernels(files)


OPS = {
    "atan2_": (torch.ops.aten.atan2_.default, torch.atan2),
    "mul_.Tensor": (torch.ops.aten.mul_.Tensor, torch.mul),
    "igamma_": (torch.ops.aten.igamma_.default, torch.igamma),
}


def _values(shape_other=(3, 4)):
    gen = torch.Generator().manual_seed(0)
    s = torch.rand(3, 4, generator=gen, dtype=torch.float64) + 1.5
    o = torch.rand(shape_other, generator=gen, dtype=torch.float64) + 0.5
    t = torch.randn(shape_other, generator=gen, dtype=torch.float64)
    u = torch.randn(3, 4, generator=gen, dtype=torch.float64)
    return s, o, t, u


def _out_of_place_tangent(function, s, o, t):
    """The tangent of `function(s, o)` along `t` on `o`: native's where it has a
    rule, central differences for igamma (native has none)."""
    if function is torch.igamma:
        h = 1e-6
        return (function(s, o + h * t) - function(s, o - h * t)) / (2 * h)
    return torch.func.jvp(lambda x: function(s, x), (o,), (t,))[1]


@pytest.mark.parametrize("name", OPS)
def test_the_kernel_takes_the_tangents_of_the_differentiable_inputs(generated, name):
    files, kernels = generated
    op, _ = OPS[name]
    info = kernels[op]
    assert info.kind == "inplace" and info.differentiable_inputs == ("other",)
    params = list(inspect.signature(info.jvp).parameters)
    assert params == ["self_p", "other_p", "other_t", "result"]
    jvp_py = files["jvp.py"]
    start = jvp_py.index(f"def {info.jvp.__name__}(")
    source = jvp_py[start : jvp_py.index("\n\n\n", start)]
    assert "self_t" not in source
    # Never the in-place op on the tangents: it would update self's primal.
    assert f"aten.{name.split('.')[0]}." not in source
    # The C++ twin declares and reads no self_t either.
    (shard,) = [
        text
        for path, text in files.items()
        if path.startswith("cpp/jvp_") and f"Results {info.jvp.__name__}(" in text
    ]
    start = shard.index(f"Results {info.jvp.__name__}(")
    kernel = shard[start : shard.index("\n}\n", start)]
    assert "self_t" not in kernel


@pytest.mark.parametrize("shape_other", [(3, 4), (4,)])
@pytest.mark.parametrize("name", OPS)
def test_the_kernel_gives_the_out_of_place_programs_tangent(
    generated, name, shape_other
):
    _, kernels = generated
    op, function = OPS[name]
    info = kernels[op]
    s, o, t, _ = _values(shape_other)
    expected = _out_of_place_tangent(function, s, o, t)
    self_p = s.clone()
    result = op(s.clone(), o)
    got = info.jvp(self_p, o, t.clone(), result)
    assert got.shape == result.shape
    torch.testing.assert_close(got, expected, rtol=1e-6, atol=1e-8)
    assert torch.equal(self_p, s), "the kernel updated self's primal"
    assert info.jvp(self_p, o, None, result) is None


@pytest.mark.parametrize("self_has_tangent", [False, True])
@pytest.mark.parametrize("name", OPS)
def test_the_runtime_gives_self_the_out_of_place_programs_tangent(
    generated, name, self_has_tangent
):
    """`self.op_(other)` with a tangent on other: self's tangent is that of
    `op(self, other)`, whatever tangent self had (it does not enter)."""
    import dualgen.forward_ad as fwAD
    from dualgen.rules import using_kernels

    _, kernels = generated
    op, function = OPS[name]
    s, o, t, u = _values()
    expected = _out_of_place_tangent(function, s, o, t)
    with using_kernels(kernels), fwAD.dual_level():
        x = fwAD.make_dual(s.clone(), u.clone()) if self_has_tangent else s.clone()
        op(x, fwAD.make_dual(o, t))
        tangent = fwAD.unpack_dual(x).tangent
    torch.testing.assert_close(tangent, expected, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("name", OPS)
def test_self_keeps_no_stale_tangent(generated, name):
    """`self.op_(other)` without a tangent on other: self's value is overwritten,
    so its tangent becomes zero, as native's (`x.fill_(v)`) and as the out-of-place
    program's, whose result has none."""
    import dualgen.forward_ad as fwAD
    from dualgen.rules import using_kernels

    _, kernels = generated
    op, _ = OPS[name]
    s, o, _, u = _values()
    with using_kernels(kernels), fwAD.dual_level():
        x = fwAD.make_dual(s.clone(), u.clone())
        op(x, o)
        tangent = fwAD.unpack_dual(x).tangent
    assert tangent is None or not tangent.any()
