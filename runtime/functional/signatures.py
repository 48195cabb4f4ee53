"""dualgen.functional's functions take torch.autograd.functional's parameters:
the same names, order, defaults and annotations, read from torch's own functions
once (so they cannot drift), plus dualgen's `fw_mode` where there is one."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable

FW_MODE = inspect.Parameter(
    "fw_mode", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=True, annotation=bool
)


def torch_parameters(
    torch_function: Callable, *extra: inspect.Parameter
) -> Callable[[Callable], Callable]:
    """A decorator: the function is called with `torch_function`'s parameters (and
    `extra` after them), bound as Python binds them (defaults applied, a
    TypeError for what does not bind), and shows them (`help`,
    `inspect.signature`). The decorated body names every parameter, no defaults."""
    torch_signature = inspect.signature(torch_function)
    signature = torch_signature.replace(
        parameters=[*torch_signature.parameters.values(), *extra]
    )

    def decorate(body: Callable) -> Callable:
        @functools.wraps(body)
        def bound(*args, **kwargs):
            arguments = signature.bind(*args, **kwargs)
            arguments.apply_defaults()
            return body(**arguments.arguments)

        bound.__signature__ = signature
        return bound

    return decorate
