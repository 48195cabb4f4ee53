"""The torch internals dualgen relies on (dualgen.torch_features): each is found
on the installed torch, a feature whose internal is missing says so (torch's
version and the internal) at its entry point, and the table covers every
`torch._C._...` name and private torch import the runtime uses."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest
import torch

import dualgen
import dualgen.forward_ad as fwAD
from dualgen import torch_features
from dualgen.levels import STATE
from dualgen.tools.check.formula import dotted_path
from dualgen.torch_features import INTERNALS, UnsupportedTorch

RUNTIME = Path(__file__).resolve().parents[2] / "runtime"
NAMES = {i.name for i in INTERNALS}


@pytest.fixture
def lacking(monkeypatch):
    """`lacking(name)`: from now on the named internal's probe finds nothing."""

    def lack(name: str) -> None:
        assert name in NAMES, name
        table = tuple(
            dataclasses.replace(i, probe=lambda: False) if i.name == name else i
            for i in INTERNALS
        )
        monkeypatch.setattr(torch_features, "INTERNALS", table)
        torch_features._forget()

    yield lack
    torch_features._forget()


def _names(internal_name: str, feature: str) -> str:
    """What the message must contain (as a regex)."""
    import re

    return (
        re.escape(torch_features.FEATURES[feature])
        + r" needs .*"
        + re.escape(internal_name)
        + r".*which torch "
        + re.escape(torch.__version__)
        + " lacks"
    )


# (a) the installed torch has everything


@pytest.mark.parametrize("internal", INTERNALS, ids=lambda i: i.name)
def test_the_installed_torch_has_the_internal(internal):
    distributed_only = {"collectives", "dtensor"} >= set(internal.features)
    if distributed_only and not torch.distributed.is_available():
        pytest.skip("this torch is built without torch.distributed")
    torch_features._forget()
    assert torch_features.present(internal), (
        f"torch {torch.__version__} lacks {internal.name} "
        f"({internal.description}), needed by {internal.features}"
    )


def test_every_feature_is_usable_and_the_report_says_so():
    torch_features._forget()
    torch_features.check_import()
    torch_features.require(*torch_features.FEATURES)
    assert torch_features.missing() == []
    assert torch_features.report_line() == "torch internals: all found"


def test_every_internal_names_known_features():
    for internal in INTERNALS:
        assert internal.features, internal.name
        assert set(internal.features) <= set(torch_features.FEATURES), internal.name
        assert internal.description, internal.name


# (b) a missing internal fails its feature, naming torch's version and it


def test_a_dual_level_needs_the_dispatch_key_sets(lacking):
    name = "torch._C._dispatch_tls_local_exclude_set"
    lacking(name)
    with (
        pytest.raises(UnsupportedTorch, match=_names(name, "dual_level")),
        fwAD.dual_level(),
    ):
        pass
    assert not STATE.levels and STATE.mode is None  # nothing half entered
    torch_features._forget()
    torch_features.INTERNALS = INTERNALS  # (the fixture restores it too)
    with fwAD.dual_level():
        x = fwAD.make_dual(torch.ones(2), torch.ones(2))
        assert torch.equal(fwAD.unpack_dual(x.exp()).tangent, torch.ones(2).exp())


def test_a_dual_level_needs_the_custom_function_hooks(lacking):
    name = "torch._C._FunctionBase.to_save"
    lacking(name)
    with pytest.raises(UnsupportedTorch, match=_names(name, "custom_function")):
        fwAD.enter_dual_level()
    assert not STATE.levels and STATE.mode is None


def test_the_missing_internal_is_a_runtime_error(lacking):
    lacking("torch._C._is_fwd_grad_enabled")
    with pytest.raises(RuntimeError, match=r"torch \S+ lacks"):
        torch_features.require("dual_level")


def test_fx_needs_make_fx_s_decomposition_table(lacking):
    from dualgen import fx

    name = "torch.fx.experimental.proxy_tensor.make_fx's decomposition_table argument"
    lacking(name)
    with pytest.raises(UnsupportedTorch, match=_names(name, "fx")) as raised:
        fx.jvp(torch.sin, (torch.ones(2),), (torch.ones(2),))
    assert str(raised.value).startswith(
        "dualgen.fx needs torch.fx.experimental.proxy_tensor.make_fx's "
        f"decomposition_table argument, which torch {torch.__version__} lacks"
    )


