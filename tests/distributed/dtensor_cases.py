"""DTensor cases run on every rank (ranks.py): duals of DTensors keep their
tangents' placements, and tensor-parallel models give the single-process JVP,
with respect to their input and to their parameters."""

from __future__ import annotations

import torch
import torch.distributed as dist
import tp_models
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor
from torch.distributed.tensor.parallel import parallelize_module
from torch.testing import assert_close

import dualgen.forward_ad as fwAD

F64 = torch.float64


def _mesh(world_size, device):
    return init_device_mesh(device.type, (world_size,))


def _randn(*shape, seed):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=F64)


def make_dual_of_a_dtensor(rank, world_size, device):
    mesh = _mesh(world_size, device)
    value, tangent = _randn(4, 3, seed=1), _randn(4, 3, seed=2)
    d = distribute_tensor(value.to(device), mesh, [Shard(0)])
    with fwAD.dual_level():
        dual = fwAD.make_dual(
            d, distribute_tensor(tangent.to(device), mesh, [Shard(0)])
        )
        t = fwAD.unpack_dual(dual).tangent
        assert isinstance(t, DTensor) and t.placements == (Shard(0),), t
        assert_close(t.full_tensor().cpu(), tangent)
        # another placement is redistributed; a plain tangent is the global value
        other = fwAD.make_dual(
            d, distribute_tensor(tangent.to(device), mesh, [Replicate()])
        )
        assert fwAD.unpack_dual(other).tangent.placements == (Shard(0),)
        plain = fwAD.make_dual(d, tangent.to(device))
        t = fwAD.unpack_dual(plain).tangent
        assert isinstance(t, DTensor) and t.placements == (Shard(0),), t
        assert_close(t.full_tensor().cpu(), tangent)


def a_local_shaped_plain_tangent_is_refused(rank, world_size, device):
    mesh = _mesh(world_size, device)
    d = distribute_tensor(
        _randn(2 * world_size, 3, seed=3).to(device), mesh, [Shard(0)]
    )
    with fwAD.dual_level():
        try:
            fwAD.make_dual(d, torch.ones(2, 3, dtype=F64, device=device))
        except RuntimeError as error:
            assert "DTensor.from_local" in str(error), error
        else:
            raise AssertionError("a tangent of the local shape was taken")


def placements_follow_the_primal(rank, world_size, device):
    """full_tensor, redistribute, to_local and from_local: each tangent has its
    primal's placements and the single-process value."""
    mesh = _mesh(world_size, device)
    value, tangent = _randn(2 * world_size, 3, seed=4), _randn(
        2 * world_size, 3, seed=5
    )
    with fwAD.dual_level():
        d = fwAD.make_dual(
            distribute_tensor(value.to(device), mesh, [Shard(0)]),
            distribute_tensor(tangent.to(device), mesh, [Shard(0)]),
        )
        full = fwAD.unpack_dual(d.full_tensor()).tangent
        assert_close(full.cpu(), tangent)
        replicated = d.redistribute(mesh, [Replicate()])
        t = fwAD.unpack_dual(replicated).tangent
        assert t.placements == (Replicate(),), t.placements
        assert_close(t.to_local().cpu(), tangent)
        local = d.to_local()
        assert_close(
            fwAD.unpack_dual(local).tangent.cpu(), tangent.chunk(world_size)[rank]
        )
        back = DTensor.from_local(local.sin(), mesh, [Shard(0)])
        t = fwAD.unpack_dual(back).tangent
        assert t.placements == (Shard(0),)
        expected = torch.func.jvp(torch.sin, (value,), (tangent,))[1]
        assert_close(t.full_tensor().cpu(), expected)


def _input_jvp(make, plan, shard_dim: int | None):
    def case(rank, world_size, device):
        mesh = _mesh(world_size, device)
        model, reference = tp_models.copies(make)
        parallel = parallelize_module(model.to(device), mesh, plan())
        shape = (2, 2 * world_size, 8) if shard_dim is not None else (5, 4)
        x, t = _randn(*shape, seed=6), _randn(*shape, seed=7)
        expected = torch.func.jvp(reference, (x,), (t,))

        def mine(v):
            v = v if shard_dim is None else v.chunk(world_size, shard_dim)[rank]
            return v.contiguous().to(device)

        with fwAD.dual_level():
            y = parallel(fwAD.make_dual(mine(x), mine(t)))
            primal, tangent = fwAD.unpack_dual(y)
            assert tangent is not None, "no tangent"
            assert_close(primal, mine(expected[0]))
            assert_close(tangent, mine(expected[1]))

    case.__name__ = f"{make.__name__}_input_jvp"
    return case


