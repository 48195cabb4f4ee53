"""Collectives of duals: each value and its tangent in one message.

Inside a dual level, every collective over floating-point or complex tensors
carries tangents. Each tensor `x` is sent packed with its tangent at the level
(zeros where `x` has none: `packing.py` says how, by the collective's kind), the
collective runs once on the packed tensors, and what arrives is split again into
the value and its tangent. A linear collective commutes with the packing, so
one message carries both, and ranks agree on every message whether or not their
tensors have tangents: a rank whose tensor has none sends zeros and receives
the others' tangents. The rule is SPMD code's: every rank of a group issues its
collectives inside a dual level (the same levels), or none does. MAX, MIN and
PRODUCT reductions go through `by_element.py`.

Under nested levels the packed tensors carry the outer levels' tangents, so the
packing nests, still one message. A c10d op returns when issued, as the plain
one does: its Work writes what arrived when waited for (`deferred.py`). A dual
whose value and tangent already lie side by side is sent as it lies, with no
packing copies (`packing.side_by_side`). Functional collectives return
tensors already waited for.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch.distributed.distributed_c10d import _world

from ..dispatch.inplace import call_with
from ..dispatch.op_arguments import bind
from ..layout import is_batched
from ..levels import STATE, set_tangent
from ..tangents import handling_levels_below, is_differentiable_dtype, tangent_of
from . import by_element
from .deferred import deferred, finish_arrived
from .packing import HALVES, SCRATCH, packing_for, side_by_side
from .reduce import BITWISE, BY_ELEMENT, kind_of
from .table import NO_DATA, PASSES_THROUGH, collective
from .values import flat, new_value, tangent_or_zeros, write_value

_wait_tensor = None


def run(mode, func, args, kwargs):
    """`func`, a collective, at the innermost level the mode handles now."""
    level = STATE.levels[STATE.cap]
    entry = collective(func)
    finish_arrived()
    if entry is NO_DATA or (entry is None and not _differentiable(args, kwargs)):
        return _plainly(mode, func, args, kwargs, level)
    if entry is None:
        raise NotImplementedError(
            f"dualgen: no forward-AD rule for the collective {func.name()}: its "
            "tensors' tangents would be lost. Run it outside the dual level, on "
            "tensors unpacked with unpack_dual"
        )
    if entry is PASSES_THROUGH:
        return _passed_through(mode, func, args, kwargs, level)
    values = bind(func._schema, args, kwargs)
    where = _positions(func)
    sent = [t for name in entry.reads + entry.writes for t in flat(values[where[name]])]
    if not any(is_differentiable_dtype(t) for t in sent):
        return _plainly(mode, func, args, kwargs, level)
    if "process_group" in where and _coalescing(values[where["process_group"]], sent):
        raise NotImplementedError(
            f"dualgen: {func.name()} of duals inside a coalescing region "
            "(batch_isend_irecv or _coalescing_manager on a backend that coalesces, "
            "such as NCCL): the region's one Work replaces the op's, which writes "
            "the tangents. Issue the ops one by one (isend / irecv, async_op=True) "
            "and wait for each"
        )
    kind = kind_of(values[where[entry.reduce]]) if entry.reduce else "sum"
    if kind in BITWISE:
        raise RuntimeError(
            f"dualgen: {func.name()} with ReduceOp.{kind.upper()} of a floating-point "
            "tensor inside a dual level: a bitwise reduction has no derivative"
        )
    for t in sent:
        tangent = tangent_of(t, level) if is_differentiable_dtype(t) else None
        if tangent is not None and is_batched(tangent):
            raise NotImplementedError(
                f"dualgen: {func.name()} of a tensor whose tangent is batched (vmap): "
                "collectives carry one tangent per tensor; run one JVP per direction"
            )
    with handling_levels_below(level, mode):
        if kind in BY_ELEMENT:
            return by_element.run(func, entry, values, where, kind, level)
        return _packed(func, entry, values, where, level)


def _packed(func, entry, values: list, where: dict, level):
    packing = packing_for(entry)
    packs: dict = {}  # id(the caller's tensor) -> the packed tensor sent for it
    # Level 0 and a collective that writes: the packed tensors are ours alone
    # until what arrived is copied out (a send's are its Work's).
    reuse = packing is HALVES and level.index == 0 and bool(entry.writes)
    taken = []  # (tensor, index, scratch buffer) to give back
    as_they_lie = set()  # ids of tensors sent and written in their own memory

    def lying_side_by_side(t):
        # (Level 0 only: at others the outer levels' tangents would need to lie so.)
        if packing is not HALVES or level.index != 0 or not is_differentiable_dtype(t):
            return None
        whole = side_by_side(t, tangent_of(t, level))
        if whole is not None:
            as_they_lie.add(id(t))
        return whole

    def sent(t):
        if id(t) not in packs:
            packed = lying_side_by_side(t)
            if packed is None:
                out = None
                if reuse:
                    out = SCRATCH.take(t, len(taken))
                    taken.append((t, len(taken), out))
                packed = packing.pack(t, tangent_or_zeros(t, level), out)
            packs[id(t)] = packed
        return packs[id(t)]

    def buffer(t):
        if id(t) not in packs:
            packed = lying_side_by_side(t)
            packs[id(t)] = packing.empty(t) if packed is None else packed
        return packs[id(t)]

    lifted = list(values)
    for name in entry.reads:
        lifted[where[name]] = _mapped(values[where[name]], sent)
    for name in entry.writes:
        lifted[where[name]] = _mapped(values[where[name]], buffer)
    out = call_with(func, lifted)
    if entry.returns_new:
        return _new_values(packing, wait_tensors(out), entry, values, where, level)
    if not entry.writes:  # a send: it does not wait (its peer may not have
        return out  # reached its recv yet)
    written = [t for name in entry.writes for t in flat(values[where[name]])]

    def finish(alive: bool = True) -> None:
        for t in written:
            if id(t) in as_they_lie:  # (written where they lie already)
                continue
            value, tangent = packing.unpack(packs[id(t)], t.shape)
            write_value(t, value, tangent, level if alive else None)
        for t, index, scratch in taken:
            SCRATCH.give_back(t, index, scratch)

    originals = {id(packs[id(t)]): t for t in written}
    if func.namespace == "_c10d_functional":  # (an out= variant: done on return)
        wait_tensors(out)
        finish()
        return _mapped(out, lambda t: originals.get(id(t), t))
    out = _mapped(out, lambda t: originals.get(id(t), t))
    return with_deferred_work(out, finish, written, level)


def _new_values(packing, out, entry, values: list, where: dict, level):
    """A functional collective's new tensors, from the packed ones it returned."""
    results = flat(out)
    sources = flat(values[where[entry.reads[0]]])
    new = [
        new_value(
            *packing.unpack(packed, source.shape),
            level,
            tangent_of(source, level) is not None,
        )
        for packed, source in zip(results, sources)
    ]
    return new if isinstance(out, (list, tuple)) else new[0]


