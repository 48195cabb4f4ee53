"""The example custom-op library, examples/mylib, made importable for the tests:
`mylib` (importing it registers mylib::softclip), its op and its kernel package."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
if str(EXAMPLES) not in sys.path:
    sys.path.insert(0, str(EXAMPLES))

import mylib

SOFTCLIP = torch.ops.mylib.softclip.default
PACKAGE = "mylib._derivatives"

__all__ = ["EXAMPLES", "PACKAGE", "SOFTCLIP", "mylib"]
