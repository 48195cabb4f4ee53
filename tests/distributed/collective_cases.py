"""Cases run on every rank (ranks.py): each collective of duals against the same
computation in one process (torch.func.jvp of the math the collective does, over
every rank's inputs, which each rank can make: they come from seeds), float64."""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as fc
from dual_checks import F64, REDUCE, Counting, check, duals, jvp_of
from torch.testing import assert_close

import dualgen.forward_ad as fwAD


def _all_reduce(kind: str):
    def case(rank, world_size, device):
        xs, ts = duals(world_size, (3, 4), 1, device, ties=True)
        with fwAD.dual_level():
            x = fwAD.make_dual(xs[rank].clone(), ts[rank].clone())
            dist.all_reduce(x, op=getattr(dist.ReduceOp, kind))
            check(x, jvp_of(REDUCE[kind], xs, ts))

    case.__name__ = f"all_reduce_{kind.lower()}"
    return case


def all_reduce_of_a_view(rank, world_size, device):
    """The reduced values and tangents land in a view of a bigger dual."""
    xs, ts = duals(world_size, (4, 3), 3, device)
    with fwAD.dual_level():
        base = fwAD.make_dual(xs[rank].clone(), ts[rank].clone())
        column = base[:, 1]
        dist.all_reduce(column)
        expected_p, expected_t = xs[rank].clone(), ts[rank].clone()
        expected_p[:, 1] = sum(x[:, 1] for x in xs)
        expected_t[:, 1] = sum(t[:, 1] for t in ts)
        check(base, (expected_p, expected_t))


def all_reduce_mixed_ranks(rank, world_size, device):
    """Rank 0's tensor is a dual, the others' are not: all complete, and every
    rank gets rank 0's tangent (the others take part with zeros)."""
    xs, ts = duals(world_size, (4,), 4, device)
    with fwAD.dual_level():
        x = xs[rank].clone()
        if rank == 0:
            x = fwAD.make_dual(x, ts[0].clone())
        dist.all_reduce(x)
        zeros = [ts[0]] + [torch.zeros_like(t) for t in ts[1:]]
        check(x, jvp_of(REDUCE["SUM"], xs, zeros))


def plain_tensors_stay_plain(rank, world_size, device):
    """Inside a dual level, a collective of tensors no rank gave a tangent sends
    zeros and gives none back: what arrives is a plain tensor, as outside."""
    xs, _ = duals(world_size, (4,), 22, device)
    with fwAD.dual_level():
        x = xs[rank].clone()
        dist.all_reduce(x)
        assert fwAD.unpack_dual(x).tangent is None
        gathered = fc.all_gather_tensor(x, 0, dist.group.WORLD) * 1.0
        assert fwAD.unpack_dual(gathered).tangent is None
        assert_close(x, sum(xs))


def all_reduce_is_one_message(rank, world_size, device):
    xs, ts = duals(world_size, (6,), 5, device)
    with Counting() as count, fwAD.dual_level():
        x = fwAD.make_dual(xs[rank].clone(), ts[rank].clone())
        dist.all_reduce(x)
    assert count.ops == ["c10d.allreduce_.default"], count.ops


def all_reduce_nested_levels(rank, world_size, device):
    """Two levels: each level's tangent, and the tangent of a tangent (here
    zero: the sum is linear), as in one process."""
    xs, ts = duals(world_size, (3,), 6, device)
    _, us = duals(world_size, (3,), 7, device)
    with fwAD.dual_level(), fwAD.dual_level():
        x = fwAD.make_dual(xs[rank].clone(), ts[rank].clone(), level=0)
        x = fwAD.make_dual(x, us[rank].clone(), level=1)
        y = x * x  # nonlinear before the collective
        dist.all_reduce(y, op=dist.ReduceOp.MAX)
        outer = fwAD.unpack_dual(y, level=0).tangent
        inner = fwAD.unpack_dual(y, level=1).tangent
        second = fwAD.unpack_dual(inner, level=0).tangent

    def f(s, u):
        return torch.func.jvp(lambda v: (v * v).amax(0), (s,), (u,))

    s, t, u = torch.stack(xs), torch.stack(ts), torch.stack(us)
    (_, tangent_u), (tangent_t, tangent_tu) = torch.func.jvp(
        lambda v: f(v, u), (s,), (t,)
    )
    assert_close(outer, tangent_t)
    assert_close(fwAD.unpack_dual(inner, level=0).primal, tangent_u)
    assert_close(second, tangent_tu)


