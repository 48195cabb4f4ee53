"""The gradcheck harness: dualgen's derivatives against finite differences.

`gradcheck` and `gradgradcheck` take the parameters of their torch.autograd
namesakes; `adjoint_check` compares the forward and backward kernels directly.
"""

from .check import adjoint_check, gradcheck, gradgradcheck
from .compare import GradcheckError

__all__ = ["GradcheckError", "adjoint_check", "gradcheck", "gradgradcheck"]
