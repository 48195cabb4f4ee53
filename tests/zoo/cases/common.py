"""The zoo's registry: `Case`, the `case` decorator, and `CASES`, which every family
module fills as it is imported (in the order `__init__.py` imports them).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

ALL_DTYPES = (torch.float32, torch.float64)


@dataclass
class Case:
    name: str
    family: str
    fn: object
    channels_last: bool = False
    dtypes: tuple = ALL_DTYPES
    no_fd: str | None = None  # why finite differences are no reference here


CASES: dict[str, Case] = {}


def case(family, channels_last=False, name=None, no_fd=None):
    def deco(fn):
        n = name or fn.__name__
        CASES[n] = Case(n, family, fn, no_fd=no_fd)
        if channels_last:
            CASES[n + "[cl]"] = Case(
                n + "[cl]", family, fn, channels_last=True, no_fd=no_fd
            )
        return fn

    return deco
