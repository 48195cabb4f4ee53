"""Jacobians by forward mode through `dualgen.forward_ad`, for `dualgen.functional`.

Reads a function of tensors and the (already preprocessed) tensors it is taken at;
produces the Jacobian blocks `d output_i / d input_j`, each of shape
`output_i.shape + input_j.shape`, either in one pass with batched tangents (the
standard basis under torch's legacy vmap, as torch's own forward-mode `jacobian`
does, by `dualgen.forward_columns`, which `dualgen.func` uses too) or
in one pass per column (one input dual at a time, so a block no
tangent reaches is known, which strict mode needs).

Also the gradient functions that forward-over-reverse differentiates: the gradient
of a scalar function by `torch.autograd.grad` inside a dual level, whose tangent is
a Hessian-vector product.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch.autograd.functional import (
    _as_tuple,
    _autograd_grad,
    _check_requires_grad,
)

from .. import forward_ad as fwAD
from ..forward_columns import basis, push_batched

Tensors = tuple[torch.Tensor, ...]
# A function of dual tensors: (whether it returned a tuple, its outputs as a tuple).
Evaluate = Callable[..., tuple[bool, Tensors]]


@dataclass(frozen=True)
class DualPass:
    """One run of a function under a dual level: its outputs' primals and tangents
    (None where no tangent reached an output)."""

    is_outputs_tuple: bool
    primals: Tensors
    tangents: tuple[torch.Tensor | None, ...]

    def tangents_or_zeros(self) -> Tensors:
        return tuple(
            torch.zeros_like(p) if t is None else t
            for p, t in zip(self.primals, self.tangents)
        )


@dataclass(frozen=True)
class ForwardJacobian:
    """`blocks[i][j]` is d output_i / d input_j. Column by column, `reached[i][j]`
    says every column of input j gave output i a tangent and `tracked[i][j]` that
    each such tangent requires grad; with batched tangents both are unknown (None)."""

    is_outputs_tuple: bool
    blocks: tuple[Tensors, ...]
    reached: tuple[tuple[bool, ...], ...] | None
    tracked: tuple[tuple[bool, ...], ...] | None


def dual_pass(
    evaluate: Evaluate,
    inputs: Sequence[torch.Tensor],
    directions: Sequence[torch.Tensor | None],
) -> DualPass:
    """Run `evaluate` on `inputs`, each made dual with its direction (left plain
    where the direction is None), and unpack the outputs inside the level."""
    with fwAD.dual_level():
        duals = tuple(
            x if t is None else fwAD.make_dual(x, t) for x, t in zip(inputs, directions)
        )
        is_tuple, outputs = evaluate(*duals)
        unpacked = [fwAD.unpack_dual(out) for out in outputs]
    return DualPass(
        is_tuple, tuple(u.primal for u in unpacked), tuple(u.tangent for u in unpacked)
    )


def forward_jacobian(
    evaluate: Evaluate, inputs: Tensors, *, vectorize: bool
) -> ForwardJacobian:
    """The Jacobian of `evaluate` at `inputs` by forward mode."""
    if vectorize:
        return _batched_jacobian(evaluate, inputs)
    return _jacobian_by_columns(evaluate, inputs)


def _batched_jacobian(evaluate: Evaluate, inputs: Tensors) -> ForwardJacobian:
    """Every column in one pass: the standard basis as one batched tangent."""
    numels = tuple(x.numel() for x in inputs)
    columns_of_inputs = basis(inputs, numels, 0, sum(numels), batched=True)
    passes: list[DualPass] = []  # the (unbatched) primals, for the output shapes

    def columns(*chunks: torch.Tensor) -> Tensors:
        result = dual_pass(evaluate, inputs, chunks)
        passes.append(result)
        return result.tangents_or_zeros()

    stacked = push_batched(columns, columns_of_inputs)
    first = passes[0]
    # The batch dimension runs over the inputs' elements: it goes last.
    blocks = tuple(
        tuple(
            part.movedim(0, -1).reshape(out.shape + x.shape)
            for part, x in zip(columns_of_i.split(numels), inputs)
        )
        for columns_of_i, out in zip(stacked, first.primals)
    )
    return ForwardJacobian(first.is_outputs_tuple, blocks, None, None)


def _jacobian_by_columns(evaluate: Evaluate, inputs: Tensors) -> ForwardJacobian:
    """One pass per column, only the input the column belongs to made dual."""
    passes: list[list[DualPass]] = []
    for j, x in enumerate(inputs):
        directions: list[torch.Tensor | None] = [None] * len(inputs)
        of_input = []
        for index in range(x.numel()):
            (directions[j],) = basis([x], [x.numel()], index, index + 1, False)
            of_input.append(dual_pass(evaluate, inputs, directions))
        passes.append(of_input)
    template = next((p[0] for p in passes if p), None)
    if template is None:  # no input has an element: the outputs give the shapes
        template = dual_pass(evaluate, inputs, [None] * len(inputs))
    return _assemble(template, passes, inputs)


def _assemble(
    template: DualPass, passes: list[list[DualPass]], inputs: Tensors
) -> ForwardJacobian:
    """The blocks from the columns of each input (`passes[j]`), and which blocks
    every column reached with a tangent, one that requires grad."""
    filled = [[p.tangents_or_zeros() for p in of_input] for of_input in passes]
    blocks, reached, tracked = [], [], []
    for i, out in enumerate(template.primals):
        tangents = [[p.tangents[i] for p in of_input] for of_input in passes]
        blocks.append(
            tuple(
                _block(out, x, [columns[i] for columns in of_input])
                for x, of_input in zip(inputs, filled)
            )
        )
        reached.append(tuple(all(t is not None for t in ts) for ts in tangents))
        tracked.append(
            tuple(all(t is None or t.requires_grad for t in ts) for ts in tangents)
        )
    return ForwardJacobian(
        template.is_outputs_tuple, tuple(blocks), tuple(reached), tuple(tracked)
    )


def _block(
    out: torch.Tensor, x: torch.Tensor, columns: list[torch.Tensor]
) -> torch.Tensor:
    if not columns:  # an input without elements
        return out.new_zeros(out.shape + x.shape)
    return torch.stack(columns, dim=-1).reshape(out.shape + x.shape)


# --------------------------------------------------------------------------------------
# Forward over reverse: the gradient whose tangent is a Hessian-vector product


def check_scalar_output(output: object, fn_name: str, strict: bool) -> torch.Tensor:
    """torch's checks on the function given to hessian / hvp / vhp, in its order."""
    is_tuple, outputs = _as_tuple(
        output, "outputs of the user-provided function", fn_name
    )
    _check_requires_grad(outputs, "outputs", strict=strict)
    if is_tuple or not isinstance(output, torch.Tensor):
        raise RuntimeError(
            f"The function given to {fn_name} should return a single Tensor"
        )
    if output.nelement() != 1:
        raise RuntimeError(
            f"The Tensor returned by the function given to {fn_name} should contain "
            "a single element"
        )
    return output


