"""dualgen: forward-mode AD for PyTorch, generated from a derivatives spec.

`dualgen.forward_ad` has the API of `torch.autograd.forward_ad`, with nested levels;
`dualgen.register_jvp` adds JVP rules for any operator, custom ops included;
`dualgen.load_kernels` adds the kernels generated from a library's own spec;
`dualgen.gradcheck` / `gradgradcheck` / `adjoint_check` prove the formulas;
`dualgen.functional` and `dualgen.func` are the high-level APIs of
`torch.autograd.functional` and `torch.func`, in forward mode;
`dualgen.jet` propagates Taylor series of any order (Taylor mode);
`dualgen.distributed.make_packed_dual` lays a dual out for collectives with no
copies (collectives carry tangents by themselves).
"""

import importlib

from . import torch_features

torch_features.check_import()  # the internals its modules look up as they import

from . import forward_ad, torch_support
from .backend import kernel_backend, set_kernel_backend
from .harness import GradcheckError, adjoint_check, gradcheck, gradgradcheck, jetcheck
from .rules.table import load_kernels, register_jvp, unload_kernels, unregister_jvp
from .taylor_mode import jet
from .versions import dualgen_version

__all__ = [
    "GradcheckError",
    "adjoint_check",
    "distributed",
    "forward_ad",
    "func",
    "functional",
    "gradcheck",
    "gradgradcheck",
    "jet",
    "jetcheck",
    "kernel_backend",
    "load_kernels",
    "operators",
    "register_jvp",
    "set_kernel_backend",
    "unload_kernels",
    "unregister_jvp",
]
__version__ = dualgen_version()

torch_support.warn_if_untested()

# imported on first use: nothing else needs them
_LAZY = ("distributed", "func", "functional", "operators")
_FEATURE = {"distributed": "collectives", "operators": "fx"}


def __getattr__(name: str):
    if name in _LAZY:
        torch_features.require(_FEATURE.get(name, name))
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
