"""dualgen: forward-mode AD for PyTorch, generated from a derivatives spec.

`dualgen.forward_ad` has the API of `torch.autograd.forward_ad`, with nested levels;
`dualgen.register_jvp` adds JVP rules for any operator, custom ops included;
`dualgen.load_kernels` adds the kernels generated from a library's own spec;
`dualgen.gradcheck` / `gradgradcheck` / `adjoint_check` prove the formulas.
"""

from . import forward_ad
from .backend import kernel_backend, set_kernel_backend
from .harness import GradcheckError, adjoint_check, gradcheck, gradgradcheck
from .rules import load_kernels, register_jvp, unload_kernels, unregister_jvp

__all__ = [
    "GradcheckError",
    "adjoint_check",
    "forward_ad",
    "gradcheck",
    "gradgradcheck",
    "kernel_backend",
    "load_kernels",
    "register_jvp",
    "set_kernel_backend",
    "unload_kernels",
    "unregister_jvp",
]
__version__ = "0.1.0"
