"""What the distributed examples share: their ranks as processes on this machine,
joined in one gloo process group."""

from __future__ import annotations

import datetime
import os
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def spawn(rank_main, world_size: int, *args) -> None:
    """rank_main(rank, world_size, *args) in `world_size` processes, each a rank
    of one process group for the call."""
    with socket.socket() as s:  # a free port for the group's rendezvous
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(_in_group, args=(rank_main, world_size, port, *args), nprocs=world_size)


def _in_group(rank: int, rank_main, world_size: int, port: int, *args) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)  # the ranks share the machine's cores
    timeout = datetime.timedelta(seconds=60)
    dist.init_process_group("gloo", rank=rank, world_size=world_size, timeout=timeout)
    rank_main(rank, world_size, *args)
    dist.destroy_process_group()
    os._exit(0)  # (skips interpreter teardown beside the process group's threads)