def _parameter_jvp(make, plan, shard_dim: int | None):
    """JVP of a loss with respect to the parameters, the tangents DTensors with
    the parameters' placements; the loss is summed over ranks by a dual
    all_reduce where each rank holds a chunk of the output."""

    def case(rank, world_size, device):
        mesh = _mesh(world_size, device)
        model, reference = tp_models.copies(make)
        parallel = parallelize_module(model.to(device), mesh, plan())
        shape = (2, 2 * world_size, 8) if shard_dim is not None else (5, 4)
        x = _randn(*shape, seed=8)
        names = [n for n, _ in reference.named_parameters()]
        full_tangents = {
            n: _randn(*p.shape, seed=9 + i)
            for i, (n, p) in enumerate(reference.named_parameters())
        }

        def loss(*params):
            out = torch.func.functional_call(reference, dict(zip(names, params)), (x,))
            return out.pow(2).sum()

        expected = torch.func.jvp(
            loss,
            tuple(p.detach() for p in reference.parameters()),
            tuple(full_tangents[n] for n in names),
        )
        local_x = x if shard_dim is None else x.chunk(world_size, shard_dim)[rank]
        with fwAD.dual_level():
            duals = _dual_parameters(parallel, full_tangents, mesh, device)
            out = torch.func.functional_call(
                parallel, duals, (local_x.contiguous().to(device),)
            )
            total = out.pow(2).sum()
            if isinstance(total, DTensor):
                total = total.full_tensor()
            elif shard_dim is not None:  # each rank's chunk of the sequence
                dist.all_reduce(total)
            primal, tangent = fwAD.unpack_dual(total)
            assert tangent is not None, "no tangent"
            assert_close(primal.cpu(), expected[0])
            assert_close(tangent.cpu(), expected[1])

    case.__name__ = f"{make.__name__}_parameter_jvp"
    return case


