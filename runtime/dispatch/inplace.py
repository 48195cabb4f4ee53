"""In-place ops: reading operands as they were, and updating self's tangent.

An in-place op's formula reads its other operands from before the update
(`separate_from_self`); its new tangent is written into self's tangent or given to
self (`update_self`), and a tangent whose elements share memory is written once
per location (`write_shared`). `functional_form` and `call_with` run the
functional op an in-place op's formulas come from. An in-place view op on a
tensor whose tangent is batched by vmap gives self the view of its tangent
taken out of place (`batched_view_tangent`).
"""

from __future__ import annotations

import torch

from ..dtypes import promoted_for_self
from ..layout import set_new_tangent
from ..levels import Level
from ..missing import qualified_name
from ..rules.rule import Rule
from ..rules.table import generated_kernels
from ..tangents import autograd_enabled
from .outputs import shared_with_inputs


def separate_from_self(primals: list, tangents: list, indices, self_tangent) -> None:
    """An in-place op's formula reads its other operands as they were before the
    update: any that shares memory with self (`x.mul_(x)`, `x[i] = x[j]` through
    a view) is read from a copy, and so is a tangent sharing memory with self's
    tangent, which the update writes into. Storage identity only: free unless
    operands overlap, and nothing to look up without tensor operands."""
    target = primals[0]
    if not isinstance(target, torch.Tensor):
        return
    memory = None
    for i in range(1, len(primals)):
        value = primals[i]
        if isinstance(value, torch.Tensor):
            if memory is None:
                memory = storage_key(target)
            if storage_key(value) == memory:
                with autograd_enabled():
                    primals[i] = value.clone()
    if self_tangent is None or len(tangents) < 2:
        return
    tangent_memory = storage_key(self_tangent)
    for j, (i, t) in enumerate(zip(indices, tangents)):
        shares = i != 0 and isinstance(t, torch.Tensor)
        if shares and storage_key(t) == tangent_memory:
            with autograd_enabled():
                tangents[j] = t.clone()


def storage_key(t: torch.Tensor) -> tuple[torch.device, int] | None:
    """Where t's elements lie: its memory's address, on its device (devices'
    addresses are their own). Without storage (batched by vmap): None, taken as
    shared."""
    if not torch._C._has_storage(t):
        return None
    return t.device, t.untyped_storage().data_ptr()


def run_inplace_tracked(func, target, primals: list, have_original: bool):
    """An in-place op whose formula reads its result, with autograd recording:
    its functional form runs once on self's old value, inside the graph, and the
    result is written into self. Returns self and the recorded result."""
    with autograd_enabled():
        before = primals[0] if have_original else target.clone()
        try:
            tracked = call_with(functional_form(func), [before, *primals[1:]])
        except RuntimeError:
            # Native autograd refuses some functional forms that it takes in
            # place (complex scatter_reduce): record the in-place op itself, on a
            # copy of self's old value. A functional op that raised changed nothing.
            tracked = before.clone()
            call_with(func, [tracked, *primals[1:]])
    target.copy_(tracked)  # below autograd: recorded by the layer above
    return target, (tracked,)


def call_with(func, values: list):
    """Call an op with its arguments in schema order (keyword-only ones by name)."""
    args, kwargs = [], {}
    for arg, value in zip(func._schema.arguments, values):
        if arg.kwarg_only:
            kwargs[arg.name] = value
        else:
            args.append(value)
    return func(*args, **kwargs)


def functional_form(func):
    """The functional op an in-place op's formulas come from (`aten.exp.default`
    for `aten.exp_.default`, `aten.pow.Tensor_Tensor` for `aten.pow_.Tensor`):
    the spec's entry where it names one, else the same name without `_`."""
    info = generated_kernels().get(func)
    if info is not None and info.derived_from:
        name, _, overload = info.derived_from.partition(".")
        return getattr(getattr(torch.ops.aten, name), overload or "default")
    schema = func._schema
    packet = getattr(torch.ops.aten, schema.name.split("::")[-1].rstrip("_"))
    return getattr(packet, schema.overload_name or "default")


def batched_view_tangent(func, primals: list, self_tangent: torch.Tensor):
    """The new tangent of self for an in-place view op (squeeze_, unsqueeze_,
    transpose_, t_, as_strided_) whose self's tangent is batched by vmap: the
    functional view op applied to the tangent, out of place. (Legacy vmap applies
    an in-place view op to a batched tensor's memory without changing the shape
    it shows, so the tangent would no longer fit its primal.) The view shares the
    tangent's memory, as the in-place op's tangent would. Ops whose functional
    form is no view (set_, resize_as_) are refused."""
    view = view_form(func)
    if view is None:
        name = qualified_name(func)
        raise RuntimeError(
            f"{name} of a tensor whose tangent is batched by vmap: vmap cannot "
            "apply this in-place op to a batched tangent. Compute the Jacobian "
            "column by column (chunk_size=1, vectorize=False)"
        )
    with autograd_enabled():
        return call_with(view, [self_tangent, *primals[1:]])


