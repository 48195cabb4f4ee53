"""A small reverse-mode interpreter over the generated VJP kernels.

`Tape` is a dispatch mode that records every aten op run while it is active; `grad`
then walks the record backwards, calling each op's generated VJP kernel. It is the
backward half of the gradcheck harness: native autograd is never asked for a
derivative.

Values are nodes. An op's outputs are new nodes; an in-place op gives the tensor it
writes a new node. Aliasing follows the lens semantics of the forward-AD RFC: every
storage has a root (the first tensor seen on it), writing through a view puts the
view's new value back into the root ("putback"), and reading a view whose storage
changed since gets it again from the root ("get"). Both are recorded as steps whose
VJPs move gradients through the storage's geometry, so `x.view(...).mul_(2)` then a
use of `x` differentiates like autograd's CopySlices.

Saved arguments are held by reference and copied only when something is about to
write to their storage, so the kernels see the values the op saw.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ..dispatch.mode import (
    disabling_dynamo_only_while_active,
    native_dispatch_keys,
    reads_lazy_views,
)
from ..dispatch.op_arguments import bind
from ..dtypes import in_gradient_dtype
from ..functions import backward as functions
from ..functions import hooks as function_hooks
from ..kernel_info import KernelInfo
from ..missing import qualified_name
from .tape_geometry import (
    as_real,
    from_real,
    geometry,
    real_dtype,
    real_geometry,
    shape_of,
)

Node = int  # None stands for a constant (nothing to differentiate)


def _registry() -> dict:
    from ..rules.table import generated_kernels

    return generated_kernels()


def is_differentiable(t) -> bool:
    """A floating or complex tensor: one that can carry a gradient."""
    return isinstance(t, torch.Tensor) and (t.is_floating_point() or t.is_complex())


class GradDtypeMismatch(RuntimeError):
    """A VJP kernel returned a gradient of another dtype than its input's (raised
    only by tapes made with check_grad_dtypes=True)."""


class _Saved:
    """A saved tensor: the tensor itself until its storage is written to."""

    __slots__ = ("value",)

    def __init__(self, value: torch.Tensor):
        self.value = value


@dataclass
class _Storage:
    root: torch.Tensor  # the first tensor seen on this storage
    root_node: Node | None
    length: int  # in elements of root's real dtype
    version: int = 0
    saved: list = field(default_factory=list)  # _Saved on this storage, not copied


@dataclass
class _TensorRecord:
    tensor: torch.Tensor  # held: its storage must not be reused while we record
    node: Node | None
    version: int
    storage: _Storage


@dataclass
class _OpStep:
    func: object
    info: KernelInfo
    arguments: list  # schema order; tensors as _Saved (or lists of them)
    outputs: list  # per schema output: _Saved, or None
    input_nodes: list  # per differentiable input: node, list of nodes, or None
    output_nodes: list  # per schema output: node or None


@dataclass
class _GetStep:
    """`node` = the view with `geometry` of the root `root_node` (RFC: get)."""

    root_node: Node | None
    node: Node
    root_geometry: tuple  # real geometries (tape_geometry.real_geometry)
    geometry: tuple
    length: int
    root_dtype: torch.dtype


@dataclass
class _PutbackStep:
    """`node` = root `root_node` with the view `geometry` replaced by `view_node`."""

    root_node: Node | None
    view_node: Node | None
    node: Node
    root_geometry: tuple  # real geometries (tape_geometry.real_geometry)
    geometry: tuple
    length: int
    root_dtype: torch.dtype
    view_dtype: torch.dtype


@disabling_dynamo_only_while_active
class Tape(TorchDispatchMode):
    """Records aten ops; `grad(outputs, inputs, grad_outputs)` runs them backwards.

        with Tape() as tape:
            tape.watch(x)
            y = f(x)
        (gx,) = tape.grad(y, x, torch.ones_like(y))

    Ops run under `torch.no_grad()` are recorded as constants. An op reached by a
    watched value without a VJP kernel raises NotImplementedError. A custom
    autograd.Function is one step, run backwards by its own backward (or vjp):
    see `dualgen.functions.backward`.
    """

    def __init__(self, *, check_grad_dtypes: bool = False):
        super().__init__()
        self.check_grad_dtypes = check_grad_dtypes
        self._tensors: dict[int, _TensorRecord] = {}
        self._storages: dict[int, _Storage] = {}
        self._steps: list = []
        self._watched: dict[int, tuple[torch.Tensor, Node]] = {}
        self._node_meta: list[tuple[object, torch.dtype]] = []  # (shape_of, dtype)

    # Recording

    def __enter__(self):
        mode = super().__enter__()
        function_hooks.start(self)
        return mode

    def __exit__(self, *exc):
        function_hooks.stop(self)
        return super().__exit__(*exc)

    def watch(self, *tensors: torch.Tensor) -> None:
        """Make each tensor an input to differentiate with respect to."""
        for t in tensors:
            if not is_differentiable(t):
                raise TypeError(
                    "only floating point and complex tensors can be watched"
                )
            key = t.untyped_storage()._cdata
            storage = self._storages.get(key) if t.untyped_storage().nbytes() else None
            node = self._new_node(t)
            if storage is None:
                storage = self._add_storage(t, node)
            elif storage.root is t:
                # Made inside the tape: differentiate from here on; views of it
                # made earlier read it again.
                storage.root_node = node
                storage.version += 1
            else:
                raise ValueError(
                    "a watched tensor must not share memory with another tensor the "
                    "tape has seen (watch the base instead)"
                )
            self._tensors[id(t)] = _TensorRecord(t, node, storage.version, storage)
            self._watched[id(t)] = (t, node)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if not reads_lazy_views(args, kwargs):
            return self._dispatch(func, args, kwargs)
        with native_dispatch_keys():
            return self._dispatch(func, args, kwargs)

    def _dispatch(self, func, args, kwargs):
        schema = func._schema
        values = bind(schema, args, kwargs)
        written = [
            i
            for i, a in enumerate(schema.arguments)
            if a.alias_info is not None and a.alias_info.is_write
        ]
        nodes = [self._nodes_of(v) for v in values]
        tracked = torch.is_grad_enabled() and any(_requires(n) for n in nodes)
        if not tracked:
            for i in written:
                self._before_write(values[i])
            out = func(*args, **kwargs)
            for i in written:
                self._write(values[i], None)
            self._add_outputs(out, None)
            return out
        info = _registry().get(func)
        if info is None and not written:
            # No rule is needed where nothing differentiable comes out
            # (comparisons, argmax, sizes).
            out = func(*args, **kwargs)
            outputs = out if isinstance(out, (list, tuple)) else (out,)
            flat = [
                o
                for item in outputs
                for o in (item if isinstance(item, (list, tuple)) else (item,))
            ]
            if not any(is_differentiable(o) for o in flat):
                self._add_outputs(out, None)
                return out
        if info is None or any(schema.arguments[i].is_out for i in written):
            raise NotImplementedError(
                f"dualgen has no backward (VJP) rule for {qualified_name(func)}; add an "
                f"entry to derivatives.yaml"
                if info is None
                else f"{qualified_name(func)} is an out= variant: call its functional form"
            )
        saved = [
            self._save(_as_tensor_argument(v, a))
            for v, a in zip(values, schema.arguments)
        ]
        for i in written:
            self._before_write(values[i])
        out = func(*args, **kwargs)
        many = len(schema.returns) > 1
        outputs = list(out) if many else [out]
        names = info.arguments  # (the spec's: a torch release may rename some)
        input_nodes = [nodes[names.index(n)] for n in info.differentiable_inputs]
        output_nodes = [
            self._output_nodes(o) if name in info.differentiable_outputs else None
            for name, o in zip(info.outputs, outputs)
        ]
        step = _OpStep(func, info, saved, [], input_nodes, output_nodes)
        self._steps.append(step)
        if info.kind == "inplace":
            self._write(values[0], output_nodes[0])
        else:
            self._add_outputs(outputs, output_nodes)
        step.outputs = [
            self._save(o) if isinstance(o, (torch.Tensor, list, tuple)) else None
            for o in outputs
        ]
        return out

    def _output_nodes(self, o):
        """A new node for a differentiable output; a list of them for Tensor[]."""
        if isinstance(o, (list, tuple)):
            return [self._output_nodes(item) for item in o]
        return self._new_node(o) if is_differentiable(o) else None

    def _new_node(self, t: torch.Tensor) -> Node:
        self._node_meta.append((shape_of(t), t.dtype))
        return len(self._node_meta) - 1

    def _add_storage(self, t: torch.Tensor, node: Node | None) -> _Storage:
        real_size = t.element_size() // (2 if t.is_complex() else 1)
        storage = _Storage(t, node, t.untyped_storage().nbytes() // real_size)
        self._storages[t.untyped_storage()._cdata] = storage
        return storage

    def _record(self, t: torch.Tensor) -> _TensorRecord:
        record = self._tensors.get(id(t))
        if record is not None and record.tensor is t:
            return record
        key = t.untyped_storage()._cdata
        storage = self._storages.get(key)
        if storage is None or not t.untyped_storage().nbytes():
            storage = self._add_storage(t, None)
            record = _TensorRecord(t, None, storage.version, storage)
        else:  # an alias made outside the tape: read it from its root
            record = _TensorRecord(t, None, -1, storage)
        self._tensors[id(t)] = record
        return record

    def _nodes_of(self, value):
        if isinstance(value, torch.Tensor):
            return self._node_of(value) if is_differentiable(value) else None
        if isinstance(value, (list, tuple)):
            return [self._nodes_of(v) for v in value]
        return None

    def _node_of(self, t: torch.Tensor) -> Node | None:
        record = self._record(t)
        storage = record.storage
        if record.version != storage.version:
            record.node = self._get(storage, t)
            record.version = storage.version
        return record.node

    def _get(self, storage: _Storage, t: torch.Tensor) -> Node | None:
        if storage.root_node is None:
            return None
        same = t is storage.root or geometry(t) == geometry(storage.root)
        if same and t.dtype == storage.root.dtype:
            return storage.root_node
        self._check_alias(storage, t)
        node = self._new_node(t)
        self._steps.append(
            _GetStep(
                storage.root_node,
                node,
                real_geometry(storage.root),
                real_geometry(t),
                storage.length,
                storage.root.dtype,
            )
        )
        return node

    def _write(self, value, node: Node | None) -> None:
        """`value` (a tensor, or a list of them) now holds `node`."""
        if isinstance(value, (list, tuple)):
            for v in value:
                self._write(v, None)
            return
        if not isinstance(value, torch.Tensor):
            return
        record = self._record(value)
        storage = record.storage
        same = value is storage.root or geometry(value) == geometry(storage.root)
        if same and value.dtype == storage.root.dtype:
            storage.root_node = node
        elif node is not None or storage.root_node is not None:
            self._check_alias(storage, value)
            new_root = self._new_node(storage.root)
            self._steps.append(
                _PutbackStep(
                    storage.root_node,
                    node,
                    new_root,
                    real_geometry(storage.root),
                    real_geometry(value),
                    storage.length,
                    storage.root.dtype,
                    value.dtype,
                )
            )
            storage.root_node = new_root
        storage.version += 1
        record.node = node
        record.version = storage.version

    def _check_alias(self, storage: _Storage, t: torch.Tensor) -> None:
        _check_dtype(storage, t)
        if torch._debug_has_internal_overlap(t) == 1:
            raise NotImplementedError(
                "the tape cannot read a self-overlapping view (expand) of memory "
                "written to after the view was made"
            )

    def _add_outputs(self, out, nodes) -> None:
        outputs = out if isinstance(out, (list, tuple)) else [out]
        for i, o in enumerate(outputs):
            node = nodes[i] if nodes is not None else None
            if isinstance(o, (list, tuple)):
                items = node if isinstance(node, list) else [None] * len(o)
                for item, item_node in zip(o, items):
                    self._add_output(item, item_node)
            elif isinstance(o, torch.Tensor):
                self._add_output(o, node)

    def _add_output(self, t: torch.Tensor, node: Node | None) -> None:
        key = t.untyped_storage()._cdata
        storage = self._storages.get(key)
        if storage is None or not t.untyped_storage().nbytes():
            storage = self._add_storage(t, node)
        elif node is not None:
            _check_dtype(storage, t)
        self._tensors[id(t)] = _TensorRecord(t, node, storage.version, storage)

    def _save(self, value):
        if isinstance(value, torch.Tensor):
            saved = _Saved(value)
            self._record(value).storage.saved.append(saved)
            return saved
        if isinstance(value, (list, tuple)):
            return [self._save(v) for v in value]
        return value

    def _before_write(self, value) -> None:
        """Copy the saved tensors on `value`'s storage: it is about to change."""
        if isinstance(value, (list, tuple)):
            for v in value:
                self._before_write(v)
            return
        if not isinstance(value, torch.Tensor):
            return
        storage = self._record(value).storage
        for saved in storage.saved:
            saved.value = saved.value.clone()
        storage.saved.clear()

    # Running backwards

    def grad(self, outputs, inputs, grad_outputs, *, undefined: bool = False) -> tuple:
        """Gradients (the `2 * CW` convention for complex) of `inputs`, which were
        watched, for the cotangents `grad_outputs` of `outputs`; None where an input
        does not reach any output. Runs outside the tape, so an enclosing tape or
        dual level differentiates it. `undefined`: zero cotangents stand for
        undefined gradients, which a Function that does not materialize grads gets
        as None (gradcheck's check_undefined_grad)."""
        outputs = _as_tuple(outputs)
        inputs = _as_tuple(inputs)
        grad_outputs = _as_tuple(grad_outputs)
        cotangents: dict[Node, torch.Tensor] = {}
        for output, g in zip(outputs, grad_outputs, strict=True):
            if g is None or not is_differentiable(output):
                continue
            node = self._node_of(output)
            if node is not None:
                self._accumulate(cotangents, node, g, "the output cotangent")
        for step in reversed(self._steps):
            if isinstance(step, _OpStep):
                self._backward_op(step, cotangents)
            elif isinstance(step, _GetStep):
                _backward_get(self, step, cotangents)
            elif isinstance(step, functions.FunctionStep):
                functions.backward(self, step, cotangents, undefined)
            else:
                _backward_putback(self, step, cotangents)
        result = []
        for t in inputs:
            watched = self._watched.get(id(t))
            if watched is None or watched[0] is not t:
                raise ValueError("grad: an input was not watched by this tape")
            # Its node when watched: it may have been written to since.
            result.append(cotangents.get(watched[1]))
        return tuple(result)

    def _backward_op(self, step: _OpStep, cotangents: dict) -> None:
        grads = [_pop(cotangents, n) for n in step.output_nodes]
        if all(
            g is None or (isinstance(g, list) and not any(x is not None for x in g))
            for g in grads
        ):
            return
        info = step.info
        outputs = [_value(o) for o in step.outputs]
        if len(outputs) > 1:
            # Kernels of several outputs expect a gradient for each differentiable
            # one (autograd materializes missing ones as zeros too).
            grad_arg = tuple(
                (g if g is not None or n is None else torch.zeros_like(outputs[i]))
                for i, (g, n) in enumerate(zip(grads, step.output_nodes))
            )
        else:
            grad_arg = grads[0]
        arguments = [_value(a) for a in step.arguments]
        results = info.vjp(grad_arg, *arguments, *outputs)
        for name, node, g in zip(
            info.differentiable_inputs, step.input_nodes, results, strict=True
        ):
            where = f"the VJP of {info.name} for `{name}`"
            if isinstance(node, list):
                for i, (n, gi) in enumerate(zip(node, g or [None] * len(node))):
                    if n is not None and gi is not None:
                        self._accumulate(cotangents, n, gi, f"{where}[{i}]")
            elif node is not None and g is not None:
                self._accumulate(cotangents, node, g, where)

    def _accumulate(self, cotangents: dict, node: Node, g, where: str) -> None:
        shape, dtype = self._node_meta[node]
        if not isinstance(g, torch.Tensor):
            raise TypeError(f"{where} returned {type(g).__name__}, not a Tensor")
        if shape_of(g) != shape:
            raise RuntimeError(
                f"{where} returned a gradient of shape {list(shape_of(g))} for a "
                f"value of shape {list(shape)}"
            )
        if g.dtype != dtype:
            if self.check_grad_dtypes and not (g.is_complex() and not dtype.is_complex):
                raise GradDtypeMismatch(
                    f"Gradient has dtype mismatch: {where} returned {g.dtype} for a "
                    f"value of dtype {dtype}"
                )
            g = in_gradient_dtype(g, dtype)
        previous = cotangents.get(node)
        cotangents[node] = g if previous is None else previous + g


