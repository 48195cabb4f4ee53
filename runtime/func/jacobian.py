"""jacfwd and hessian: Jacobians by forward mode, with batched tangents.

jacfwd pushes the columns of the identity through `jvp.flat_jvp`, as
torch.func.jacfwd does, but batches them with torch's legacy vmap (through
`dualgen.forward_columns`, the engine `dualgen.functional` uses too), which dualgen
takes for the tangent of a plain primal: the function runs once on its primals
while its tangents carry every column, and the kernels run on the whole batch
(legacy vmap's batching rules, and those dualgen adds: csrc/dualgen/batching.cpp).
The arguments are checked once, as torch.func.jvp checks them, not once a pass. `chunk_size` columns go in each pass (1: one column at a time, with no
vmap). A pass the legacy vmap cannot batch (a dualgen.func transform nested
inside, which would make a dual of a dual whose tangent is batched; an op without a
batching rule) is redone one column at a time, as are all later ones.

hessian is forward over reverse: jacfwd of the Jacobian that
`torch.autograd.grad` computes inside jacfwd's level, whose tangents are the
Hessian's columns.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._pytree import TreeSpec, tree_flatten, tree_leaves, tree_unflatten

from ..forward_columns import basis, push_batched
from . import checks
from .jvp import ArgNums, FlatJvp, Unbatchable, flat_jvp
from .randomness import RANDOM_OP_ERROR, Randomness
from .vmap import is_functorch_wrapped, refuse_batched_reverse

__all__ = ["gradient", "hessian", "jacfwd", "requiring_grad", "reverse_jacobian"]

# Messages of failures that only batching causes: the legacy vmap's own, and
# dualgen's refusal of a tangent batched twice.
_BATCHING_FAILURES = (
    "Batching rule not implemented for",
    "vmap: ",
    "dualgen cannot make a dual of a tensor batched by vmap",
)


@dataclass(frozen=True)
class _Columns:
    """What one pass of jacfwd gives: per output leaf, the output's tangents for
    the pass's columns stacked along a new first dimension."""

    flat: list[torch.Tensor]
    spec: TreeSpec
    aux: Any


@dataclass(frozen=True)
class _Pusher:
    """Pushes tangents (the basis, flat like the differentiated args, whose
    structure `diff` holds with them) through func at args."""

    func: Callable[..., Any]
    args: tuple[Any, ...]
    argnums: ArgNums
    has_aux: bool
    diff: tuple[list[torch.Tensor], TreeSpec]

    def __call__(self, flat_basis, batched: bool) -> FlatJvp:
        out = flat_jvp(
            self.func,
            self.args,
            self.argnums,
            self.diff,
            list(flat_basis),
            has_aux=self.has_aux,
            api="jacfwd",
            batched=batched,
        )
        checks.error_if_complex("jacfwd", out.primals, is_input=False)
        return out

    def column(self, flat_basis) -> _Columns:
        out = self(flat_basis, batched=False)
        return _Columns([t.unsqueeze(0) for t in out.tangents], out.spec, out.aux)

    def batched(self, flat_basis) -> _Columns:
        found = {}

        def push(*basis):
            out = self(basis, batched=True)
            flat_aux, aux_spec = tree_flatten(out.aux) if self.has_aux else ([], None)
            found.update(count=len(out.tangents), spec=out.spec, aux_spec=aux_spec)
            return (*out.tangents, *flat_aux)  # the legacy vmap returns tensors only

        outputs = push_batched(push, flat_basis)
        count, aux = found["count"], None
        if self.has_aux:  # computed from the primals alone; torch.func takes column 0
            aux = tree_unflatten([t[0] for t in outputs[count:]], found["aux_spec"])
        return _Columns(list(outputs[:count]), found["spec"], aux)


def _is_batching_failure(error: Exception) -> bool:
    if isinstance(error, Unbatchable):
        return True
    message = str(error) if isinstance(error, RuntimeError) else ""
    return message.startswith(_BATCHING_FAILURES) and message != RANDOM_OP_ERROR


