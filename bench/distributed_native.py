"""Forward AD across processes: native torch.autograd.forward_ad against dualgen.

On one machine, gloo, 2 processes, float64: each case of the table in the README's
"Many processes" section runs under native forward AD and under dualgen, and its
tangent is compared with the same computation in one process. A case is `right`,
`wrong tangent` or `no tangent` (both silent), or the error it raises.
"""

from __future__ import annotations

import datetime
import os
import socket
import sys
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as fc
import torch.multiprocessing as mp

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "distributed"))

F64 = torch.float64


def _values(world_size, shape, seed):
    g = torch.Generator().manual_seed(seed)
    xs = [torch.randn(shape, generator=g, dtype=F64) for _ in range(world_size)]
    ts = [torch.randn(shape, generator=g, dtype=F64) for _ in range(world_size)]
    return xs, ts


def _collective(op):
    """A case: (api, rank, world size) -> (tangent or None, expected tangent)."""

    def case(api, rank, world_size):
        xs, ts = _values(world_size, (3, 4), 1)
        with api.dual_level():
            x = api.make_dual(xs[rank].clone(), ts[rank].clone())
            y, expected = op(x, xs, ts, rank, world_size)
            tangent = api.unpack_dual(y * 1.0).tangent
        return tangent, expected()  # (torch.func.jvp: outside native's level)

    return case


def _stacked(f, xs, ts):
    return torch.func.jvp(f, (torch.stack(xs),), (torch.stack(ts),))[1]


def _all_reduce(kind):
    def op(x, xs, ts, rank, world_size):
        dist.all_reduce(x, op=getattr(dist.ReduceOp, kind))
        reduce = {"SUM": lambda s: s.sum(0), "MAX": lambda s: s.amax(0)}
        reduce["PRODUCT"] = lambda s: s.prod(0)
        return x, lambda: _stacked(reduce[kind], xs, ts)

    return op


def _all_gather_into_tensor(x, xs, ts, rank, world_size):
    out = torch.empty(3 * world_size, 4, dtype=F64)
    dist.all_gather_into_tensor(out, x)
    return out, lambda: torch.cat(ts)


def _functional_all_reduce(x, xs, ts, rank, world_size):
    return fc.all_reduce(x, "sum", dist.group.WORLD), lambda: sum(ts)


def _functional_all_gather(x, xs, ts, rank, world_size):
    return fc.all_gather_tensor(x, 0, dist.group.WORLD), lambda: torch.cat(ts)


def _all_gather_list(x, xs, ts, rank, world_size):
    outs = [torch.empty(3, 4, dtype=F64) for _ in range(world_size)]
    dist.all_gather(outs, x)
    return torch.cat(outs), lambda: torch.cat(ts)


def _broadcast(x, xs, ts, rank, world_size):
    dist.broadcast(x, src=0)
    return x, lambda: ts[0]


def _tensor_parallel(parameters: bool):
    def case(api, rank, world_size):
        import tp_models
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor import DTensor, distribute_tensor
        from torch.distributed.tensor.parallel import parallelize_module

        mesh = init_device_mesh("cpu", (world_size,))
        model, reference = tp_models.copies(tp_models.mlp)
        parallel = parallelize_module(model, mesh, tp_models.MLP_PLAN)
        x, t = _values(1, (5, 4), 2)[0][0], _values(1, (5, 4), 3)[0][0]
        names = [n for n, _ in reference.named_parameters()]
        if not parameters:
            expected = torch.func.jvp(reference, (x,), (t,))[1]
            with api.dual_level():
                return (
                    api.unpack_dual(parallel(api.make_dual(x, t)) * 1.0).tangent,
                    expected,
                )
        g = torch.Generator().manual_seed(4)
        tangents = {
            n: torch.randn(p.shape, generator=g, dtype=F64)
            for n, p in reference.named_parameters()
        }

        def loss(*ps):
            out = torch.func.functional_call(reference, dict(zip(names, ps)), (x,))
            return out.pow(2).sum()

        primals = tuple(p.detach() for p in reference.parameters())
        expected = torch.func.jvp(loss, primals, tuple(tangents[n] for n in names))[1]
        with api.dual_level():
            duals = {
                n: api.make_dual(
                    p.detach(), distribute_tensor(tangents[n], mesh, p.placements)
                )
                for n, p in parallel.named_parameters()
            }
            total = torch.func.functional_call(parallel, duals, (x,)).pow(2).sum()
            if isinstance(total, DTensor):
                total = total.full_tensor()
            return api.unpack_dual(total).tangent, expected

    return case


CASES = {
    "`dist.all_reduce(y)` (SUM) on a dual": _collective(_all_reduce("SUM")),
    "`all_reduce` MAX": _collective(_all_reduce("MAX")),
    "`all_reduce` PRODUCT": _collective(_all_reduce("PRODUCT")),
    "`all_gather_into_tensor`": _collective(_all_gather_into_tensor),
    "functional `all_reduce`": _collective(_functional_all_reduce),
    "functional `all_gather_tensor`": _collective(_functional_all_gather),
    "`all_gather` into a list": _collective(_all_gather_list),
    "`broadcast` from rank 0": _collective(_broadcast),
    "MLP under `parallelize_module` (Colwise + Rowwise), JVP w.r.t. the input": (
        _tensor_parallel(parameters=False)
    ),
    "same MLP, JVP of a loss w.r.t. the parameters (DTensor tangents)": (
        _tensor_parallel(parameters=True)
    ),
}


def _verdict(api, case, rank, world_size) -> str:
    try:
        tangent, expected = case(api, rank, world_size)
    except Exception as error:  # noqa: BLE001 - the table reports it
        return "error: " + str(error).strip().splitlines()[0][:70]
    if tangent is None:
        return "**no tangent, silent**"
    full = getattr(tangent, "full_tensor", None)
    tangent = full() if full is not None else tangent
    if torch.allclose(tangent, expected):
        return "right"
    return "**wrong tangent, silent**"


def _worst(verdicts) -> str:
    wrong = [v for v in verdicts if v != "right"]
    return wrong[0] if wrong else "right"


def _rank(rank: int, world_size: int, port: int, out: str) -> None:
    import torch.autograd.forward_ad as native

    import dualgen.forward_ad as ours

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    timeout = datetime.timedelta(seconds=30)
    dist.init_process_group("gloo", rank=rank, world_size=world_size, timeout=timeout)
    rows = []
    for name, case in CASES.items():
        verdicts = []
        for api in (native, ours):
            verdicts.append(_verdict(api, case, rank, world_size))
            dist.barrier()  # (a case that failed on one side leaves no message behind)
        every = [None] * world_size  # each rank's verdicts: the table shows the worst
        dist.all_gather_object(every, verdicts)
        worst = [_worst(v) for v in zip(*every)]
        rows.append(f"| {name} | {worst[0]} | {worst[1]} |")
    if rank == 0:
        Path(out).write_text("\n".join(rows) + "\n")
    dist.destroy_process_group()
    os._exit(0)


def main() -> None:
    import tempfile

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as directory:
        out = os.path.join(directory, "rows.md")
        mp.spawn(_rank, args=(2, port, out), nprocs=2)
        rows = Path(out).read_text()
    print(f"torch {torch.__version__}, gloo, 2 processes, float64\n")
    print("| case | native `forward_ad` | dualgen |\n|---|---|---|")
    print(rows, end="")


if __name__ == "__main__":
    main()
