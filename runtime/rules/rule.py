"""The record of one op's JVP rule (`Rule`), as the dispatch mode calls it,
and the schema facts every reader of rules needs. A leaf: it imports nothing of
dualgen's."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

TENSOR_TYPES = ("Tensor", "Optional[Tensor]", "List[Tensor]", "List[Optional[Tensor]]")


def is_tensor_like(arg: torch.Argument) -> bool:
    return str(arg.type) in TENSOR_TYPES


def output_names(schema: torch.FunctionSchema) -> tuple[str, ...]:
    returns = schema.returns
    if len(returns) == 1:
        return ("result",)
    return tuple(r.name or f"result{i}" for i, r in enumerate(returns))


@dataclass(frozen=True)
class Rule:
    """How the mode calls one op's JVP: `call(primals, tangents, outputs)`.

    `primals` are all arguments in schema order, `tangents` those of
    `differentiable_inputs` (None where absent), `outputs` the op's outputs.
    """

    op: torch._ops.OpOverload
    kind: str  # "functional", "inplace", "view", "user"
    differentiable_inputs: tuple[str, ...]
    differentiable_outputs: tuple[bool, ...]  # per schema output
    needs_original_self: bool
    uses_outputs: bool
    call: Callable
    origin: str  # where the rule was written, for messages
    element_wise_jvp: bool = False  # auto_element_wise (KernelInfo.element_wise_jvp)
    # The arguments' names in the spec (KernelInfo.arguments), which a torch
    # release may name otherwise (`renamed_in_torch`); None: the op's schema's.
    argument_names: tuple[str, ...] | None = None

    @property
    def input_indices(self) -> tuple[int, ...]:
        """Positions of the differentiable inputs among the schema's arguments."""
        cached = self.__dict__.get("_input_indices")
        if cached is None:
            names = self.argument_names or [a.name for a in self.op._schema.arguments]
            cached = tuple(names.index(n) for n in self.differentiable_inputs)
            object.__setattr__(self, "_input_indices", cached)
        return cached
