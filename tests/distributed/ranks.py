"""Run functions on several processes of one torch.distributed group.

`run_cases(module_name, world_size)` spawns `world_size` ranks (gloo on free
ports; NCCL, one GPU per rank, where enough GPUs exist), and each rank runs every
case of the module (`CASES`, functions of (rank, world_size, device)) in order,
writing a line per case as it finishes, so a case that hangs is named, not just
timed out. Every case runs on every rank, as SPMD code does. The whole run is
under a timeout: a hang fails instead of blocking CI.
"""

from __future__ import annotations

import datetime
import importlib
import json
import os
import socket
import tempfile
import time
import traceback
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.multiprocessing.spawn import ProcessException

COLLECTIVE_TIMEOUT = datetime.timedelta(seconds=60)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def backend_for(world_size: int) -> str:
    if torch.cuda.is_available() and torch.cuda.device_count() >= world_size:
        return "nccl"
    return "gloo"


def run_cases(module_name: str, world_size: int, timeout: float = 240) -> dict:
    """{case name: {rank: None (passed) or the failure's text}}."""
    with tempfile.TemporaryDirectory() as directory:
        context = mp.start_processes(
            _rank_main,
            args=(world_size, free_port(), module_name, directory),
            nprocs=world_size,
            join=False,
            start_method="spawn",
        )
        deadline = time.monotonic() + timeout
        finished = False
        while time.monotonic() < deadline:
            try:
                if context.join(timeout=1):
                    finished = True
                    break
            except ProcessException as error:
                raise AssertionError(
                    f"a rank failed outside the cases: {error}"
                ) from None
        if not finished:
            for process in context.processes:
                process.kill()
        results = _results(Path(directory), world_size)
    if not finished:
        done = set(results)
        raise AssertionError(
            f"{world_size} ranks did not finish in {timeout:.0f} s; cases finished: "
            f"{sorted(done)}"
        )
    return results


def results_fixture(module_name: str):
    """A module-scoped fixture running every case of `module_name` once on 2 and
    once on 4 ranks: (world size, {case: {rank: error or None}})."""

    @pytest.fixture(scope="module", params=[2, 4], ids=lambda n: f"{n}ranks")
    def results(request):
        return request.param, run_cases(module_name, request.param)

    return results


def check_case(results, name: str) -> None:
    """The case `name` ran on every rank and passed on every rank."""
    world_size, by_case = results
    outcome = by_case.get(name)
    assert outcome is not None, f"{name} did not run"
    assert len(outcome) == world_size, f"ranks that reported: {sorted(outcome)}"
    failures = {rank: error for rank, error in outcome.items() if error}
    assert not failures, "\n".join(f"rank {r}:\n{e}" for r, e in failures.items())


def _results(directory: Path, world_size: int) -> dict:
    results: dict = {}
    for rank in range(world_size):
        path = directory / f"rank{rank}.jsonl"
        if not path.exists():
            continue
        for line in path.read_text().splitlines():
            record = json.loads(line)
            results.setdefault(record["case"], {})[rank] = record["error"]
    return results


def _rank_main(rank: int, world_size: int, port: int, module_name: str, directory: str):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    backend = backend_for(world_size)
    device = torch.device(f"cuda:{rank}") if backend == "nccl" else torch.device("cpu")
    if backend == "nccl":
        torch.cuda.set_device(device)
    dist.init_process_group(
        backend, rank=rank, world_size=world_size, timeout=COLLECTIVE_TIMEOUT
    )
    module = importlib.import_module(module_name)
    out = Path(directory) / f"rank{rank}.jsonl"
    try:
        for case in module.CASES:
            try:
                case(rank, world_size, device)
                error = None
            except Exception:  # noqa: BLE001 - reported per case
                error = traceback.format_exc(limit=6)
            with out.open("a") as f:
                f.write(json.dumps({"case": case.__name__, "error": error}) + "\n")
    finally:
        dist.destroy_process_group()
    # Interpreter teardown with the process group's threads about sometimes ends
    # in std::terminate (SIGABRT) after everything is done: skip it.
    os._exit(0)
