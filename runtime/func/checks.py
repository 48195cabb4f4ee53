"""torch.func's argument and output checks, with its exception types and messages.

`dualgen.func` raises exactly what `torch.func` raises for the same mistake. Where
torch's own helper (in `torch._functorch`, already imported by `import torch`) is a
pure check with no functorch state, it is called as it is; the checks that torch
writes inline, or that read state dualgen keeps elsewhere, are written here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch._functorch.eager_transforms import (
    _replace_args,
    _slice_argnums,
    assert_non_empty_list_of_tensors,
    assert_non_empty_tensor_output,
    error_if_complex,
)
from torch._functorch.vmap import _check_randomness_arg
from torch.utils._pytree import TreeSpec, tree_leaves

__all__ = [
    "JVP_API",
    "PrimalMeta",
    "assert_non_empty_list_of_tensors",
    "assert_non_empty_tensor_output",
    "check_aux",
    "check_chunk_size",
    "check_linearize_tangents",
    "check_primals_tuple",
    "check_randomness",
    "check_same_structure",
    "check_scalar_output",
    "error_if_complex",
    "replace_args",
    "slice_argnums",
    "split_aux",
    "strict_independent_output",
]

# torch.func names every jvp error after this call, also when jacfwd called jvp.
JVP_API = "jvp(f, primals, tangents)"

slice_argnums = _slice_argnums
replace_args = _replace_args
check_randomness = _check_randomness_arg


# torch.func raises RuntimeError for wrong types too; so do we (hence noqa: TRY004).


def check_primals_tuple(primals: Any) -> None:
    if not isinstance(primals, tuple):
        raise RuntimeError(  # noqa: TRY004
            f"{JVP_API}: Expected primals to be a tuple. "
            "E.g. it should be valid to call f(*primals)."
        )


def check_same_structure(primals_spec: TreeSpec, tangents_spec: TreeSpec) -> None:
    if primals_spec != tangents_spec:
        raise RuntimeError(
            f"{JVP_API}: Expected primals and tangents to have the same python "
            "structure. For example, if primals is a tuple of 3 tensors, "
            "tangents also must be. Got primals with structure "
            f"{primals_spec} and tangents with structure {tangents_spec}"
        )


def split_aux(result: Any, api: str) -> tuple[Any, Any]:
    """`(output, aux)` from what f returned with has_aux=True."""
    if not (isinstance(result, tuple) and len(result) == 2):
        raise RuntimeError(
            f"{api}: output of function f should be a tuple: (output, aux) "
            "if has_aux is True"
        )
    return result


def check_aux(aux: Any) -> None:
    """torch.func unwraps every leaf of aux as a tensor, so it takes only tensors."""
    for leaf in tree_leaves(aux):
        if not isinstance(leaf, torch.Tensor):
            message = f"Expected tensors, got unsupported type {type(leaf)}"
            raise RuntimeError(message)  # noqa: TRY004


def strict_independent_output() -> RuntimeError:
    return RuntimeError(
        "jvp(f, primals, tangents, strict=True): The output of f is independent "
        "of the inputs. This is not allowed with strict=True."
    )


def check_chunk_size(chunk_size: int | None, api: str) -> None:
    if not (chunk_size is None or chunk_size > 0):
        raise ValueError(f"{api}: `chunk_size` should be greater than 0.")


def check_scalar_output(output: Any, api: str) -> None:
    """torch.func.grad's checks of what f returned."""
    if not isinstance(output, torch.Tensor):
        raise RuntimeError(  # noqa: TRY004
            f"{api}: Expected f(*args) to return a Tensor, got {type(output)}"
        )
    if output.dim() != 0:
        raise RuntimeError(
            f"{api}: Expected f(*args) to return a scalar Tensor, got tensor with "
            f"{output.dim()} dims. Maybe you wanted to use the vjp or jacrev APIs "
            "instead?"
        )


@dataclass(frozen=True)
class PrimalMeta:
    """What linearize keeps of each primal to check later tangents against."""

    shape: torch.Size
    device: torch.device
    dtype: torch.dtype

    @classmethod
    def of(cls, primal: torch.Tensor) -> PrimalMeta:
        return cls(primal.shape, primal.device, primal.dtype)


def check_linearize_tangents(
    flat_tangents: list[Any],
    tangents_spec: TreeSpec,
    primals_spec: TreeSpec,
    metas: tuple[PrimalMeta, ...],
) -> None:
    """torch.func.linearize's checks of the tangents given to its jvp_fn."""
    if tangents_spec != primals_spec:
        raise RuntimeError(
            f"Expected the tangents {tangents_spec} to have "
            f"the same argspec as the primals {primals_spec}"
        )
    for index, (tangent, meta) in enumerate(zip(flat_tangents, metas)):
        for what in ("shape", "device", "dtype"):
            given, wanted = getattr(tangent, what), getattr(meta, what)
            if given != wanted:
                raise RuntimeError(
                    f"tangent:{index} with {what} {given} in flattened pytree "
                    f"doesn't match the {what} {wanted} of the corresponding primal."
                )
