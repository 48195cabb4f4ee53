"""Cases run on every rank (ranks.py): when a collective's values and tangents
arrive (point to point, async_op, waits after the level or on another thread)
and how they travel (duals from make_packed_dual, sent in their own memory),
against the same computation in one process, float64."""

from __future__ import annotations

import torch
import torch.distributed as dist
from dual_checks import F64, REDUCE, Counting, check, duals, jvp_of
from torch.testing import assert_close

import dualgen.forward_ad as fwAD
from dualgen.distributed import make_packed_dual


def all_reduce_async(rank, world_size, device):
    xs, ts = duals(world_size, (5,), 2, device)
    with fwAD.dual_level():
        x = fwAD.make_dual(xs[rank].clone(), ts[rank].clone())
        work = dist.all_reduce(x, async_op=True)
        work.wait()
        check(x, jvp_of(REDUCE["SUM"], xs, ts))


def send_and_recv(rank, world_size, device):
    """Each rank sends to the next (blocking, then isend / irecv)."""
    xs, ts = duals(world_size, (4,), 20, device)
    source = (rank - 1) % world_size
    with fwAD.dual_level():
        x = fwAD.make_dual(xs[rank].clone(), ts[rank].clone())
        received = torch.empty(4, dtype=F64, device=device)
        if rank % 2 == 0:
            dist.send(x, (rank + 1) % world_size)
            dist.recv(received, source)
        else:
            dist.recv(received, source)
            dist.send(x, (rank + 1) % world_size)
        check(received, (xs[source], ts[source]))
        again = torch.empty(4, dtype=F64, device=device)
        sent = dist.isend(x, (rank + 1) % world_size)
        dist.irecv(again, source).wait()
        sent.wait()
        check(again, (xs[source], ts[source]))


def irecv_before_isend(rank, world_size, device):
    """Every rank posts its irecv before its isend (a ring exchange), then
    batch_isend_irecv with the receives first: an irecv must not wait for its
    data when issued, or no rank reaches its isend."""
    xs, ts = duals(world_size, (4,), 24, device)
    prev, next_ = (rank - 1) % world_size, (rank + 1) % world_size
    with fwAD.dual_level():
        x = fwAD.make_dual(xs[rank].clone(), ts[rank].clone())
        received = torch.empty(4, dtype=F64, device=device)
        works = [dist.irecv(received, prev), dist.isend(x, next_)]
        for work in works:
            work.wait()
        assert works[0].is_completed()
        check(received, (xs[prev], ts[prev]))
        left, right = torch.empty_like(received), torch.empty_like(received)
        ops = [
            dist.P2POp(dist.irecv, left, prev),
            dist.P2POp(dist.irecv, right, next_),
            dist.P2POp(dist.isend, x, prev),
            dist.P2POp(dist.isend, x, next_),
        ]
        for work in dist.batch_isend_irecv(ops):
            work.wait()
        check(left, (xs[prev], ts[prev]))
        check(right, (xs[next_], ts[next_]))


def recv_from_any_source(rank, world_size, device):
    """dist.recv without a source: the sender's rank and its tangent."""
    xs, ts = duals(world_size, (2,), 26, device)
    with fwAD.dual_level():
        x = fwAD.make_dual(xs[rank].clone(), ts[rank].clone())
        if rank == 0:
            senders = set()
            for _ in range(world_size - 1):
                received = torch.empty(2, dtype=F64, device=device)
                sender = dist.recv(received)
                check(received, (xs[sender], ts[sender]))
                senders.add(sender)
            assert senders == set(range(1, world_size)), senders
        else:
            dist.send(x, 0)