def a_subgroup(rank, world_size, device):
    """Collectives of a group of ranks 1.. (ranks within it numbered anew): MAX
    all_reduce, and a broadcast from its last member."""
    members = list(range(1, world_size))
    group = dist.new_group(members)  # (every rank takes part in making it)
    if rank not in members:
        return
    xs, ts = duals(world_size, (3,), 25, device, ties=True)
    inside = [xs[r] for r in members], [ts[r] for r in members]
    with fwAD.dual_level():
        x = fwAD.make_dual(xs[rank].clone(), ts[rank].clone())
        dist.all_reduce(x, op=dist.ReduceOp.MAX, group=group)
        check(x, jvp_of(REDUCE["MAX"], *inside))
        y = fwAD.make_dual(xs[rank].clone(), ts[rank].clone())
        dist.broadcast(y, src=members[-1], group=group)
        check(y, (xs[members[-1]], ts[members[-1]]))


def all_reduce_bitwise_is_refused(rank, world_size, device):
    xs, ts = duals(world_size, (3,), 8, device)
    with fwAD.dual_level():
        x = fwAD.make_dual(xs[rank].clone(), ts[rank].clone())
        try:
            dist.all_reduce(x, op=dist.ReduceOp.BAND)
        except RuntimeError as error:
            assert "BAND" in str(error) and "allreduce_" in str(error), error
        else:
            raise AssertionError("a bitwise all_reduce of a dual did not fail")


def all_reduce_of_integers(rank, world_size, device):
    with fwAD.dual_level():
        n = torch.tensor([rank + 1], device=device)
        dist.all_reduce(n)
        assert n.item() == world_size * (world_size + 1) // 2


def all_gather_into_tensor(rank, world_size, device):
    xs, ts = duals(world_size, (2, 3), 9, device)
    with fwAD.dual_level():
        x = fwAD.make_dual(xs[rank].clone(), ts[rank].clone())
        out = torch.empty(2 * world_size, 3, dtype=F64, device=device)
        dist.all_gather_into_tensor(out, x)
        check(out, (torch.cat(xs), torch.cat(ts)))


def all_gather_list(rank, world_size, device):
    xs, ts = duals(world_size, (4,), 10, device)
    with fwAD.dual_level():
        x = fwAD.make_dual(xs[rank].clone(), ts[rank].clone())
        outs = [torch.empty(4, dtype=F64, device=device) for _ in range(world_size)]
        dist.all_gather(outs, x)
        for r, out in enumerate(outs):
            check(out, (xs[r], ts[r]))


def _reduce_scatter(kind: str):
    def case(rank, world_size, device):
        xs, ts = duals(world_size, (2 * world_size, 3), 11, device, ties=True)
        with fwAD.dual_level():
            x = fwAD.make_dual(xs[rank].clone(), ts[rank].clone())
            out = torch.empty(2, 3, dtype=F64, device=device)
            dist.reduce_scatter_tensor(out, x, op=getattr(dist.ReduceOp, kind))
            p, t = jvp_of(REDUCE[kind], xs, ts)
            check(out, (p[2 * rank : 2 * rank + 2], t[2 * rank : 2 * rank + 2]))

    case.__name__ = f"reduce_scatter_tensor_{kind.lower()}"
    return case


def _reduce_scatter_list(kind: str):
    def case(rank, world_size, device):
        xs, ts = duals(world_size, (world_size, 3), 12, device, ties=True)
        with fwAD.dual_level():
            x = fwAD.make_dual(xs[rank].clone(), ts[rank].clone())
            out = torch.empty(3, dtype=F64, device=device)
            chunks = [c.contiguous() for c in x.unbind(0)]
            dist.reduce_scatter(out, chunks, op=getattr(dist.ReduceOp, kind))
            p, t = jvp_of(REDUCE[kind], xs, ts)
            check(out, (p[rank], t[rank]))

    case.__name__ = f"reduce_scatter_list_{kind.lower()}"
    return case


def functional_out_variants(rank, world_size, device):
    """all_gather_into_tensor_out and reduce_scatter_tensor_out write into `out`."""
    xs, ts = duals(world_size, (world_size, 2), 23, device)
    name = dist.group.WORLD.group_name
    ops = torch.ops._c10d_functional
    with fwAD.dual_level():
        x = fwAD.make_dual(xs[rank].clone(), ts[rank].clone())
        gathered = torch.empty(world_size * world_size, 2, dtype=F64, device=device)
        ops.wait_tensor(
            ops.all_gather_into_tensor_out(x, world_size, name, out=gathered)
        )
        check(gathered, (torch.cat(xs), torch.cat(ts)))
        scattered = torch.empty(1, 2, dtype=F64, device=device)
        ops.wait_tensor(
            ops.reduce_scatter_tensor_out(x, "sum", world_size, name, out=scattered)
        )
        p, t = jvp_of(REDUCE["SUM"], xs, ts)
        check(scattered, (p[rank : rank + 1], t[rank : rank + 1]))