def view_form(func):
    """The out-of-place view op of an in-place view op (`aten.transpose.int` for
    `aten.transpose_.default`): the functional form, else the overload of the
    same name without `_` that takes the same arguments; None if it is no view."""
    try:
        view = functional_form(func)
    except AttributeError:  # the functional op has another overload name
        name = func._schema.name.split("::")[-1].rstrip("_")
        packet = getattr(torch.ops.aten, name, None)
        wanted = [str(a.type) for a in func._schema.arguments]
        view = None
        for overload in packet.overloads() if packet is not None else ():
            candidate = getattr(packet, overload)
            if [str(a.type) for a in candidate._schema.arguments] == wanted:
                view = candidate
                break
    return view if view is not None and view.is_view else None


def update_self(level: Level, self_value, self_tangent, new, promote, tangents) -> None:
    """An in-place op's tangent: written into self's tangent, or given to self.
    (A tangent whose elements share memory is written by `write_shared`.)"""
    if self_tangent is not None:
        if new is not self_tangent and not _has_shared_elements(self_tangent):
            if new is None:
                new = torch.zeros_like(self_tangent)
            elif new.dtype != self_tangent.dtype:
                # In self's tangent's dtype first: under an outer level the copy
                # would otherwise give self's tangent the value's tangent in the
                # value's dtype (copy_'s rule for a user's copy, not this one).
                new = new.to(self_tangent.dtype)
            self_tangent.copy_(new)
    elif new is not None:
        if promote:
            new = promoted_for_self(new, self_value, tangents)
        elif self_value.is_complex() and not new.is_complex():
            # A complex tensor gets a complex tangent (native keeps copy_'s real
            # one, and then cannot take the tensor's .real or .imag).
            with autograd_enabled():
                new = new.to(self_value.dtype)
        elif not self_value.is_complex() and new.is_complex():
            # A real tensor gets a real tangent: the real part, in the
            # tangent's precision (native keeps the complex one as it is).
            new = new.real
        # A formula that reduced to an operand's tangent (copy_: `src_t`) must
        # not make self share that operand's tangent.
        fresh = (shared_with_inputs((new,), tangents) or (False,))[0]
        if fresh:
            # Native computes it anew (zeros in self's dtype plus the operand's
            # tangent): contiguous, in the promoted dtype, kept where self is
            # contiguous, else copied into self's layout and dtype.
            with autograd_enabled():
                contiguous = new.contiguous()
            fresh, new = contiguous is new, contiguous
        set_new_tangent(self_value, level, new, fresh)


def writes_shared(func, self_tangent) -> bool:
    """Whether an in-place op's new tangent must be written location by
    location (`write_shared`): self's tangent has elements that share memory
    and the op writes values. An in-place view op (unsqueeze_, t_, as_strided_)
    writes none: its formula already gave self's tangent the new geometry, and
    probing it again (`written_positions`) would apply that geometry twice."""
    return (
        self_tangent is not None
        and torch.Tag.inplace_view not in func.tags
        and _has_shared_elements(self_tangent)
    )


def _has_shared_elements(t: torch.Tensor) -> bool:
    """Whether elements of t share memory (a stride-0 dimension of size > 1)."""
    return any(n > 1 and not s for n, s in zip(t.shape, t.stride()))


def written_positions(rule: Rule, primals, tangents, outputs) -> torch.Tensor:
    """Where an in-place op writes self (fill_, masked_fill_ and index_put_ may
    write memory whose elements alias): the positions its formula does not take
    from self's tangent, found by running it once more with self's tangent NaN."""
    like = tangents[0]
    sentinel = torch.full(
        like.shape, float("nan"), dtype=like.dtype, device=like.device
    )
    probe = rule.call(primals, [sentinel, *tangents[1:]], outputs)
    if probe is None:
        return torch.ones(like.shape, dtype=torch.bool, device=like.device)
    return ~probe.isnan()


def write_shared(target: torch.Tensor, value, written: torch.Tensor) -> None:
    """Write an in-place op's new tangent into a tangent whose elements share
    memory: each location once, from the first of its elements the op writes
    (so a location keeps a write made through any of its aliases), or as it is
    where the op writes none."""
    if value is None:
        value = torch.zeros(target.shape, dtype=target.dtype, device=target.device)
    merged = torch.where(written, value.to(target.dtype), target)
    for d, (n, stride) in enumerate(zip(target.shape, target.stride())):
        if n > 1 and not stride:
            first = written.to(torch.int8).argmax(d, keepdim=True)
            merged, written = merged.gather(d, first), written.gather(d, first)
            target = target.narrow(d, 0, 1)
    target.copy_(merged)