def dtensors_on_a_2d_mesh(rank, world_size, device):
    """A (data, tensor) mesh: duals sharded on both dimensions, redistributed,
    summed across each dimension, their tangents placed like their primals."""
    mesh = init_device_mesh(
        device.type, (world_size // 2, 2), mesh_dim_names=("dp", "tp")
    )
    value, tangent = _randn(2 * world_size, 6, seed=40), _randn(
        2 * world_size, 6, seed=41
    )
    placements = [Shard(0), Shard(1)]
    with fwAD.dual_level():
        d = fwAD.make_dual(
            distribute_tensor(value.to(device), mesh, placements),
            distribute_tensor(tangent.to(device), mesh, [Replicate(), Shard(0)]),
        )
        t = fwAD.unpack_dual(d).tangent
        assert t.placements == tuple(placements), t.placements
        y = (d.sin() * d).redistribute(mesh, [Replicate(), Shard(0)])
        t = fwAD.unpack_dual(y).tangent
        assert t.placements == (Replicate(), Shard(0)), t.placements
        total = y.sum(0).full_tensor()
        expected = torch.func.jvp(lambda v: (v.sin() * v).sum(0), (value,), (tangent,))
        primal, tangent_total = fwAD.unpack_dual(total)
        assert_close(primal.cpu(), expected[0])
        assert_close(tangent_total.cpu(), expected[1])


def data_and_tensor_parallel_block(rank, world_size, device):
    """2-D parallelism: the transformer block tensor-parallel over the mesh's
    "tp" dimension, each "dp" replica on its own part of the batch; the JVP of
    the whole loss with respect to the input and the parameters together, the
    loss summed over "tp" then over "dp" by dual all_reduces of subgroups."""
    mesh = init_device_mesh(
        device.type, (world_size // 2, 2), mesh_dim_names=("dp", "tp")
    )
    dp, tp = mesh["dp"], mesh["tp"]
    model, reference = tp_models.copies(tp_models.block)
    parallel = parallelize_module(model.to(device), tp, tp_models.block_plan())
    x, tx = _randn(dp.size(), 4, 8, seed=42), _randn(dp.size(), 4, 8, seed=43)
    names = [n for n, _ in reference.named_parameters()]
    tangents = {
        n: _randn(*p.shape, seed=44 + i)
        for i, (n, p) in enumerate(reference.named_parameters())
    }

    def loss(v, *params):
        out = torch.func.functional_call(reference, dict(zip(names, params)), (v,))
        return out.pow(2).sum()

    expected = torch.func.jvp(
        loss,
        (x, *(p.detach() for p in reference.parameters())),
        (tx, *(tangents[n] for n in names)),
    )

    def mine(v):  # this replica's batch row, this rank's chunk of the sequence
        row = v[dp.get_local_rank() : dp.get_local_rank() + 1]
        return row.chunk(tp.size(), 1)[tp.get_local_rank()].contiguous().to(device)

    with fwAD.dual_level():
        duals = _dual_parameters(parallel, tangents, tp, device)
        out = torch.func.functional_call(
            parallel, duals, (fwAD.make_dual(mine(x), mine(tx)),)
        )
        total = out.pow(2).sum()
        dist.all_reduce(total, group=tp.get_group())
        dist.all_reduce(total, group=dp.get_group())
        primal, tangent = fwAD.unpack_dual(total)
        assert tangent is not None, "no tangent"
        assert_close(primal.cpu(), expected[0])
        assert_close(tangent.cpu(), expected[1])


def _dual_parameters(parallel, tangents: dict, mesh, device) -> dict:
    """Each parameter of a parallelised model as a dual (inside a level), its
    tangent the global one distributed like the parameter."""
    return {
        n: fwAD.make_dual(
            p.detach(), distribute_tensor(tangents[n].to(device), mesh, p.placements)
        )
        for n, p in parallel.named_parameters()
    }


def data_parallel_input_jvp(rank, world_size, device):
    """DistributedDataParallel (its forward broadcasts buffers) and FSDP2
    (`fully_shard`: parameters all-gathered for the forward), JVP with respect
    to the input. FSDP2 under no_grad: with grad enabled its
    RegisterPostBackwardFunction's jvp returns its input's tangent for an input
    returned as-is, which native's rules (and so dualgen's) refuse by name."""
    from torch.distributed.fsdp import fully_shard
    from torch.nn.parallel import DistributedDataParallel

    _, reference = tp_models.copies(tp_models.mlp)
    x, t = _randn(5, 4, seed=30), _randn(5, 4, seed=31)
    expected = torch.func.jvp(reference, (x,), (t,))
    expected = tuple(e.to(device) for e in expected)
    x, t = x.to(device), t.to(device)
    data_parallel = DistributedDataParallel(
        tp_models.copies(tp_models.mlp)[0].to(device)
    )
    sharded = tp_models.copies(tp_models.mlp)[0].to(device)
    fully_shard(sharded[0])
    fully_shard(sharded[2])
    fully_shard(sharded)
    for model, grad in ((data_parallel, True), (sharded, False)):
        with torch.set_grad_enabled(grad), fwAD.dual_level():
            primal, tangent = fwAD.unpack_dual(model(fwAD.make_dual(x, t)))
            assert tangent is not None, type(model).__name__
            assert_close(primal, expected[0])
            assert_close(tangent, expected[1])


def data_parallel_backward_inside_a_level(rank, world_size, device):
    """DistributedDataParallel's backward inside a dual level (its gradient
    buckets all-reduced through the mode): the gradients averaged over ranks
    and the loss's tangent as in one process; `.grad` keeps no tangent, as
    native's AccumulateGrad (torch.autograd.grad is the forward-over-reverse
    route)."""
    from torch.nn.parallel import DistributedDataParallel

    model, reference = tp_models.copies(tp_models.mlp)
    data_parallel = DistributedDataParallel(model.to(device))
    xs = [_randn(5, 4, seed=50 + r) for r in range(world_size)]
    t = _randn(5, 4, seed=60)
    with fwAD.dual_level():
        loss = data_parallel(fwAD.make_dual(xs[rank].to(device), t.to(device)))
        loss = loss.pow(2).sum()
        loss.backward()
        loss_tangent = fwAD.unpack_dual(loss).tangent
        assert all(fwAD.unpack_dual(p.grad).tangent is None for p in model.parameters())
    expected = torch.func.jvp(lambda v: reference(v).pow(2).sum(), (xs[rank],), (t,))
    assert_close(loss_tangent.cpu(), expected[1])
    (sum(reference(x).pow(2).sum() for x in xs) / world_size).backward()
    for p, q in zip(model.parameters(), reference.parameters()):
        assert_close(p.grad.cpu(), q.grad)


CASES = [
    make_dual_of_a_dtensor,
    a_local_shaped_plain_tangent_is_refused,
    placements_follow_the_primal,
    _input_jvp(tp_models.mlp, lambda: tp_models.MLP_PLAN, None),
    _parameter_jvp(tp_models.mlp, lambda: tp_models.MLP_PLAN, None),
    _input_jvp(tp_models.block, tp_models.block_plan, 1),
    _parameter_jvp(tp_models.block, tp_models.block_plan, 1),
    data_parallel_input_jvp,
    data_parallel_backward_inside_a_level,
    dtensors_on_a_2d_mesh,
    data_and_tensor_parallel_block,
]