def test_gradcheck_needs_the_internal_overlap_check(lacking):
    name = "torch._debug_has_internal_overlap"
    lacking(name)
    x = torch.randn(3, dtype=torch.double, requires_grad=True)
    with pytest.raises(UnsupportedTorch, match=_names(name, "gradcheck")):
        dualgen.gradcheck(torch.sin, (x,))
    with pytest.raises(UnsupportedTorch, match=_names(name, "gradcheck")):
        dualgen.gradgradcheck(torch.sin, (x,))


@pytest.mark.parametrize(
    ("name", "module", "feature"),
    [
        ("torch._C._functorch.maybe_current_level", "func", "func"),
        ("torch.autograd.functional._validate_v", "functional", "functional"),
        ("torch.distributed.Work.boxed", "distributed", "collectives"),
    ],
)
def test_the_lazy_modules_need_theirs(lacking, name, module, feature):
    lacking(name)
    with pytest.raises(UnsupportedTorch, match=_names(name, feature)):
        dualgen.__getattr__(module)


def test_an_internal_with_a_fallback_is_reported_not_required(lacking):
    name = "torch._C._dynamo.eval_frame.get_eval_frame_callback"
    lacking(name)
    torch_features.require("dual_level")
    assert [i.name for i in torch_features.missing()] == [name]
    assert torch_features.report_line() == (
        f"torch internals missing: {name} (dual_level)"
    )


def test_import_time_internals_are_checked_at_import(lacking):
    name = "torch.utils._python_dispatch._push_mode"
    lacking(name)
    with pytest.raises(UnsupportedTorch, match=rf"^dualgen needs {name}, which"):
        torch_features.check_import()


def test_probes_run_once(monkeypatch):
    calls = []
    first = dataclasses.replace(INTERNALS[0], probe=lambda: calls.append(1) or True)
    monkeypatch.setattr(torch_features, "INTERNALS", (first, *INTERNALS[1:]))
    torch_features._forget()
    try:
        for _ in range(3):
            torch_features.missing()
            torch_features.require(*first.features)
        assert calls == [1]
    finally:
        torch_features._forget()


# (c) the table covers what the runtime uses


def _private(path: str) -> bool:
    return any(p.startswith("_") and not p.startswith("__") for p in path.split("."))


def _used_internals() -> dict[str, str]:
    """Every `torch._C._xxx...` attribute chain, and every name imported from a
    private torch module (or private name imported from torch), by where it is
    used first."""
    used: dict[str, str] = {}
    for path in sorted(RUNTIME.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        where = str(path.relative_to(RUNTIME.parent))
        parents = {
            child: node
            for node in ast.walk(tree)
            for child in ast.iter_child_nodes(node)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and not isinstance(
                parents.get(node), ast.Attribute
            ):
                parts = dotted_path(node)  # a.b.c as ["a", "b", "c"], else None
                if parts and ".".join(parts).startswith("torch._C._"):
                    # up to a dunder (`torch._C._FunctionBase.__dict__[...]`)
                    kept = []
                    for part in parts:
                        if part.startswith("__"):
                            break
                        kept.append(part)
                    used.setdefault(".".join(kept), f"{where}:{node.lineno}")
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "torch"
            ):
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    if _private(full):
                        used.setdefault(full, f"{where}:{node.lineno}")
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith("torch") and _private(alias.name):
                        used.setdefault(alias.name, f"{where}:{node.lineno}")
    return used


def _covered(used: str) -> bool:
    return any(
        name == used
        or name.startswith((used + ".", used + "'s "))  # (a signature's detail)
        or used.startswith(name + ".")
        for name in NAMES
    )


def test_the_table_covers_every_private_torch_name_the_runtime_uses():
    used = _used_internals()
    assert "torch._C._is_fwd_grad_enabled" in used  # (the walk finds them)
    assert "torch.utils._python_dispatch._push_mode" in used
    uncovered = {name: where for name, where in used.items() if not _covered(name)}
    assert not uncovered, (
        "torch internals the runtime uses with no probe in "
        f"dualgen.torch_features.INTERNALS: {uncovered}"
    )
