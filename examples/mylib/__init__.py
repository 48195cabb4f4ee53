"""mylib: an example library with a custom operator and its dualgen derivatives.

`mylib.ops` registers `mylib::softclip` with `torch.library.custom_op`;
`mylib/derivatives.yaml` describes its derivatives, and `dualgen generate` turns
that spec into the kernel package `mylib._derivatives`, which
`dualgen.load_kernels("mylib._derivatives")` adds to dualgen
(docs/custom_ops.md).
"""

from . import ops
from .ops import softclip

__all__ = ["ops", "softclip"]
