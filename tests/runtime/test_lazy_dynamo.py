"""Dual ops and the tape do not import torch._dynamo (seconds on first use).

torch wraps a dispatch mode's `__torch_dispatch__` in `torch._disable_dynamo`,
which imports torch._dynamo on the first call and clears Dynamo's eval-frame
callback around every call; `mode.disabling_dynamo_only_while_active` runs the
function directly while no callback is set, and through torch's wrapper while one
is. Each check runs in a fresh interpreter.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap


def _run(code: str) -> None:
    subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _check(code: str) -> None:
    try:
        _run(code)
    except subprocess.CalledProcessError as e:
        raise AssertionError(e.stderr) from None


def test_dual_ops_do_not_import_dynamo():
    _check("""
        import sys
        import torch
        import dualgen
        import dualgen.forward_ad as fwAD

        assert "torch._dynamo" not in sys.modules
        x = torch.randn(3)
        with fwAD.dual_level():
            y = fwAD.make_dual(x, torch.ones(3)).sin().mul(2)
            t = fwAD.unpack_dual(y).tangent
        torch.testing.assert_close(t, 2 * x.cos())
        assert "torch._dynamo" not in sys.modules, "a dual op imported torch._dynamo"
        """)


def test_tape_does_not_import_dynamo():
    _check("""
        import sys
        import torch
        from dualgen.harness.tape import Tape

        x = torch.randn(3)
        with Tape() as tape:
            tape.watch(x)
            y = x.sin()
        (g,) = tape.grad(y, x, torch.ones(3))
        torch.testing.assert_close(g, x.cos())
        assert "torch._dynamo" not in sys.modules, "the tape imported torch._dynamo"
        """)


def test_torchs_wrapper_only_while_dynamo_is_active():
    """With torch._dynamo imported but idle, dispatch calls the function itself;
    with an eval-frame callback set, it goes through torch's `_disable_dynamo`
    wrapper (which imports torch._dynamo and clears the callback)."""
    _check("""
        import torch
        import torch._dynamo
        import dualgen.forward_ad as fwAD
        from dualgen.dispatch.mode import DualMode

        x = torch.randn(3)
        with fwAD.dual_level():
            y = fwAD.make_dual(x, torch.ones(3)).cos()
            t = fwAD.unpack_dual(y).tangent
        # torch's wrapper caches Dynamo's disabled function on its first call
        raw = DualMode.__dict__["__torch_dispatch__"].__wrapped__
        assert getattr(raw, "__dynamo_disable", None) is None, "torch's wrapper ran"
        torch.testing.assert_close(t, -x.sin())
        """)
    _check("""
        import torch
        import dualgen.forward_ad as fwAD
        from dualgen.dispatch import mode
        from dualgen.dispatch.mode import DualMode

        mode._eval_frame_callback = lambda: "a callback"  # as while compiling
        x = torch.randn(3)
        with fwAD.dual_level():
            y = fwAD.make_dual(x, torch.ones(3)).cos()
            t = fwAD.unpack_dual(y).tangent
        raw = DualMode.__dict__["__torch_dispatch__"].__wrapped__
        assert getattr(raw, "__dynamo_disable", None) is not None, "not through torch's"
        torch.testing.assert_close(t, -x.sin())
        """)
