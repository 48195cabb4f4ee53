"""What a test left behind: the autouse fixtures of the side-by-side test modules
call `release_levels` after each test, so a leaked level fails that test only."""

from __future__ import annotations

import torch
import torch.autograd.forward_ad as native_fwAD
from torch.utils._python_dispatch import _get_current_dispatch_mode

import dualgen.forward_ad as dual_fwAD
from dualgen.levels import STATE


def release_levels() -> list[str]:
    """Exit every level left active (dualgen and native), re-enable forward grad
    mode and say what was left; also fails if a dispatch mode stays pushed."""
    leaked = []
    while STATE.levels:
        leaked.append(f"dualgen level {len(STATE.levels) - 1}")
        dual_fwAD.exit_dual_level()
    while native_fwAD._current_level >= 0:
        leaked.append(f"native level {native_fwAD._current_level}")
        native_fwAD.exit_dual_level()
    if not torch._C._is_fwd_grad_enabled():
        leaked.append("forward grad mode left disabled")
        torch._C._set_fwd_grad_enabled(True)
    assert _get_current_dispatch_mode() is None, "a dispatch mode is left pushed"
    return leaked