def _run_passes(
    pusher: _Pusher, flat_primals, numels, chunk_size, randomness
) -> _Columns:
    total = sum(numels)
    if total == 0:  # no columns, but the outputs' structure still comes from f
        out = pusher(basis(flat_primals, numels, 0, 1, False), False)
        flat = [t.new_zeros((0, *t.shape)) for t in out.tangents]
        return _Columns(flat, out.spec, out.aux)
    rng = Randomness(randomness)
    size = 1 if randomness == "different" else chunk_size or total
    # Under torch.vmap the physical duals would mix both vmaps: one column a pass.
    batching = size > 1 and not any(map(is_functorch_wrapped, tree_leaves(pusher.args)))
    passes: list[_Columns] = []
    for start in range(0, total, size):
        stop = min(start + size, total)
        if batching and stop - start > 1:
            try:
                with rng.one_pass():
                    passes.append(
                        pusher.batched(basis(flat_primals, numels, start, stop, True))
                    )
                continue
            except Exception as error:
                if not _is_batching_failure(error):
                    raise
                batching = False  # and this pass again, a column at a time
        for column in range(start, stop):
            with rng.one_pass():
                passes.append(
                    pusher.column(
                        basis(flat_primals, numels, column, column + 1, False)
                    )
                )
    if len(passes) == 1:
        return passes[0]
    flat = [torch.cat(parts) for parts in zip(*(p.flat for p in passes))]
    return _Columns(flat, passes[0].spec, passes[0].aux)