@dataclass(frozen=True)
class HessianGradient:
    """The gradient of a scalar `func`, which hessian's outer Jacobian
    differentiates, with torch's checks on `func` and on the gradient (its inner
    Jacobian, zeros where the output does not depend on an input). `record` keeps
    the gradient's graph (create_graph, or strict: it asks whether the gradient
    requires grad)."""

    func: Callable[..., object]
    strict: bool
    record: bool

    def __call__(self, *duals: torch.Tensor) -> tuple[bool, Tensors]:
        output = check_scalar_output(self.func(*duals), "hessian", self.strict)
        grads = _autograd_grad((output,), duals, create_graph=self.record)
        # A gradient that is None has no tangent: its Hessian blocks are zero.
        filled = tuple(
            torch.zeros(x.shape, dtype=x.dtype, device=x.device) if g is None else g
            for g, x in zip(grads, duals)
        )
        _check_requires_grad(filled, "jacobian", strict=self.strict)
        return True, filled


def check_outer_jacobian(jacobian: ForwardJacobian, create_graph: bool) -> None:
    """torch's strict checks of the outer Jacobian, gradient i against input k."""
    assert jacobian.reached is not None and jacobian.tracked is not None
    for i, (reached, tracked) in enumerate(zip(jacobian.reached, jacobian.tracked)):
        for k, (has_tangent, requires_grad) in enumerate(zip(reached, tracked)):
            if not has_tangent:
                raise RuntimeError(
                    f"Output {i} of the user-provided function is independent of "
                    f"input {k}. This is not allowed in strict mode."
                )
            if create_graph and not requires_grad:
                raise RuntimeError(
                    "The jacobian of the user-provided function is independent of "
                    f"input {i}. This is not allowed in strict mode when "
                    "create_graph=True."
                )
