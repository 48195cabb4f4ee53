"""Higher-order operators (torch._higher_order_ops) under the dual mode: one with
a dense eager implementation in aten ops runs it under the mode, so dualgen's aten
rules differentiate it (the user's functions inside included); any other raises
a clear error, as an op without a rule does.

flex_attention (torch.nn.attention.flex_attention) is the one users reach in
eager: its dense implementation computes the scores, applies the user's
score_mod and mask_mod (vmapped), and the softmax, holding the L x S scores as
torch's own eager path does."""

from __future__ import annotations

import sys

import torch


def _flex_attention_dense():
    from torch._higher_order_ops.flex_attention import sdpa_dense

    return sdpa_dense


# name -> (a function returning) its dense implementation, found on first use.
_DENSE = {"flex_attention": _flex_attention_dense}


def dispatch_higher_order(mode, hop, args, kwargs):
    dense = _DENSE.get(hop.name())
    if dense is None:
        raise NotImplementedError(
            f"dualgen has no forward-mode rule for the higher-order operator "
            f"{hop.name()} (torch._higher_order_ops); call its function outside "
            f"the dual level, or write the computation in plain torch ops"
        )
    with mode:
        return dense()(*args, **kwargs)


def flex_attention_transparent(
    query,
    key,
    value,
    fw_graph,
    bw_graph,
    block_mask,
    scale,
    kernel_options,
    mask_mod_other_buffers,
    *score_mod_other_buffers,
):
    """flex_attention's autograd Function (what runs where an input requires grad)
    as plain code while a level is active: its forward is the dense attention of
    fw_graph (the traced score_mod), which the mode and autograd then follow op by
    op; bw_graph, its hand-made backward, is left aside (native forward AD raises
    here: the Function has no jvp)."""
    return _flex_attention_dense()(
        query,
        key,
        value,
        fw_graph,
        block_mask,
        scale,
        kernel_options,
        tuple(score_mod_other_buffers),
        tuple(mask_mod_other_buffers),
    )


def is_higher_order(func) -> bool:
    return isinstance(func, torch._ops.HigherOrderOperator)


# flex_attention in eager wraps its operator in torch.compile (backend "eager",
# fullgraph) to trace score_mod, and Dynamo refuses to trace under a dispatch mode
# that is not torch's own: while a level is active, its module's switch for
# calling the operator directly is on (results are the same; the compiled call
# only traces). Set at the outermost level's entry, restored at its exit.
_FLEX_MODULE = "torch.nn.attention.flex_attention"
_FLEX_SWITCH = "_FLEX_ATTENTION_DISABLE_COMPILE_DEBUG"
_flex_switch_before: list = []


def flex_attention_uncompiled() -> None:
    module = sys.modules.get(_FLEX_MODULE)
    if module is None or not hasattr(module, _FLEX_SWITCH):
        _flex_switch_before.append(None)
        return
    _flex_switch_before.append(getattr(module, _FLEX_SWITCH))
    setattr(module, _FLEX_SWITCH, True)


def flex_attention_as_before() -> None:
    before = _flex_switch_before.pop() if _flex_switch_before else None
    module = sys.modules.get(_FLEX_MODULE)
    if before is not None and module is not None:
        setattr(module, _FLEX_SWITCH, before)
