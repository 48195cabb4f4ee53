"""Imports flow one way (STYLE.md, habit 11), read from the source with `ast`,
not by importing it.

Every import of a dualgen module anywhere in a file counts: at module level and
inside functions, relative imports resolved. `from pkg import name` is an edge to
`pkg.name` where that is a module, else to `pkg`; a package's `__init__` is a node
of its own, and importing a module is an edge to each package above it that is
not above the importer too (Python runs those `__init__`s first). The graph restricted to dualgen modules has no cycle; the runtime
never imports the generator (`dualgen.tools`), except its command line
(`dualgen.__main__`); and no module imports another's private (`_name`) names.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = {
    "dualgen": "runtime",
    "dualgen.generated": "generated",
    "dualgen.tools": "tools",
}
TOOLS = "dualgen.tools"
# Private names imported across modules that another change is making public
# (runtime/formulas/ is being reworked): (importing module, name). Drop each
# entry once its name is public.
PENDING_PRIVATE: set[tuple[str, str]] = set()


@dataclass(frozen=True)
class Import:
    source: str  # the importing module
    target: str  # the imported dualgen module
    names: tuple[str, ...]  # the names `from target import ...` takes
    line: int


def modules() -> dict[str, Path]:
    """Every module of the three folders, by its dotted name."""
    found: dict[str, Path] = {}
    for package, folder in FOLDERS.items():
        base = ROOT / folder
        for path in sorted(base.rglob("*.py")):
            parts = list(path.relative_to(base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            if any(p.startswith(".") for p in parts):
                continue
            found[".".join([package, *parts])] = path
    return found


def _is_dualgen(name: str) -> bool:
    return name == "dualgen" or name.startswith("dualgen.")


def _nearest_module(name: str, known: Iterable[str]) -> str | None:
    """`name`, or the nearest package above it that is a module of ours."""
    known = set(known)
    parts = name.split(".")
    while parts:
        if ".".join(parts) in known:
            return ".".join(parts)
        parts.pop()
    return None


def imports_of(module: str, path: Path, known: Mapping[str, Path]) -> list[Import]:
    """The dualgen imports of one file, wherever in it they are."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _is_dualgen(alias.name):
                    target = _nearest_module(alias.name, known)
                    if target:
                        found.append(Import(module, target, (), node.lineno))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            if not _is_dualgen(name):
                continue
            for alias in node.names:
                sub = f"{name}.{alias.name}"
                if sub in known:
                    found.append(Import(module, sub, (), node.lineno))
                else:
                    target = _nearest_module(name, known)
                    if target:
                        found.append(Import(module, target, (alias.name,), node.lineno))
    return found


def graph_of(
    found: Iterable[Import], packages: Iterable[str] = ()
) -> dict[str, set[str]]:
    """Edges from each importing module to what it imports and, of `packages`,
    to the packages above the target that are not above the source: Python runs
    `a/b/__init__.py` before `a.b.c`, so importing a.b.c first from outside a.b
    runs all that a.b's `__init__` imports. (The source's own packages are
    already running when it runs.)"""
    packages = set(packages)
    graph: dict[str, set[str]] = {}
    for imp in found:
        graph.setdefault(imp.source, set())
        graph.setdefault(imp.target, set())
        above_source = _packages_above(imp.source) | {imp.source}
        targets = {imp.target} | (_packages_above(imp.target) & packages)
        graph[imp.source] |= targets - above_source
    return graph


def _packages_above(module: str) -> set[str]:
    parts = module.split(".")
    return {".".join(parts[:n]) for n in range(1, len(parts))}


def cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """One cycle through each strongly connected component of more than one node
    (Tarjan's algorithm, iterative), as `[a, b, ..., a]`, sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        top = stack.pop()
                        on_stack.discard(top)
                        component.append(top)
                        if top == node:
                            break
                    if len(component) > 1:
                        components.append(sorted(component))
    return sorted(_one_cycle(graph, set(c)) for c in components)


def _one_cycle(graph: Mapping[str, Iterable[str]], members: set[str]) -> list[str]:
    """A shortest cycle through the component's first member (breadth first)."""
    start = min(members)
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(graph.get(node, ())):
                if child not in members:
                    continue
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [*reversed(path), start]
                if child not in previous:
                    previous[child] = node
                    following.append(child)
        frontier = following
    raise AssertionError(f"no cycle through {start}")


def _all_imports() -> list[Import]:
    known = modules()
    found = []
    for module, path in known.items():
        found += imports_of(module, path, known)
    return found


def _in_tools(module: str) -> bool:
    return module == TOOLS or module.startswith(TOOLS + ".")


