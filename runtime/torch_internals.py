"""The table of torch internals dualgen relies on (`INTERNALS`): every private
name, private module, signature detail and monkeypatched class attribute the
runtime uses, each with a probe that looks it up (never torch's version number),
the dualgen features that need it (`torch_features.FEATURES`) and why.
`torch_features` reads the table: `require`, `missing`, the import check.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

import torch

from .torch_probes import (
    all_of,
    c10d,
    c10d_op,
    distributed,
    function_class_fields,
    has,
    in_dict,
    jagged_fields,
    op,
    parameter,
    resolve,
    storage_cdata,
)


@dataclass(frozen=True)
class Internal:
    name: str  # what it is, as messages name it (a dotted path where it is one)
    probe: Callable[[], bool]  # whether the installed torch has it
    features: tuple[str, ...]
    description: str
    at_import: bool = False  # looked up when the module using it is imported
    fallback: str | None = None  # what dualgen does without it (then not required)


_TENSOR = ("torch.Tensor",)
_OP = "torch.ops.aten.add.Tensor"

# --------------------------------------------------------------------------------------
# the table

_DL, _CF, _GC, _FX = ("dual_level",), ("custom_function",), ("gradcheck",), ("fx",)
_PYTHON_DISPATCH = "torch.utils._python_dispatch"
_FUNCTION_BASE = "torch._C._FunctionBase"
_FUNCTORCH = "torch._C._functorch"
_FUNCTIONAL = "torch.autograd.functional"
_EAGER_TRANSFORMS = "torch._functorch.eager_transforms"
_PYTREE = "torch.utils._pytree"


def _entries() -> list[Internal]:
    e: list[Internal] = []

    def add(name, probe, features, description, **kw):
        e.append(Internal(name, probe or has(name), features, description, **kw))

    def add_each(prefix, names, features, description, **kw):
        """An entry per name under `prefix` (probed by lookup), for one reason."""
        for name in names:
            add(f"{prefix}.{name}", None, features, description, **kw)

    # dual levels: the mode, the dispatch keys, the forward-grad switch
    add(
        "torch._C._is_fwd_grad_enabled",
        None,
        _DL + _CF,
        "the forward-grad switch the mode and custom Functions obey",
        at_import=True,
    )
    add(
        "torch.autograd.forward_ad._set_fwd_grad_enabled",
        None,
        _DL,
        "re-exported by dualgen.forward_ad, as torch's module has it",
        at_import=True,
    )
    add_each(
        _PYTHON_DISPATCH,
        ("_push_mode", "_pop_mode", "_get_current_dispatch_mode"),
        _DL + ("collectives",),
        "the dispatch-mode stack: pushing, popping and finding dualgen's mode",
        at_import=True,
    )
    add(
        f"{_PYTHON_DISPATCH}._disable_current_modes",
        None,
        _DL,
        "tracked tensors' ops run below every mode",
        at_import=True,
    )
    add(
        f"{_PYTHON_DISPATCH}.TorchDispatchMode",
        None,
        _DL + _GC,
        "dualgen's mode and the gradcheck tape are dispatch modes",
        at_import=True,
    )
    add(
        "torch._C._dispatch_tls_local_exclude_set",
        None,
        _DL,
        "the user's excluded dispatch keys at the first level; lazy-view keys",
    )
    add(
        "torch._C._dispatch_tls_local_include_set",
        None,
        _DL,
        "kept as is when the mode re-includes keys",
    )
    add(
        "torch._C._ForceDispatchKeyGuard",
        None,
        _DL,
        "re-includes Conjugate/Negative inside the mode; the user's exclusions",
    )
    add(
        "torch._C._ExcludeDispatchKeyGuard",
        None,
        _DL,
        "runs alias and tracked ops below the Python dispatch keys",
    )
    add(
        "torch._C.DispatchKey.PythonTLSSnapshot",
        None,
        _DL,
        "the key the C++ hot path registers its kernels at",
    )
    add(
        "torch._C._dispatch_has_kernel_for_dispatch_key",
        None,
        _DL,
        "finds composite ops (decompositions) and ops with a hot-path kernel",
    )
    add(
        "torch._C._dispatch_get_all_op_names",
        None,
        _DL,
        "the ops the C++ backend gives batching rules (hot_path/policy.py)",
    )
    add(
        "torch._C._get_dispatch_mode",
        None,
        _DL,
        "whether a fake mode (DTensor's sharding propagation) is active",
    )
    add(
        "torch._C._TorchDispatchModeKey.FAKE",
        None,
        _DL,
        "the fake mode's key for torch._C._get_dispatch_mode",
    )
    add(
        "torch._subclasses.fake_tensor.FakeTensor",
        None,
        _DL,
        "fake tensors under their fake mode are not dispatched by the mode",
    )
    add_each(
        "torch._C",
        ("_disabled_torch_function_impl", "_has_storage"),
        _DL,
        "recognises subclasses acting as plain tensors (nn.Parameter), and batched "
        "(storage-less) tangents",
    )
    add(
        "torch.ops.aten._new_zeros_with_same_feature_meta",
        op("aten", "_new_zeros_with_same_feature_meta", "default"),
        _DL,
        "lays out a batched tangent like its primal, as native does",
    )
    add(
        "torch._ops.OpOverload",
        None,
        _DL + _FX,
        "the operator class rules are keyed by",
        at_import=True,
    )
    add_each(
        _OP,
        ("_schema", "_overloadname", "_op_dk"),
        _DL + _FX,
        "an OpOverload's schema, overload name, kernel at a dispatch key",
    )
    add_each(
        "torch.Tensor",
        ("_is_zerotensor", "_neg_view", "_base", "_version"),
        _DL + _CF,
        "zero tensors, lazy negation, views' bases and version counters",
    )
    add(
        "torch._tensor_str._str_intern",
        None,
        _DL,
        "replaced while levels exist: printing a dual shows dualgen's tangent",
        at_import=True,
    )
    add(
        "torch.detach_",
        None,
        _DL,
        "replaced (with Tensor.detach_): detach_ drops dualgen's tangents",
        at_import=True,
    )
    add(
        "torch._C._dynamo.eval_frame.get_eval_frame_callback",
        None,
        _DL,
        "the mode skips torch's Dynamo-disabling wrapper while Dynamo is idle",
        fallback="every op goes through torch's wrapper (slower)",
    )
    add(
        "torch._C._dynamo.eval_frame.set_code_exec_strategy",
        None,
        _DL,
        "marks the mode's own frames for Dynamo to skip",
        fallback="Dynamo may trace the mode's wrapper",
    )
    # functorch's batched tensors, met by make_dual and dualgen.func
    add_each(
        _FUNCTORCH,
        ("is_batchedtensor", "is_legacy_batchedtensor"),
        _DL + ("func",),
        "recognises tangents batched by vmap (torch.vmap's or the legacy one)",
    )
    for name in (
        "is_functorch_wrapped_tensor",
        "maybe_get_level",
        "maybe_get_bdim",
        "get_unwrapped",
        "_add_batch_dim",
        "maybe_current_level",
        "get_interpreter_stack",
        "TransformType",
    ):
        add(
            f"{_FUNCTORCH}.{name}",
            None,
            ("func",),
            "functorch's levels: dualgen.func under torch.vmap, refusing grad/jvp",
            at_import=name == "TransformType",
        )
    # custom autograd.Function hooks (functions/)
    for name in (
        "to_save",
        "saved_for_forward",
        "dirty_tensors",
        "non_differentiable",
        "needs_input_grad",
        "materialize_grads",
        "apply",
    ):
        add(
            f"{_FUNCTION_BASE}.{name}",
            in_dict(_FUNCTION_BASE, name),
            _CF,
            "the ctx's C++ fields, wrapped to record what forward saves and marks",
            at_import=True,
        )
    add(
        "torch.autograd.function._SingleLevelFunction.setup_context",
        None,
        _CF,
        "where Function.apply is Python, the class whose apply dualgen replaces",
        at_import=True,
    )
    add(
        "torch.autograd.function.BackwardCFunction",
        None,
        _CF,
        "the ctx class; its __init__ and fields are replaced to catch the ctx",
        at_import=True,
    )
    add(
        "torch.autograd.Function.apply",
        in_dict("torch.autograd.Function", "apply"),
        _CF,
        "replaced (Python or C++, found by its type) to run the jvp at levels",
        at_import=True,
    )
    add(
        "torch.autograd.Function._backward_cls",
        function_class_fields,
        _CF,
        "a Function's ctx class (and the ctx class's _forward_cls)",
    )
    add(
        "torch._C._are_functorch_transforms_active",
        None,
        _CF,
        "custom Functions under torch.func transforms are left to torch",
    )
    add(
        "torch.UntypedStorage._cdata",
        storage_cdata,
        _CF + _GC,
        "identifies storages (what a custom Function or the tape wrote)",
    )
    # gradcheck
    add(
        "torch._vmap_internals._vmap",
        None,
        _GC + ("func", "functional"),
        "the legacy vmap: batched checks, jacfwd, jacobian(vectorize=True)",
        at_import=True,
    )
    add_each(
        "torch._C",
        ("_vmapmode_increment_nesting", "_vmapmode_decrement_nesting"),
        ("func", "functional"),
        "the legacy vmap's levels: the jacobians' basis in one batched pass",
    )
    add(
        "torch._debug_has_internal_overlap",
        None,
        _GC,
        "the tape refuses writes into overlapping memory",
    )
    add(
        "torch._mkldnn",
        None,
        _GC,
        "the mkldnn layout, refused for forward mode as native does",
    )
    # fx
    add(
        "torch.fx.experimental.proxy_tensor.make_fx's decomposition_table argument",
        parameter("torch.fx.experimental.proxy_tensor.make_fx", "decomposition_table"),
        _FX,
        "an explicit table keeps detach a node (not alias, a view)",
    )
    add(
        "torch.fx.experimental.proxy_tensor.make_fx's tracing_mode argument",
        parameter("torch.fx.experimental.proxy_tensor.make_fx", "tracing_mode"),
        _FX,
        "traces with real tensors",
    )
    add_each(
        "torch.fx.experimental.proxy_tensor",
        ("get_proxy_mode", "get_proxy_slot"),
        _FX,
        "the node the tracer made for a traced tensor",
    )
    add_each(
        "torch._guards",
        ("TracingContext", "tracing"),
        _FX,
        "one fake mode for a whole trace (node metadata)",
    )
    add(
        "torch._subclasses.fake_tensor.FakeTensorMode's allow_fallback_kernels "
        "argument",
        parameter(
            "torch._subclasses.fake_tensor.FakeTensorMode", "allow_fallback_kernels"
        ),
        _FX,
        "the trace's fake mode",
    )
    for name in ("preserve_node_meta", "annotate"):
        add(
            f"torch.fx.traceback.{name}",
            None,
            _FX,
            "node metadata: readable graphs name each node's formula",
        )
    add(
        "torch.fx.Graph._codegen",
        lambda: hasattr(torch.fx.Graph(), "_codegen"),
        _FX,
        "a rewritten graph keeps the inputs' and outputs' structure",
    )
    add_each(
        _PYTREE,
        (
            "tree_flatten",
            "tree_unflatten",
            "tree_leaves",
            "tree_map",
            "TreeSpec",
        ),
        _FX + ("func",),
        "flattening inputs and outputs, as torch.func does",
        at_import=True,
    )
    # dualgen.func: torch.func's own argument checks
    add_each(
        _EAGER_TRANSFORMS,
        (
            "_replace_args",
            "_slice_argnums",
            "assert_non_empty_list_of_tensors",
            "assert_non_empty_tensor_output",
            "error_if_complex",
        ),
        ("func",),
        "torch.func's argument checks and messages",
        at_import=True,
    )
    add(
        "torch._functorch.vmap._check_randomness_arg",
        None,
        ("func",),
        "torch.func's check of vmap's randomness argument",
        at_import=True,
    )
    # dualgen.functional: torch.autograd.functional's helpers
    add_each(
        _FUNCTIONAL,
        (
            "_as_tuple",
            "_autograd_grad",
            "_check_requires_grad",
            "_fill_in_zeros",
            "_grad_postprocess",
            "_grad_preprocess",
            "_tuple_postprocess",
            "_validate_v",
            "_construct_standard_basis_for",
        ),
        ("functional",),
        "torch.autograd.functional's argument handling and messages",
        at_import=True,
    )
    # torch.distributed: c10d's process groups and Works
    add(
        "torch._C._distributed_c10d.ProcessGroup",
        c10d("torch._C._distributed_c10d.ProcessGroup.unbox"),
        ("collectives",),
        "a c10d op's process group (unboxed from its script object)",
        at_import=True,
    )
    add(
        "torch.distributed.Work",
        c10d("torch.distributed.Work.unbox"),
        ("collectives",),
        "a collective's Work, unboxed; dualgen's own Work subclasses it",
        at_import=True,
    )
    add(
        "torch.distributed.Work.boxed",
        c10d("torch.distributed.Work.boxed"),
        ("collectives",),
        "dualgen's Work, returned to the dispatcher",
    )
    add(
        "torch.distributed.distributed_c10d._world",
        all_of(
            c10d("torch.distributed.distributed_c10d._world"),
            lambda: hasattr(
                resolve("torch.distributed.distributed_c10d._world"),
                "pg_coalesce_state",
            ),
        ),
        ("collectives",),
        "coalescing regions (_world.pg_coalesce_state)",
        at_import=True,
    )
    add(
        "torch.distributed.distributed_c10d._resolve_process_group",
        c10d("torch.distributed.distributed_c10d._resolve_process_group"),
        ("collectives",),
        "a functional collective's group, from its name",
    )
    add(
        "torch.distributed.ProcessGroup._get_backend",
        c10d("torch.distributed.ProcessGroup._get_backend"),
        ("collectives",),
        "whether a group's backend coalesces ops into one Work",
    )
    for namespace, name, overload in (
        ("_c10d_functional", "wait_tensor", "default"),
        ("_c10d_functional", "all_gather_into_tensor", "default"),
        ("c10d", "_allgather_base_", "default"),
    ):
        add(
            f"torch.ops.{namespace}.{name}",
            c10d_op(namespace, name, overload),
            ("collectives",),
            "the all-gather element-wise collectives' tangents travel by",
        )
    # DTensor
    for name in ("DTensor", "distribute_tensor", "DTensor.redistribute"):
        add(
            f"torch.distributed.tensor.{name}",
            lambda name=name: (
                distributed() and has(f"torch.distributed.tensor.{name}")()
            ),
            ("dtensor",),
            "a DTensor's tangent is placed like its primal",
        )
    # jagged nested tensors: their tangents live on their values (dispatch/jagged.py)
    _NESTED = "torch.nested._internal.nested_tensor"
    add(f"{_NESTED}.NestedTensor", None, ("nested",),
        "the jagged layout's tensor subclass, whose ops the mode leaves to it")  # fmt: skip
    add(f"{_NESTED}.NestedTensor's fields", jagged_fields, ("nested",),
        "a jagged tensor's values and the structure a tangent shares")  # fmt: skip
    add(f"{_NESTED}._nt_view_dummy", None, ("nested",),
        "the placeholder torch's view of values as a jagged tensor takes")  # fmt: skip
    add("torch.ops.aten._nested_view_from_jagged", op("aten", "_nested_view_from_jagged", "default"),
        ("nested",), "a jagged tensor as a view of its values")  # fmt: skip
    # Taylor mode: a series is a tensor subclass that vmap batches
    add_each(
        "torch._functorch.pyfunctorch",
        ("temporarily_clear_interpreter_stack", "pop_dynamic_layer_stack",
         "push_dynamic_layer_stack"),
        ("taylor",),
        "vmap's layers, pushed back while a series' coefficients are computed",
    )  # fmt: skip
    add("torch._C._functorch.get_dynamic_layer_stack_depth", None, ("taylor",),
        "how many of vmap's layers functorch popped on the way to a series")  # fmt: skip
    add("torch._C._DisableTorchDispatch", None, ("taylor",),
        "an in-place view op changes a series' own sizes and strides")  # fmt: skip
    # flex attention in eager (dispatch/higher_order.py)
    add(
        "torch._higher_order_ops.flex_attention.sdpa_dense",
        # (the package's `flex_attention` is the operator: the module by import)
        lambda: hasattr(
            importlib.import_module("torch._higher_order_ops.flex_attention"),
            "sdpa_dense",
        ),
        _DL,
        "flex_attention's dense eager implementation, which the dual mode runs",
        fallback="flex_attention under a dual level raises, as it does without dualgen",
    )
    return e


INTERNALS: tuple[Internal, ...] = tuple(_entries())