def an_unknown_collective_is_refused(rank, world_size, device):
    """A collective without a rule (the functional isend, in torch 2.13) of a
    dual: an error naming it, before any message."""
    xs, ts = duals(world_size, (3,), 24, device)
    with fwAD.dual_level():
        x = fwAD.make_dual(xs[rank].clone(), ts[rank].clone())
        try:
            torch.ops._c10d_functional.isend(x, (rank + 1) % world_size, 0, "0")
        except NotImplementedError as error:
            assert "isend" in str(error), error
        else:
            raise AssertionError("a collective without a rule ran on a dual")


def broadcast(rank, world_size, device):
    xs, ts = duals(world_size, (3,), 13, device)
    with fwAD.dual_level():
        x = fwAD.make_dual(xs[rank].clone(), ts[rank].clone())
        dist.broadcast(x, src=0)
        check(x, (xs[0], ts[0]))


def _reduce(kind: str):
    def case(rank, world_size, device):
        xs, ts = duals(world_size, (3,), 14, device, ties=True)
        with fwAD.dual_level():
            x = fwAD.make_dual(xs[rank].clone(), ts[rank].clone())
            dist.reduce(x, dst=0, op=getattr(dist.ReduceOp, kind))
            if rank == 0:
                check(x, jvp_of(REDUCE[kind], xs, ts))

    case.__name__ = f"reduce_{kind.lower()}"
    return case


def all_to_all_single(rank, world_size, device):
    """Uneven splits: rank r sends r + 1 + j rows to rank j."""
    sizes = [[r + 1 + j for j in range(world_size)] for r in range(world_size)]
    g = torch.Generator().manual_seed(15)
    xs = [torch.randn(sum(s), 2, generator=g, dtype=F64) for s in sizes]
    ts = [torch.randn(sum(s), 2, generator=g, dtype=F64) for s in sizes]
    received = [sizes[r][rank] for r in range(world_size)]
    with fwAD.dual_level():
        x = fwAD.make_dual(xs[rank].clone().to(device), ts[rank].clone().to(device))
        out = torch.empty(sum(received), 2, dtype=F64, device=device)
        dist.all_to_all_single(out, x, received, sizes[rank])

        def mine(values):
            return torch.cat(
                [v.split(sizes[r])[rank] for r, v in enumerate(values)]
            ).to(device)

        check(out, (mine(xs), mine(ts)))


def all_to_all_list(rank, world_size, device):
    xs, ts = duals(world_size, (world_size, 2), 16, device)
    with fwAD.dual_level():
        x = fwAD.make_dual(xs[rank].clone(), ts[rank].clone())
        outs = [torch.empty(2, dtype=F64, device=device) for _ in range(world_size)]
        dist.all_to_all(outs, [row.contiguous() for row in x.unbind(0)])
        for r, out in enumerate(outs):
            check(out, (xs[r][rank], ts[r][rank]))


def gather_and_scatter(rank, world_size, device):
    xs, ts = duals(world_size, (3,), 17, device)
    with fwAD.dual_level():
        x = fwAD.make_dual(xs[rank].clone(), ts[rank].clone())
        outs = [torch.empty(3, dtype=F64, device=device) for _ in range(world_size)]
        dist.gather(x, outs if rank == 0 else None, dst=0)
        if rank == 0:
            for r, out in enumerate(outs):
                check(out, (xs[r], ts[r]))
        received = torch.empty(3, dtype=F64, device=device)
        chunks = None
        if rank == 0:  # rank 0 scatters what it gathered, shifted by one
            chunks = [outs[(r + 1) % world_size] for r in range(world_size)]
        dist.scatter(received, chunks, src=0)
        r = (rank + 1) % world_size
        check(received, (xs[r], ts[r]))


def all_reduce_coalesced(rank, world_size, device):
    xs, ts = duals(world_size, (3,), 18, device)
    ys, us = duals(world_size, (2, 2), 19, device)
    with fwAD.dual_level():
        x = fwAD.make_dual(xs[rank].clone(), ts[rank].clone())
        y = fwAD.make_dual(ys[rank].clone(), us[rank].clone())
        dist.all_reduce_coalesced([x, y])
        check(x, jvp_of(REDUCE["SUM"], xs, ts))
        check(y, jvp_of(REDUCE["SUM"], ys, us))