def _check_dtype(storage: _Storage, t: torch.Tensor) -> None:
    if real_dtype(t.dtype) != real_dtype(storage.root.dtype):
        raise NotImplementedError(
            "the tape cannot follow a view with another dtype than its base "
            f"({t.dtype} of {storage.root.dtype}) unless it is the real view "
            "of complex memory or the reverse"
        )


def _as_tensor_argument(value, argument):
    """A Python number passed for a Tensor argument (`x * 2`) as the 0-d tensor
    the kernels expect."""
    number = isinstance(value, (int, float, complex)) and not isinstance(value, bool)
    if number and str(argument.type) == "Tensor":
        return torch.tensor(value)
    return value


def _pop(cotangents: dict, node):
    """The cotangent of an output's node (a list of them for a Tensor[] output,
    None for pieces without one)."""
    if isinstance(node, list):
        return [_pop(cotangents, n) for n in node]
    return cotangents.pop(node, None) if node is not None else None


def _requires(nodes) -> bool:
    if isinstance(nodes, list):
        return any(_requires(n) for n in nodes)
    return nodes is not None


def _value(saved):
    if isinstance(saved, _Saved):
        return saved.value
    if isinstance(saved, list):
        return [_value(s) for s in saved]
    return saved


def _as_tuple(value) -> tuple:
    return tuple(value) if isinstance(value, (list, tuple)) else (value,)


