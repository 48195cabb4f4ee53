"""examples/distributed: the data-parallel forward-gradient training lowers the
loss; the tensor-parallel JVP matches one process on every rank."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_data_parallel_forward_gradient_lowers_the_loss():
    from examples.distributed.data_parallel_forward_gradient import run

    losses = run(world_size=2, steps=60)
    assert len(losses) == 60
    assert losses[-1] < losses[0] - 0.02, (losses[0], losses[-1])


def test_tensor_parallel_jvp_matches_one_process():
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "examples.distributed.tensor_parallel_jvp",
            "--ranks",
            "2",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        check=True,
    ).stdout
    errors = [
        float(v)
        for v in re.findall(r"off by ([0-9.e+-]+)|by ([0-9.e+-]+) \(", out)
        for v in v
        if v
    ]
    assert len(errors) == 4, out  # two ranks, input and parameters each
    assert max(errors) < 1e-12, out