def with_deferred_work(out, finish, written: list, level):
    """A c10d op's return, its Work one that calls `finish` when waited for."""
    if isinstance(out, tuple):
        return tuple(with_deferred_work(o, finish, written, level) for o in out)
    if isinstance(out, torch.ScriptObject):
        works = [dist.Work.unbox(out)]
        return deferred(works, finish, written, level)
    return out


def wait_tensors(out):
    """Wait for a functional collective's tensors."""
    global _wait_tensor
    if _wait_tensor is None:
        _wait_tensor = torch.ops._c10d_functional.wait_tensor.default
    return _mapped(out, _wait_tensor)


def _passed_through(mode, func, args, kwargs, level):
    """wait_tensor: its input back, with the input's tangent."""
    with handling_levels_below(level, mode):
        out = func(*args, **kwargs)
    source = args[0] if args else next(iter(kwargs.values()))
    if out is not source and isinstance(out, torch.Tensor):
        tangent = tangent_of(source, level)
        if tangent is not None:
            set_tangent(out, level, tangent)
    return out


def _positions(func) -> dict:
    """Each argument's position in the op's schema, by name."""
    where = _POSITIONS.get(func)
    if where is None:
        arguments = func._schema.arguments
        where = _POSITIONS[func] = {a.name: i for i, a in enumerate(arguments)}
    return where


_POSITIONS: dict = {}


def _coalescing(script: torch.ScriptObject, tensors: list) -> bool:
    """Whether the group is inside a coalescing region whose backend gathers the
    ops into one Work (ops issued there return Works that nobody waits for)."""
    if not _world.pg_coalesce_state:
        return False
    group = dist.ProcessGroup.unbox(script)
    if group not in _world.pg_coalesce_state:
        return False
    return group._get_backend(tensors[0].device).supports_coalescing


def _plainly(mode, func, args, kwargs, level):
    with handling_levels_below(level, mode):
        return func(*args, **kwargs)


def _differentiable(args, kwargs) -> bool:
    values = [*args, *(kwargs or {}).values()]
    return any(is_differentiable_dtype(t) for v in values for t in flat(v))


def _mapped(value, fn):
    """`value` with each tensor replaced by fn(tensor). (By hand rather than with
    pytree: only lists and tuples nest here, and pytree's walk was a third of a
    small collective's own time.)"""
    if isinstance(value, torch.Tensor):
        return fn(value)
    if type(value) in (list, tuple):
        return type(value)(_mapped(v, fn) for v in value)
    return value