def _scratch(g: torch.Tensor, length: int) -> torch.Tensor:
    """Zeroed memory for a whole storage, in elements of g's real dtype."""
    return torch.zeros(length, dtype=real_dtype(g.dtype), device=g.device)


def _backward_get(tape: Tape, step: _GetStep, cotangents: dict) -> None:
    g = cotangents.pop(step.node, None)
    if g is None or step.root_node is None:
        return
    flat = _scratch(g, step.length)
    flat.as_strided(*step.geometry).copy_(as_real(g))
    root_grad = from_real(flat.as_strided(*step.root_geometry).clone(), step.root_dtype)
    tape._accumulate(cotangents, step.root_node, root_grad, "a view of its base")


def _backward_putback(tape: Tape, step: _PutbackStep, cotangents: dict) -> None:
    g = cotangents.pop(step.node, None)
    if g is None:
        return
    flat = _scratch(g, step.length)
    flat.as_strided(*step.root_geometry).copy_(as_real(g))
    if step.view_node is not None:
        view_grad = from_real(flat.as_strided(*step.geometry).clone(), step.view_dtype)
        tape._accumulate(cotangents, step.view_node, view_grad, "a write to a view")
    if step.root_node is not None:
        flat.as_strided(*step.geometry).zero_()
        root_grad = from_real(
            flat.as_strided(*step.root_geometry).clone(), step.root_dtype
        )
        tape._accumulate(cotangents, step.root_node, root_grad, "a write to a view")
