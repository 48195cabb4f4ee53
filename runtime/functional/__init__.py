"""`dualgen.functional`: the API of `torch.autograd.functional`, in forward mode.

    import dualgen.functional as AF          # instead of torch.autograd.functional

    out, jv = AF.jvp(f, x, v)                # forward mode, no double backward
    out, hv = AF.hvp(loss, w, v)             # forward over reverse
    J = AF.jacobian(f, x, strategy="forward-mode", vectorize=False)
    H = AF.hessian(loss, w, vectorize=True)

Same names, parameters, defaults, return structures and errors as torch's. Where
torch takes a derivative in forward mode by the double-backward trick (`jvp`, `hvp`)
or by native forward AD (`jacobian(strategy="forward-mode")`, the forward-mode outer
Jacobian of `hessian`), these functions take it by true forward mode through
`dualgen.forward_ad`. Reverse mode (`vjp`, reverse-mode `jacobian`) is torch's own.

Beyond torch: forward-mode `jacobian` computes with `vectorize=False` (column by
column) and with `create_graph=True`, where torch raises; `hessian`, `hvp` and `vhp`
take `fw_mode` (default True: forward over reverse through dualgen; False: torch's).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.autograd.functional as torch_functional
from torch.autograd.functional import (
    _as_tuple,
    _autograd_grad,
    _check_requires_grad,
    _fill_in_zeros,
    _grad_postprocess,
    _grad_preprocess,
    _tuple_postprocess,
    _validate_v,
)

from .. import forward_ad as fwAD
from .forward import (
    ForwardJacobian,
    HessianGradient,
    Tensors,
    check_outer_jacobian,
    check_scalar_output,
    forward_jacobian,
)
from .signatures import FW_MODE, torch_parameters

__all__ = ["hessian", "hvp", "jacobian", "jvp", "vhp", "vjp"]

TensorOrTensors = torch.Tensor | tuple[torch.Tensor, ...]
Function = Callable[..., object]

_FORWARD_STRICT = (
    "torch.autograd.functional.jacobian: `strict=True` "
    'and `strategy="forward-mode"` are not supported together (yet). '
    "Please either set `strict=False` or "
    '`strategy="reverse-mode"`.'
)
_VECTORIZED_STRICT = (
    "torch.autograd.functional.jacobian: `strict=True` "
    "and `vectorized=True` are not supported together. "
    "Please either set `strict=False` or "
    "`vectorize=False`."
)


def _directions(
    v: TensorOrTensors | None,
    inputs: Tensors,
    is_inputs_tuple: bool,
    fn_name: str,
    create_graph: bool,
) -> Tensors:
    """The tangents, checked as torch checks `v`; one 1 for a one-element input."""
    if v is not None:
        _, v = _as_tuple(v, "v", fn_name)
        v = _grad_preprocess(v, create_graph=create_graph, need_graph=False)
        _validate_v(v, inputs, is_inputs_tuple)
        return v
    if len(inputs) != 1 or inputs[0].nelement() != 1:
        raise RuntimeError(
            "The vector v can only be None if the input to the user-provided function "
            "is a single Tensor with a single element."
        )
    if inputs[0].is_complex():  # torch's implicit 1 comes from autograd, which refuses
        raise RuntimeError(
            "grad can be implicitly created only for real scalar outputs but got "
            f"{inputs[0].dtype}"
        )
    return (torch.ones_like(inputs[0]),)


def _check_every_input_used(outputs: Tensors, inputs: Tensors) -> None:
    """torch's strict check that each input reaches some output. Forward mode, with
    every input dual at once, cannot tell which input a tangent came from: one
    reverse pass (strict mode only) finds an input no output depends on."""
    grad_outputs = tuple(torch.zeros_like(out, requires_grad=True) for out in outputs)
    grad_inputs = _autograd_grad(outputs, inputs, grad_outputs, create_graph=True)
    _check_requires_grad(grad_inputs, "grad_inputs", strict=True)


@torch_parameters(torch_functional.jvp)
def jvp(func, inputs, v, create_graph, strict) -> tuple:
    """`(func(inputs), J v)` by forward mode: `torch.autograd.functional.jvp`.

    The inputs are made dual with tangents `v` in a `dualgen.forward_ad` level and
    `func` runs once. As torch's, `func` sees inputs that require grad (so it may
    call `torch.autograd.grad` itself); with `create_graph=True` the outputs and the
    JVP are differentiable with respect to the inputs and `v` (reverse over
    forward), otherwise detached. `strict=True` raises torch's errors, in its
    order: an output that does not require grad, an input no output depends on
    (found by one reverse pass), an output without a tangent. An integer output
    gets a zero JVP, as in `torch.func.jvp` (torch's trick raises there).
    """
    with torch.enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jvp")
        inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
        v = _directions(v, inputs, is_inputs_tuple, "jvp", create_graph)
        with fwAD.dual_level():
            duals = tuple(fwAD.make_dual(x, t) for x, t in zip(inputs, v))
            is_outputs_tuple, outputs = _as_tuple(
                func(*duals), "outputs of the user-provided function", "jvp"
            )
            tangents = tuple(fwAD.unpack_dual(out).tangent for out in outputs)
        if strict:
            _check_requires_grad(outputs, "outputs", strict=True)
            _check_every_input_used(outputs, inputs)
        products = _fill_in_zeros(tangents, outputs, strict, create_graph, "back_trick")
    outputs = _grad_postprocess(outputs, create_graph)
    products = _grad_postprocess(products, create_graph)
    return _tuple_postprocess(outputs, is_outputs_tuple), _tuple_postprocess(
        products, is_outputs_tuple
    )


# `(func(inputs), v^T J)`: reverse mode is torch's own, the same function.
vjp = torch_functional.vjp


@dataclass(frozen=True)
class _JacobianCall:
    """What `jacobian` and `hessian` do alike with torch's arguments: the inputs
    as a tuple (and whether they came as one), preprocessed as torch does, and
    the blocks returned in torch's structure (detached unless create_graph)."""

    is_inputs_tuple: bool
    inputs: Tensors
    create_graph: bool

    @classmethod
    def of(
        cls, inputs: TensorOrTensors, fn_name: str, create_graph: bool
    ) -> _JacobianCall:
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", fn_name)
        return cls(is_inputs_tuple, inputs, create_graph)

    def preprocessed(self, need_graph: bool) -> Tensors:
        return _grad_preprocess(
            self.inputs, create_graph=self.create_graph, need_graph=need_graph
        )

    def returned(
        self, jacobian: ForwardJacobian, is_outputs_tuple: bool
    ) -> TensorOrTensors | tuple[Tensors, ...]:
        blocks = _grad_postprocess(jacobian.blocks, self.create_graph)
        return _tuple_postprocess(blocks, (is_outputs_tuple, self.is_inputs_tuple))


@torch_parameters(torch_functional.jacobian)
def jacobian(func, inputs, create_graph, strict, vectorize, strategy):
    """The Jacobian of `func` at `inputs`: `torch.autograd.functional.jacobian`.

    `strategy="reverse-mode"` (and any other value, which torch refuses) is
    torch's. `strategy="forward-mode"` is dualgen's forward mode: with
    `vectorize=True` every column in one pass, the standard basis as batched
    tangents; with `vectorize=False` one pass per column (torch raises there).
    `create_graph=True` gives a differentiable Jacobian (torch raises there too);
    otherwise it is detached. `strict=True` with forward mode raises torch's
    error. Blocks have the outputs' dtypes, as torch's forward mode, nested in
    tuples as torch's reverse mode and documentation have them (torch's forward
    mode nests lists).
    """
    if strategy != "forward-mode":
        return torch_functional.jacobian(
            func, inputs, create_graph, strict, vectorize, strategy
        )
    if strict:
        raise RuntimeError(_FORWARD_STRICT)
    call = _JacobianCall.of(inputs, "jacobian", create_graph)

    def evaluate(*duals: torch.Tensor) -> tuple[bool, Tensors]:
        return _as_tuple(
            func(*duals), "outputs of the user-provided function", "jacobian"
        )

    with torch.set_grad_enabled(create_graph or torch.is_grad_enabled()):
        inputs = call.preprocessed(need_graph=False)
        result = forward_jacobian(evaluate, inputs, vectorize=vectorize)
    return call.returned(result, result.is_outputs_tuple)


@torch_parameters(torch_functional.hessian, FW_MODE)
def hessian(
    func, inputs, create_graph, strict, vectorize, outer_jacobian_strategy, fw_mode
):
    """The Hessian of a scalar `func`: `torch.autograd.functional.hessian`.

    `fw_mode=True` (the forward-AD RFC's flag): forward over reverse through
    dualgen, the Jacobian by forward mode of the gradient that
    `torch.autograd.grad` computes inside the dual level, whichever
    `outer_jacobian_strategy` is given (it is only checked, as torch checks it).
    `vectorize=True`: every column in one pass with batched tangents; False: one
    pass per column. `create_graph=True` gives a differentiable Hessian. `strict`
    raises torch's errors (those of its reverse-mode outer Jacobian), and with
    `vectorize=True` torch's refusal. `fw_mode=False` is torch's hessian.
    """
    if not fw_mode:
        return torch_functional.hessian(
            func, inputs, create_graph, strict, vectorize, outer_jacobian_strategy
        )
    call = _JacobianCall.of(inputs, "hessian", create_graph)
    if outer_jacobian_strategy not in ("forward-mode", "reverse-mode"):
        raise AssertionError(
            'Expected strategy to be either "forward-mode" or "reverse-mode".'
        )
    with torch.enable_grad():
        inputs = call.preprocessed(need_graph=True)
        gradient = HessianGradient(func, strict, record=create_graph or strict)
        if strict and vectorize:
            gradient(*inputs)  # torch checks the gradient once before refusing
            raise RuntimeError(_VECTORIZED_STRICT)
        result = forward_jacobian(gradient, inputs, vectorize=vectorize)
        if strict:
            check_outer_jacobian(result, create_graph)
    return call.returned(result, call.is_inputs_tuple)


def _forward_over_reverse(
    func: Function,
    inputs: TensorOrTensors,
    v: TensorOrTensors | None,
    create_graph: bool,
    strict: bool,
    fn_name: str,
) -> tuple[torch.Tensor, TensorOrTensors]:
    """`(func(inputs), H v)`: inside a dual level, the inputs dual with tangents v,
    the gradient by `torch.autograd.grad`; its tangent is H v."""
    with torch.enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", fn_name)
        inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
        v = _directions(v, inputs, is_inputs_tuple, fn_name, create_graph)
        with fwAD.dual_level():
            duals = tuple(fwAD.make_dual(x, t) for x, t in zip(inputs, v))
            output = check_scalar_output(func(*duals), fn_name, strict)
            # strict asks whether the gradient requires grad, so it needs its graph
            grads = _autograd_grad(
                (output,), duals, create_graph=create_graph or strict
            )
            _check_requires_grad(grads, "jacobian", strict=strict)
            tangents = tuple(
                None if g is None else fwAD.unpack_dual(g).tangent for g in grads
            )
        # torch's messages: hvp's double-backward trick, vhp's double backward
        stage = "double_back_trick" if fn_name == "hvp" else "double_back"
        products = _fill_in_zeros(tangents, inputs, strict, create_graph, stage)
    (output,) = _grad_postprocess((output,), create_graph)
    products = _grad_postprocess(products, create_graph)
    return output, _tuple_postprocess(products, is_inputs_tuple)


def _hessian_vector_product(fn_name: str, reverse_over_reverse, doc: str):
    """`hvp` or `vhp` (`fn_name`): torch's signature, checks and errors; with
    `fw_mode` forward over reverse, else torch's own (`reverse_over_reverse`).
    One body serves both: forward over reverse gives H v, which is v^T H for the
    symmetric Hessians both assume."""

    @torch_parameters(reverse_over_reverse, FW_MODE)
    def product(func, inputs, v, create_graph, strict, fw_mode):
        if not fw_mode:
            return reverse_over_reverse(func, inputs, v, create_graph, strict)
        return _forward_over_reverse(func, inputs, v, create_graph, strict, fn_name)

    product.__name__ = product.__qualname__ = fn_name
    product.__doc__ = doc
    return product


hvp = _hessian_vector_product(
    "hvp",
    torch_functional.hvp,
    """`(func(inputs), H v)` for a scalar `func`: `torch.autograd.functional.hvp`.

    `fw_mode=True`: forward over reverse through dualgen (one forward pass with
    tangents v and one backward pass, no double backward); `create_graph=True`
    makes the results differentiable with respect to the inputs and `v`. Checks
    and strict errors are torch's. `fw_mode=False` is torch's hvp.
    """,
)

vhp = _hessian_vector_product(
    "vhp",
    torch_functional.vhp,
    """`(func(inputs), v^T H)` for a scalar `func`: `torch.autograd.functional.vhp`.

    `fw_mode=True` computes H v by forward over reverse, as `hvp` does: that is
    v^T H whenever the Hessian is symmetric (`func` twice continuously
    differentiable, which torch's own note on hvp assumes too). Checks and strict
    errors are torch's vhp's. `fw_mode=False` is torch's vhp (reverse over
    reverse, right for a non-symmetric Hessian as well).
    """,
)
