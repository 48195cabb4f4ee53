"""Names and comments that make a derivative program read like its formulas.

While the program is traced, every node made for a node `sin_1` of the original
graph is marked as its primal or as part of its tangent. Afterwards the primal
keeps the original's name (`sin_1`), the tangent's value is `sin_1_t`, the other
nodes of the tangent are `sin_1_t_cos` and so on, inputs are `x` and `x_t`, and
the formula a tangent came from becomes the comment `print_readable` shows above
its ops: `# File: .../generated/jvp.py:158 in sin_default, code: result:
auto_element_wise, from self: grad * self.cos().conj()`.
"""

from __future__ import annotations

import contextlib
import functools
import inspect

import torch
import torch.fx
import torch.fx.traceback as fx_traceback

_KEY = "dualgen"  # the mark, in the node's "custom" meta while tracing


@contextlib.contextmanager
def role(node: torch.fx.Node, kind: str, rule=None):
    """Nodes made within belong to `node`'s primal or tangent (`kind`), the
    tangent from `rule`'s formula."""
    with fx_traceback.annotate({_KEY: (node.name, kind, _formula_trace(rule))}):
        yield


def derived(node: torch.fx.Node) -> bool:
    """Whether `node` was made for a tangent or a cotangent (not a primal)."""
    mark = node.meta.get("custom", {}).get(_KEY)
    return mark is not None and mark[1] != "primal"


def name_and_annotate(
    gm: torch.fx.GraphModule,
    value_nodes: dict,
    input_names: tuple,
    source: str | None,
    class_name: str,
    kind: str = "tangent",
) -> torch.fx.GraphModule:
    """Rename `gm`'s nodes and set their comments. `value_nodes`: for each
    original node's name, the node of the program that holds its tangent (`kind`
    "tangent") or its cotangent ("grad"); `source`: a stack-trace line for the
    function's own ops. Returns the program as a module of class `f_jvp`
    (`f_vjp`), `f` being the function's name."""
    names = _names(gm, value_nodes, input_names, kind)
    graph = torch.fx.Graph()
    graph._codegen = gm.graph._codegen  # (the inputs' and outputs' structure)
    copies: dict = {}
    for node in gm.graph.nodes:
        mark = node.meta.get("custom", {}).pop(_KEY, None)
        if not node.meta.get("custom"):
            node.meta.pop("custom", None)
        if node.op == "placeholder":
            copy = graph.placeholder(names[node], type_expr=node.type)
        elif node.op == "output":
            copy = graph.output(torch.fx.node.map_arg(node.args[0], copies.__getitem__))
        else:
            args = torch.fx.node.map_arg(node.args, copies.__getitem__)
            kwargs = torch.fx.node.map_arg(node.kwargs, copies.__getitem__)
            copy = graph.create_node(node.op, node.target, args, kwargs, names[node])
        copy.meta = dict(node.meta)
        if mark is not None and node.op not in ("placeholder", "output"):
            trace = source if mark[1] == "primal" else mark[2]
            if trace is not None:  # (compilers join these: never None)
                copy.meta["stack_trace"] = trace
        copies[node] = copy
    program = torch.fx.GraphModule(
        gm, graph, class_name=f"{class_name}_{_PROGRAMS[kind]}"
    )
    _detach_constants(program)
    return program


def _detach_constants(gm: torch.fx.GraphModule) -> None:
    """The tensors `f` closes over (a module's parameters) as the program holds
    them: detached (the same memory), so nothing records the program's use of
    them for a backward pass (torch.compile would trace one)."""
    for node in gm.graph.nodes:
        if node.op != "get_attr":
            continue
        owner, _, name = node.target.rpartition(".")
        module = gm.get_submodule(owner) if owner else gm
        value = getattr(module, name)
        if isinstance(value, torch.Tensor) and value.requires_grad:
            delattr(module, name)
            module.register_buffer(name, value.detach(), persistent=False)


_PROGRAMS = {"tangent": "jvp", "grad": "vjp"}


_SUFFIXES = {"tangent": "_t", "grad": "_grad"}


def _names(gm: torch.fx.GraphModule, value_nodes: dict, input_names: tuple, kind: str):
    """The name each node of `gm` gets: inputs `x` and `x_t` (or `cotangent`),
    the primal of an original node `sin_1` that name, its tangent `sin_1_t` (its
    cotangent `sin_1_grad`), the other nodes of that tangent `sin_1_t_cos` (of
    its VJP `sin_1_grad_cos`); the graph makes them unique."""
    suffix = _SUFFIXES[kind]
    value_of = {id(node): name for name, node in value_nodes.items()}
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    count = len(input_names)
    extra = len(placeholders) - count
    names = {}
    for i, node in enumerate(placeholders):
        if i < count:
            names[node] = input_names[i]
        elif kind == "tangent":
            names[node] = f"{input_names[i - count]}_t"
        else:
            names[node] = "cotangent" if extra == 1 else f"cotangent_{i - count}"
    for node in gm.graph.nodes:
        if node.op in ("placeholder", "output"):
            continue
        mark = node.meta.get("custom", {}).get(_KEY)
        if mark is None or node.op == "get_attr":  # (a constant: its own name)
            names[node] = node.name
        elif mark[1] == "primal":
            names[node] = mark[0]
        elif id(node) in value_of:
            names[node] = f"{value_of[id(node)]}{suffix}"
        else:
            names[node] = f"{mark[0]}{suffix}_{_op_name(node)}"
    names.update((n, None) for n in gm.graph.nodes if n.op == "output")
    return names


def function_trace(f) -> str | None:
    """A stack-trace line for `f`'s own ops: its file, and its `def` line."""
    try:
        lines, start = inspect.getsourcelines(f)
        path = inspect.getsourcefile(f)
    except (OSError, TypeError):
        return None
    name = getattr(f, "__name__", "f")
    return f'File "{path}", line {start}, in {name}\n    {lines[0].strip()}\n'


def _op_name(node: torch.fx.Node) -> str:
    target = node.target
    if isinstance(target, torch._ops.OpOverload):
        return target._schema.name.split("::")[-1]
    return getattr(target, "__name__", "value")


def _formula_trace(rule) -> str | None:
    """A stack-trace line pointing at the kernel's source and showing the formula,
    the form fx's code printer turns into a comment."""
    if rule is None:
        return None
    return _kernel_trace(_kernel_function(rule.call), rule.origin)


@functools.cache
def _kernel_trace(kernel, origin: str) -> str:
    try:
        lines, start = inspect.getsourcelines(kernel)
        path = inspect.getsourcefile(kernel)
    except (OSError, TypeError):
        return f'File "{origin}", line 1, in {origin}\n    {origin}\n'
    formulas = [  # the comments that quote the spec: `# self: grad * ...`
        (start + offset, line.strip()[2:])
        for offset, line in enumerate(lines)
        if line.strip().startswith("# ") and ": " in line and "entry" not in line
    ]
    if not formulas:
        return f'File "{path}", line {start}, in {kernel.__name__}\n    {origin}\n'
    text = "; ".join(f for _, f in formulas)
    return f'File "{path}", line {formulas[0][0]}, in {kernel.__name__}\n    {text}\n'


def _kernel_function(call):
    """The generated kernel (or the user's rule) behind a rule's `call`: the
    innermost function its closures hold."""
    function = call
    while True:
        inner = [
            cell.cell_contents
            for cell in getattr(function, "__closure__", None) or ()
            if inspect.isfunction(cell.cell_contents)
        ]
        if not inner:
            return function
        function = inner[0]