def other_dtypes(rank, world_size, device):
    """Complex (torch.distributed sends its real view), float32 and bfloat16
    duals: all_reduce, broadcast and send / recv, against float64 in one
    process (bfloat16 to its precision)."""
    source = (rank - 1) % world_size
    for dtype in (torch.complex128, torch.float32, torch.bfloat16):
        g = torch.Generator().manual_seed(31)
        xs = [torch.randn(6, generator=g, dtype=dtype) for _ in range(world_size)]
        ts = [torch.randn(6, generator=g, dtype=dtype) for _ in range(world_size)]
        tolerance = {"atol": 0.1, "rtol": 0.02} if dtype == torch.bfloat16 else {}
        wide = torch.complex128 if dtype.is_complex else F64
        with fwAD.dual_level():
            x = fwAD.make_dual(xs[rank].clone().to(device), ts[rank].clone().to(device))
            dist.all_reduce(x)
            p, t = fwAD.unpack_dual(x)
            assert t is not None and t.dtype == dtype, (dtype, t)
            assert_close(p.cpu(), sum(v.to(wide) for v in xs).to(dtype), **tolerance)
            assert_close(t.cpu(), sum(v.to(wide) for v in ts).to(dtype), **tolerance)
            y = fwAD.make_dual(xs[rank].clone().to(device), ts[rank].clone().to(device))
            dist.broadcast(y, 0)
            check(y, (xs[0], ts[0]))
            received = torch.empty(6, dtype=dtype, device=device)
            sent = dist.isend(
                fwAD.make_dual(xs[rank], ts[rank]), (rank + 1) % world_size
            )
            dist.recv(received, source)
            sent.wait()
            check(received, (xs[source], ts[source]))


def _functional(name: str):
    def case(rank, world_size, device):
        xs, ts = duals(world_size, (2 * world_size, 3), 21, device, ties=True)
        group = dist.group.WORLD
        with fwAD.dual_level():
            x = fwAD.make_dual(xs[rank].clone(), ts[rank].clone())
            if name == "all_reduce_max":
                out, expected = fc.all_reduce(x, "max", group), jvp_of(
                    REDUCE["MAX"], xs, ts
                )
            elif name == "all_reduce_sum":
                out, expected = fc.all_reduce(x, "sum", group), jvp_of(
                    REDUCE["SUM"], xs, ts
                )
            elif name == "all_gather_tensor":
                out = fc.all_gather_tensor(x, 0, group)
                expected = (torch.cat(xs), torch.cat(ts))
            elif name == "reduce_scatter_tensor":
                out = fc.reduce_scatter_tensor(x, "sum", 0, group)
                p, t = jvp_of(REDUCE["SUM"], xs, ts)
                expected = (p.chunk(world_size)[rank], t.chunk(world_size)[rank])
            elif name == "all_to_all_single":
                out = fc.all_to_all_single(x, None, None, group)
                expected = (
                    torch.cat([v.chunk(world_size)[rank] for v in xs]),
                    torch.cat([v.chunk(world_size)[rank] for v in ts]),
                )
            else:  # the op itself, waited for by hand
                raw = torch.ops._c10d_functional.broadcast(x, 1, group.group_name)
                out = torch.ops._c10d_functional.wait_tensor(raw)
                expected = (xs[1], ts[1])
            check(out * 1.0, expected)  # (an op on it waits, as user code would)

    case.__name__ = f"functional_{name}"
    return case


CASES = [
    *(_all_reduce(k) for k in ("SUM", "AVG", "MAX", "MIN", "PRODUCT")),
    all_reduce_of_a_view,
    all_reduce_mixed_ranks,
    all_reduce_is_one_message,
    plain_tensors_stay_plain,
    all_reduce_nested_levels,
    a_subgroup,
    all_reduce_bitwise_is_refused,
    all_reduce_of_integers,
    all_reduce_coalesced,
    all_gather_into_tensor,
    all_gather_list,
    *(_reduce_scatter(k) for k in ("SUM", "MAX", "PRODUCT")),
    *(_reduce_scatter_list(k) for k in ("SUM", "MAX")),
    functional_out_variants,
    an_unknown_collective_is_refused,
    broadcast,
    *(_reduce(k) for k in ("SUM", "MIN")),
    all_to_all_single,
    all_to_all_list,
    gather_and_scatter,
    other_dtypes,
    *(
        _functional(n)
        for n in (
            "all_reduce_sum",
            "all_reduce_max",
            "all_gather_tensor",
            "reduce_scatter_tensor",
            "all_to_all_single",
            "broadcast",
        )
    ),
]
