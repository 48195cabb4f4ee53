"""The gradcheck harness: dualgen's derivatives against finite differences.

`gradcheck` and `gradgradcheck` take the parameters of their torch.autograd
namesakes; `adjoint_check` compares the forward and backward kernels directly;
`jetcheck` compares Taylor mode with nested forward levels;
`reverse_over_forward_check` compares autograd's gradient of a tangent with
finite differences (reverse_check.py).
"""

from .check import adjoint_check, gradcheck, gradgradcheck
from .compare import GradcheckError
from .jet_check import jetcheck
from .reverse_check import reverse_over_forward_check

__all__ = [
    "GradcheckError",
    "adjoint_check",
    "gradcheck",
    "gradgradcheck",
    "jetcheck",
    "reverse_over_forward_check",
]
