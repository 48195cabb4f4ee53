"""dualgen: forward-mode AD for PyTorch, generated from a derivatives spec.

`dualgen.forward_ad` has the API of `torch.autograd.forward_ad`, with nested levels;
`dualgen.register_jvp` adds JVP rules for any operator, custom ops included.
"""

from . import forward_ad
from .rules import register_jvp, unregister_jvp

__all__ = ["forward_ad", "register_jvp", "unregister_jvp"]
__version__ = "0.1.0"