def _unflatten_last(t: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    if len(shape) == 1:  # (already so)
        return t
    return t.squeeze(-1) if len(shape) == 0 else t.unflatten(-1, shape)


def _per_input(jac_out, flat_primals, numels, primals_spec, argnums) -> Any:
    """An output's Jacobian (columns first) split into one per differentiated input,
    in the structure of the inputs (the input's alone for an int argnums)."""
    columns_last = jac_out.movedim(0, -1)
    if len(numels) == 1:
        pieces = (columns_last,)
    else:
        pieces = torch.split(columns_last, list(numels), dim=-1)
    per_input = [
        _unflatten_last(piece, p.shape) for p, piece in zip(flat_primals, pieces)
    ]
    nested = tree_unflatten(per_input, primals_spec)
    return nested[0] if isinstance(argnums, int) else nested


def jacfwd(
    func: Callable[..., Any],
    argnums: ArgNums = 0,
    has_aux: bool = False,
    *,
    chunk_size: int | None = None,
    randomness: str = "error",
) -> Callable[..., Any]:
    """torch.func.jacfwd by dualgen's forward mode, with torch.func's signature,
    checks and output structure: the Jacobian of `func` with respect to the
    args at `argnums`, (jacobian, aux) with `has_aux`.

    `chunk_size` columns are computed per pass, their tangents batched (None:
    all at once; 1: one column at a time, without vmap). `randomness`: "error"
    raises torch.func's error when func draws from the default generators (seen
    by their state, so a random op given its own generator is not seen); "same"
    replays the generators' state for each pass, so every column sees the same
    draws; "different" computes one column a pass, each with its own draws. A
    function that draws is computed a column a pass (`randomness.py`).
    """
    checks.check_chunk_size(chunk_size, "jacfwd")

    @functools.wraps(func)
    def wrapper_fn(*args: Any) -> Any:
        checks.error_if_complex("jacfwd", args, is_input=True)
        checks.check_randomness(randomness)
        primals = checks.slice_argnums(args, argnums)
        flat_primals, primals_spec = tree_flatten(primals)
        numels = tuple(p.numel() for p in flat_primals)
        # torch.func.jvp's check of the primals, once rather than once a pass
        checks.assert_non_empty_list_of_tensors(flat_primals, checks.JVP_API, "primals")
        diff = (flat_primals, primals_spec)
        pusher = _Pusher(func, args, argnums, has_aux, diff)
        columns = _run_passes(pusher, flat_primals, numels, chunk_size, randomness)
        jacobians = [
            _per_input(jac_out, flat_primals, numels, primals_spec, argnums)
            for jac_out in columns.flat
        ]
        result = tree_unflatten(jacobians, columns.spec)
        return (result, columns.aux) if has_aux else result

    return wrapper_fn


def requiring_grad(t: torch.Tensor) -> torch.Tensor:
    """t, or t plus a zero leaf that requires grad: the same value and tangents at
    every level (detaching would drop those), for torch.autograd.grad to
    differentiate with respect to."""
    if t.requires_grad:
        return t
    return t + torch.zeros((), dtype=t.dtype, device=t.device, requires_grad=True)


@dataclass(frozen=True)
class _ReverseCall:
    """func called at args with the differentiated ones made to require grad."""

    output: Any
    inputs: list[torch.Tensor]  # flat, as torch.autograd.grad takes them
    inputs_spec: TreeSpec
    # Keep the graph when the inputs require grad, so that the result is
    # differentiable in reverse mode, as torch.func's is.
    create_graph: bool

    @classmethod
    def of(
        cls, func: Callable[..., Any], args: tuple, argnums: ArgNums, api: str
    ) -> _ReverseCall:
        flat, spec = tree_flatten(checks.slice_argnums(args, argnums))
        refuse_batched_reverse(api, flat)
        create_graph = torch.is_grad_enabled() and any(t.requires_grad for t in flat)
        inputs = [requiring_grad(t) for t in flat]
        output = func(*checks.replace_args(args, tree_unflatten(inputs, spec), argnums))
        refuse_batched_reverse(api, tree_leaves(output))
        return cls(output, inputs, spec, create_graph)

    def jacobian_of(self, output: torch.Tensor, argnums: ArgNums) -> Any:
        """The Jacobian of one output with respect to the inputs, in their
        structure (the input's alone for an int argnums)."""
        nested = tree_unflatten(
            _rows(output, self.inputs, self.create_graph), self.inputs_spec
        )
        return nested[0] if isinstance(argnums, int) else nested


def _rows(output: torch.Tensor, inputs: list, create_graph: bool) -> list:
    """The Jacobian of output with respect to each input by reverse mode, shaped
    output.shape + input.shape; a row per output element."""
    shapes = [(*output.shape, *t.shape) for t in inputs]
    if not output.requires_grad or output.numel() == 0:
        return [t.new_zeros(shape) for t, shape in zip(inputs, shapes)]
    rows = []
    for index in range(output.numel()):
        cotangent = None
        if output.dim():
            cotangent = torch.zeros(
                output.numel(), dtype=output.dtype, device=output.device
            )
            cotangent[index] = 1
            cotangent = cotangent.view(output.shape)
        rows.append(
            torch.autograd.grad(
                output,
                inputs,
                cotangent,
                retain_graph=True,
                create_graph=create_graph,
                allow_unused=True,
                materialize_grads=True,
            )
        )
    return [
        torch.stack(per_input).view(shape)
        for per_input, shape in zip(zip(*rows), shapes)
    ]


def reverse_jacobian(func: Callable[..., Any], argnums: ArgNums) -> Callable[..., Any]:
    """torch.func.jacrev(func, argnums)'s result by torch.autograd.grad, which
    dualgen differentiates in forward mode (the reverse half of hessian)."""

    @functools.wraps(func)
    def jacobian_fn(*args: Any) -> Any:
        call = _ReverseCall.of(func, args, argnums, "hessian")
        flat_outputs, outputs_spec = tree_flatten(call.output)
        checks.assert_non_empty_tensor_output(flat_outputs, "vjp(f, *primals)")
        checks.error_if_complex("jacrev", flat_outputs, is_input=False)
        jacobians = [call.jacobian_of(out, argnums) for out in flat_outputs]
        return tree_unflatten(jacobians, outputs_spec)

    return jacobian_fn


def gradient(func: Callable[..., Any], argnums: ArgNums) -> Callable[..., Any]:
    """torch.func.grad(func, argnums)'s result by torch.autograd.grad, with its
    checks (the reverse half of hvp)."""

    @functools.wraps(func)
    def gradient_fn(*args: Any) -> Any:
        call = _ReverseCall.of(func, args, argnums, "hvp")
        checks.check_scalar_output(call.output, "grad_and_value(f)(*args)")
        return call.jacobian_of(call.output, argnums)

    return gradient_fn


def hessian(func: Callable[..., Any], argnums: ArgNums = 0) -> Callable[..., Any]:
    """torch.func.hessian by forward over reverse: jacfwd of the Jacobian
    `torch.autograd.grad` computes inside jacfwd's dual level; the same output
    structure (output, then argnums, then argnums)."""
    return jacfwd(reverse_jacobian(func, argnums), argnums)
