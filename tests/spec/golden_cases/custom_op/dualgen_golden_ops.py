"""The custom op of the golden case custom_op: importing this module registers
dualgen_golden::mulexp (the spec's `--import`)."""

import torch


@torch.library.custom_op("dualgen_golden::mulexp", mutates_args=())
def mulexp(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """x * exp(y)."""
    return x * torch.exp(y)
