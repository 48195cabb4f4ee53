"""Outputs a derivative program computes for nothing.

Aten's backward ops take an `output_mask` (`convolution_backward`,
`native_batch_norm_backward`, `native_layer_norm_backward`, ...): output i is
computed only where mask[i] is true. A VJP kernel states the mask of autograd's
formula (every gradient its op can have), but in a program the parameters of a
module are often constants: their gradients are never read. Where an output of
such a node has no user, its mask entry becomes false, and the op skips its
work (for a convolution, the weight's and the bias's gradients: two of its three
products). Nothing read changes.
"""

from __future__ import annotations

import operator

import torch
import torch.fx


def prune_output_masks(gm: torch.fx.GraphModule) -> None:
    """Turn off, in place, the mask entries of outputs nothing reads."""
    changed = False
    for node in gm.graph.nodes:
        position = _mask_position(node)
        if position is None:
            continue
        mask = node.args[position] if position < len(node.args) else None
        if not isinstance(mask, (list, tuple)) or not all(
            isinstance(m, bool) for m in mask
        ):
            continue
        read = _outputs_read(node)
        if read is None:
            continue
        pruned = [m and i in read for i, m in enumerate(mask)]
        if pruned != list(mask):
            args = list(node.args)
            args[position] = pruned
            node.args = tuple(args)
            changed = True
    if changed:
        gm.recompile()


def _mask_position(node: torch.fx.Node) -> int | None:
    """Where `node`'s op takes an output_mask of one flag per output, if it does."""
    op = node.target
    if node.op != "call_function" or not isinstance(op, torch._ops.OpOverload):
        return None
    schema = op._schema
    for i, argument in enumerate(schema.arguments):
        if argument.name == "output_mask" and not argument.kwarg_only:
            return i if str(argument.type) == "List[bool]" else None
    return None


def _outputs_read(node: torch.fx.Node) -> set | None:
    """The output positions something reads, if every use picks one by index."""
    read = set()
    for user in node.users:
        if user.op != "call_function" or user.target is not operator.getitem:
            return None
        if user.users:
            read.add(user.args[1])
    return read
