"""`dualgen.load_kernels`: a kernel package generated from a library's own spec
(docs/custom_ops.md) is added beside the installed kernels. Loading twice changes
nothing, a user rule still wins, unloading restores what was there, and a loaded
kernel for an aten op replaces the installed one, in Python under either backend.
"""

from __future__ import annotations

import sys

import pytest
import torch
from mylib_example import PACKAGE, SOFTCLIP, mylib
from torch.testing import assert_close

import dualgen
import dualgen.forward_ad as fwAD
from dualgen import rules
from dualgen.hot_path import policy as hot_path
from dualgen.tools.cli import generate_files


@pytest.fixture
def unload():
    """Packages the test loads; unloaded afterwards."""
    names = []
    yield names
    for name in (*names, PACKAGE):
        dualgen.unload_kernels(name)
    dualgen.unregister_jvp(SOFTCLIP)


def _tangent(f, x, v):
    with fwAD.dual_level():
        return fwAD.unpack_dual(f(fwAD.make_dual(x, v))).tangent


def _derivative(x, limit=1.0):
    return 1 - torch.tanh(x / limit) ** 2


def test_without_the_package_the_error_prints_the_entry(unload):
    x = torch.randn(3)
    with pytest.raises(NotImplementedError) as raised:
        _tangent(mylib.softclip, x, torch.ones(3))
    message = str(raised.value)
    assert "dualgen has no forward-mode (JVP) rule for mylib::softclip" in message
    assert "dualgen.load_kernels" in message and "register_jvp" in message
    assert message.endswith(
        "- name: mylib::softclip(Tensor x, float limit=1.) -> Tensor\n"
        "  sample: x=any(3, 4)\n"
        "  x: <gradient of x, from grad>\n"
        "  result: <tangent, from x_t>"
    )


def test_loading_twice_is_harmless_and_unloading_restores(unload):
    x, v = torch.randn(3, dtype=torch.float64), torch.randn(3, dtype=torch.float64)
    assert dualgen.load_kernels(PACKAGE) == (SOFTCLIP,)
    rule = rules.rule_for(SOFTCLIP)
    import mylib._derivatives as package

    assert dualgen.load_kernels(package) == (SOFTCLIP,)  # the module works too
    assert rules.rule_for(SOFTCLIP) is rule
    assert rules.loaded_packages() == (PACKAGE,)
    assert rule.origin == f"{PACKAGE} entry mylib::softclip"
    assert_close(_tangent(mylib.softclip, x, v), v * _derivative(x))
    dualgen.unload_kernels(PACKAGE)
    assert rules.rule_for(SOFTCLIP) is None
    with pytest.raises(NotImplementedError):
        _tangent(mylib.softclip, x, v)


def test_a_user_rule_wins_over_a_loaded_kernel(unload):
    dualgen.load_kernels(PACKAGE)

    @dualgen.register_jvp(SOFTCLIP)
    def doubled(x_p, x_t):
        return 2 * x_t

    x, v = torch.randn(3, dtype=torch.float64), torch.randn(3, dtype=torch.float64)
    assert_close(_tangent(mylib.softclip, x, v), 2 * v)
    dualgen.unregister_jvp(SOFTCLIP)
    assert_close(_tangent(mylib.softclip, x, v), v * _derivative(x))


def test_a_loaded_aten_kernel_replaces_the_installed_one(unload, tmp_path):
    """A package's kernel for an aten op (here a deliberately scaled `sin`) is
    the one that runs, in Python, while it is loaded; then the installed one."""
    spec = tmp_path / "derivatives.yaml"
    spec.write_text(
        "- name: sin(Tensor self) -> Tensor\n"
        "  self: grad * self.cos().conj() * 3\n"
        "  result: self_t * self_p.cos() * 3\n"
    )
    package = tmp_path / "dualgen_loaded_sin"
    package.mkdir()
    for name, text in generate_files(spec).files.items():
        if name.endswith(".py"):
            (package / name).write_text(text)
    sys.path.insert(0, str(tmp_path))
    try:
        unload.append(package.name)
        dualgen.load_kernels(package.name)
    finally:
        sys.path.remove(str(tmp_path))
    x, v = torch.randn(4, dtype=torch.float64), torch.randn(4, dtype=torch.float64)
    assert_close(_tangent(torch.sin, x, v), 3 * v * x.cos())
    assert hot_path.describe(torch.ops.aten.sin.default) is None
    assert rules.generated_kernels()[torch.ops.aten.sin.default].cpp_kernel is None
    dualgen.unload_kernels(package.name)
    assert_close(_tangent(torch.sin, x, v), v * x.cos())


def test_a_table_under_test_wins_over_a_loaded_package(unload):
    """`using_kernels` (what `dualgen validate` runs under) keeps the loaded
    packages for the ops its table lacks, and its own kernels for the others."""
    from mylib._derivatives.registry import KERNELS

    from dualgen.generated.registry import KERNELS as INSTALLED

    dualgen.load_kernels(PACKAGE)
    sin = torch.ops.aten.sin.default
    with rules.using_kernels({sin: INSTALLED[sin]}):
        table = rules.generated_kernels()
        assert table[sin] is INSTALLED[sin]
        assert table[SOFTCLIP].jvp is KERNELS[SOFTCLIP].jvp
        x = torch.randn(3, dtype=torch.float64)
        assert_close(_tangent(mylib.softclip, x, torch.ones_like(x)), _derivative(x))


def test_a_package_loaded_under_a_table_under_test_stays_loaded(unload):
    with rules.using_kernels({}):
        dualgen.load_kernels(PACKAGE)
    assert rules.rule_for(SOFTCLIP) is not None
    x = torch.randn(3, dtype=torch.float64)
    assert_close(_tangent(mylib.softclip, x, torch.ones_like(x)), _derivative(x))