def _async_all_reduce(kind: str):
    def case(rank, world_size, device):
        """An async all_reduce returns before the other ranks join it: each even
        rank issues one, then sends to the next odd rank, which joins only once
        it has received; the Work's future holds the reduced tensor."""
        xs, ts = duals(world_size, (3,), 25, device, ties=True)
        partner = rank + 1 if rank % 2 == 0 else rank - 1
        op = getattr(dist.ReduceOp, kind)
        with fwAD.dual_level():
            x = fwAD.make_dual(xs[rank].clone(), ts[rank].clone())
            sent = fwAD.make_dual(2 * xs[rank], 2 * ts[rank])
            received = torch.empty(3, dtype=F64, device=device)
            if rank % 2 == 0:
                work = dist.all_reduce(x, op=op, async_op=True)
                dist.send(sent, partner)
                (reduced,) = work.get_future().wait()
                assert reduced is x and work.is_completed()
            else:
                dist.recv(received, partner)
                check(received, (2 * xs[partner], 2 * ts[partner]))
                dist.all_reduce(x, op=op)
            check(x, jvp_of(REDUCE[kind], xs, ts))

    case.__name__ = f"async_all_reduce_{kind.lower()}_does_not_block"
    return case


def wait_after_the_level_ends(rank, world_size, device):
    """A Work waited for after its level ended writes the value (the level's
    tangents went with it)."""
    xs, ts = duals(world_size, (3,), 27, device)
    with fwAD.dual_level():
        x = fwAD.make_dual(xs[rank].clone(), ts[rank].clone())
        work = dist.all_reduce(x, async_op=True)
    work.wait()
    assert_close(x, torch.stack(xs).sum(0))


def wait_on_another_thread(rank, world_size, device):
    """A Work waited for on another thread than the one that issued it: the
    value and tangent at the outermost level are written; under nested levels
    a clear error (levels are per thread)."""
    import threading

    xs, ts = duals(world_size, (3,), 29, device)

    def waited_elsewhere(work) -> list:
        errors = []

        def wait():
            try:
                work.wait()
            except RuntimeError as error:
                errors.append(str(error))

        thread = threading.Thread(target=wait)
        thread.start()
        thread.join()
        return errors

    with fwAD.dual_level():
        x = fwAD.make_dual(xs[rank].clone(), ts[rank].clone())
        assert waited_elsewhere(dist.all_reduce(x, async_op=True)) == []
        check(x, jvp_of(REDUCE["SUM"], xs, ts))
        with fwAD.dual_level():
            y = fwAD.make_dual(x, ts[rank].clone())
            work = dist.all_reduce(y, async_op=True)
            errors = waited_elsewhere(work)
            assert errors and "another thread" in errors[0], errors
            work.wait()


def packed_duals_are_sent_as_they_lie(rank, world_size, device):
    """make_packed_dual: all_reduce, broadcast and send / recv run on the dual's
    own memory (what reaches the process group is its value and tangent as
    they lie: no packing copy), with the single-process tangents; a view of it
    and in-place ops on it keep the right tangents."""
    xs, ts = duals(world_size, (3, 4), 28, device)
    source = (rank - 1) % world_size
    with Counting() as count, fwAD.dual_level():  # (a mode below dualgen's)
        x = make_packed_dual(xs[rank], ts[rank])
        where = (x.data_ptr(), 2 * x.numel())
        dist.all_reduce(x)
        dist.broadcast(x, 1)
        assert count.memory == [where, where], (count.memory, where)
        p, t = jvp_of(REDUCE["SUM"], xs, ts)
        check(x, (p, t))
        x.mul_(2)
        check(x[1], (2 * p[1], 2 * t[1]))
        received = make_packed_dual(torch.zeros_like(xs[0]), torch.zeros_like(ts[0]))
        sent = dist.isend(x, (rank + 1) % world_size)
        dist.recv(received, source)
        sent.wait()
        check(received, (2 * p, 2 * t))
        row = x[2]  # a view whose tangent does not follow it: packed as usual
        dist.all_reduce(row)
        p, t = 2 * p, 2 * t
        p[2], t[2] = world_size * p[2], world_size * t[2]
        check(x, (p, t))


CASES = [
    all_reduce_async,
    *(_async_all_reduce(k) for k in ("SUM", "MAX")),
    wait_after_the_level_ends,
    wait_on_another_thread,
    send_and_recv,
    irecv_before_isend,
    recv_from_any_source,
    packed_duals_are_sent_as_they_lie,
]
