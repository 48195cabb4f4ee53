"""Dual ops and the tape do not import torch._dynamo (seconds on first use).

torch wraps a dispatch mode's `__torch_dispatch__` in `torch._disable_dynamo`,
which imports torch._dynamo on the first call; `mode.importing_dynamo_lazily` runs
the function directly until something else has imported it, then hands the class
back to torch's wrapper. Each check runs in a fresh interpreter.
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
        from dualgen.tape import Tape

        x = torch.randn(3)
        with Tape() as tape:
            tape.watch(x)
            y = x.sin()
        (g,) = tape.grad(y, x, torch.ones(3))
        torch.testing.assert_close(g, x.cos())
        assert "torch._dynamo" not in sys.modules, "the tape imported torch._dynamo"
        """)


def test_torchs_wrapper_once_dynamo_is_imported():
    """After torch._dynamo is imported (within a level too) dispatch goes through
    torch's `_disable_dynamo` wrapper again, as without the deferral."""
    _check("""
        import torch
        import dualgen.forward_ad as fwAD
        from dualgen.mode import DualMode

        deferring = DualMode.__dict__["__torch_dispatch__"]
        x = torch.randn(3)
        with fwAD.dual_level():
            d = fwAD.make_dual(x, torch.ones(3))
            d.sin()
            assert DualMode.__dict__["__torch_dispatch__"] is deferring
            import torch._dynamo

            y = d.cos()
            wrapper = DualMode.__dict__["__torch_dispatch__"]
            assert wrapper is not deferring
            assert wrapper.__module__ == DualMode.__module__
            assert wrapper.__code__.co_filename.endswith("_compile.py")
            assert getattr(wrapper.__wrapped__, "__dynamo_disable", None) is not None
            t = fwAD.unpack_dual(y).tangent
        torch.testing.assert_close(t, -x.sin())
        """)