def _format(found: list[list[str]], graph: Mapping[str, Iterable[str]]) -> str:
    """Each cycle, and every module of its strongly connected component."""
    lines = []
    for cycle in found:
        members = {cycle[0]} | {n for n in graph if cycle[0] in _reachable(graph, n)}
        members &= _reachable(graph, cycle[0]) | {cycle[0]}
        lines.append(" -> ".join(cycle))
        lines.append(f"    (one of the cycles among {', '.join(sorted(members))})")
    return "\n".join(lines)


def _reachable(graph: Mapping[str, Iterable[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = [start]
    while todo:
        for child in graph.get(todo.pop(), ()):
            if child not in seen:
                seen.add(child)
                todo.append(child)
    return seen


# The checker itself


def test_the_cycle_finder_finds_a_cycle_in_a_tiny_graph():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"d"}}
    assert cycles(graph) == [["a", "b", "c", "a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
    two = {"x": {"y"}, "y": {"x"}, "p": {"q"}, "q": {"p"}}
    assert cycles(two) == [["p", "q", "p"], ["x", "y", "x"]]


def test_importing_a_module_runs_the_packages_above_it():
    """`x` importing `p.q.leaf` runs `p` and `p.q` first: edges to them, but not
    to the packages above x itself (already running when x runs). So a
    package whose `__init__` imports back what x is part of is a cycle."""
    found = [
        Import("x.user", "p.q.leaf", (), 1),
        Import("p.q", "x.user", (), 1),
        Import("p.q.leaf", "p.q.other", (), 1),
    ]
    graph = graph_of(found, packages={"p", "p.q", "x"})
    assert graph["x.user"] == {"p.q.leaf", "p", "p.q"}
    assert graph["p.q.leaf"] == {"p.q.other"}  # its own package is running
    assert cycles(graph) == [["p.q", "x.user", "p.q"]]
    assert cycles(graph_of(found)) == []  # blind to the packages: no cycle


def test_imports_are_read_everywhere_and_resolved(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("from . import leaf\n")
    (package / "leaf.py").write_text("X = 1\n")
    (package / "user.py").write_text(
        "def f():\n    from .leaf import X, _y\n    import dualgen.pkg.leaf\n"
        "    from dualgen.pkg import leaf, other\n"
    )
    known = {
        "dualgen.pkg": package / "__init__.py",
        "dualgen.pkg.leaf": package / "leaf.py",
        "dualgen.pkg.user": package / "user.py",
    }
    found = imports_of("dualgen.pkg.user", known["dualgen.pkg.user"], known)
    assert [(i.target, i.names) for i in found] == [
        ("dualgen.pkg.leaf", ("X",)),
        ("dualgen.pkg.leaf", ("_y",)),
        ("dualgen.pkg.leaf", ()),
        ("dualgen.pkg.leaf", ()),
        ("dualgen.pkg", ("other",)),
    ]
    init = imports_of("dualgen.pkg", known["dualgen.pkg"], known)
    assert [(i.target, i.names) for i in init] == [("dualgen.pkg.leaf", ())]


# The code


def _graph(include_tools: bool) -> dict[str, set[str]]:
    found = [
        i
        for i in _all_imports()
        if include_tools or not (_in_tools(i.source) or _in_tools(i.target))
    ]
    packages = [m for m, path in modules().items() if path.name == "__init__.py"]
    return graph_of(found, packages)


def test_the_runtime_and_generated_code_have_no_import_cycle():
    graph = _graph(include_tools=False)
    found = cycles(graph)
    assert not found, "import cycles:\n" + _format(found, graph)


def test_no_import_cycle_through_tools():
    found = [c for c in cycles(_graph(include_tools=True)) if any(map(_in_tools, c))]
    assert not found, "import cycles:\n" + _format(found, _graph(include_tools=True))


def test_the_runtime_never_imports_the_generator():
    found = [
        f"{i.source}:{i.line} imports {i.target}"
        for i in _all_imports()
        if not _in_tools(i.source)
        and i.source != "dualgen.__main__"
        and _in_tools(i.target)
    ]
    assert not found, "\n".join(found)


def _private_imports(in_tools: bool) -> list[str]:
    return [
        f"{i.source}:{i.line} imports {name} from {i.target}"
        for i in _all_imports()
        for name in i.names
        if name.startswith("_")
        and not name.startswith("__")
        and i.source != i.target
        and _in_tools(i.source) == in_tools
        and (i.source, name) not in PENDING_PRIVATE
    ]


def test_no_private_name_is_imported_across_runtime_modules():
    found = _private_imports(in_tools=False)
    assert not found, "\n".join(found)


def test_no_private_name_is_imported_across_tools_modules():
    found = _private_imports(in_tools=True)
    assert not found, "\n".join(found)
