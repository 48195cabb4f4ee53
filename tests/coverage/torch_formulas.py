"""How many of PyTorch's own forward-AD formulas dualgen covers, from the installed torch.

    python -m tests.coverage.torch_formulas          # a short Markdown summary

The denominator: every overload that torchgen's packaged `derivatives.yaml` gives a
forward formula (an output key, `result:` or the schema's output name, whose formula
reads a tangent (`self_t`, ...) or is `auto_element_wise`/`auto_linear`, in the entry
or in one of its `dispatch:` sections), counted as torch lists them (in-place
overloads only where torch writes them out), and that can run on CPU (a CPU kernel
or a composite one). Covered: the overload has a kernel in dualgen's generated
registry (`dualgen.generated.registry.KERNELS`, derived in-place kernels included).

Every uncovered CPU overload must be in `KNOWN_LEFT` with its reason, and nothing
else may be (tests/coverage/test_torch_formulas.py), so coverage cannot regress
silently and a newly covered overload is taken off the list.
"""

from __future__ import annotations

import functools
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import torch
import yaml

from tools.validate import has_cpu_kernel

# Uncovered overloads that run on CPU, with why dualgen has no kernel for them.
KNOWN_LEFT: dict[str, str] = {
    "_test_autograd_multiple_dispatch.fullcoverage": "a test-only op of PyTorch's "
    "autograd code generator, whose registered derivatives are deliberately "
    "arbitrary (grad + 1); nothing outside torch's own tests calls it",
}


_TANGENT = re.compile(r"\b\w+_t\b")
# torchgen's own helpers for the tensor-list ops compute the tangent from `tensors`.
_LIST_JVP = re.compile(r"\b(cat|stack|block_diag)_jvp\(")


def torch_derivatives_path() -> Path:
    import torchgen

    return Path(torchgen.__file__).parent / "packaged" / "autograd" / "derivatives.yaml"


def _output_names(schema) -> list[str]:
    returns = schema.returns
    if len(returns) == 1 and returns[0].name is None:
        return ["result"]
    return [r.name or f"result{i}" for i, r in enumerate(returns)]


def _is_forward_formula(formula) -> bool:
    text = str(formula).strip()
    if text in ("auto_element_wise", "auto_linear"):
        return True
    return bool(_TANGENT.search(text) or _LIST_JVP.search(text))


@functools.cache
def forward_formula_overloads() -> tuple[str, ...]:
    """The overloads (`name` or `name.overload`, as in `aten::` without the
    namespace) that torch's derivatives.yaml gives a forward formula, in its order."""
    from torchgen.model import FunctionSchema

    entries = yaml.safe_load(torch_derivatives_path().read_text())
    found = []
    for entry in entries:
        schema = FunctionSchema.parse(entry["name"])
        outputs = set(_output_names(schema))
        sections = [entry] + list((entry.get("dispatch") or {}).values())
        keyed = [
            (key, formula)
            for section in sections
            for key, formula in section.items()
            if key not in ("name", "dispatch", "output_differentiability")
        ]
        if any(
            all(k.strip() in outputs for k in key.split(","))
            and _is_forward_formula(formula)
            for key, formula in keyed
        ):
            found.append(str(schema.name))
    return tuple(dict.fromkeys(found))


def _qualified(overload: str) -> str:
    return f"aten::{overload}"


def runs_on_cpu(overload: str) -> bool:
    """Whether torch has a kernel that runs the overload on CPU (the tests'
    reference kernels for device-only ops, tests/device_references/, are not
    torch's)."""
    references = sys.modules.get("device_references")
    if references is not None and overload in references.KERNELS:
        return False
    return has_cpu_kernel(_qualified(overload))


def _overload_name(op: torch._ops.OpOverload) -> str:
    base = op._schema.name.split("::", 1)[1]
    return base if op._overloadname == "default" else f"{base}.{op._overloadname}"


def covered_overloads(kernels=None) -> frozenset[str]:
    """The aten overloads that have a kernel in `kernels` (default: the installed
    generated registry)."""
    if kernels is None:
        from dualgen.generated.registry import KERNELS as kernels
    return frozenset(
        _overload_name(op) for op in kernels if op._schema.name.startswith("aten::")
    )


@dataclass(frozen=True)
class Coverage:
    with_formula: tuple[str, ...]  # torch gives a forward formula
    on_cpu: tuple[str, ...]  # ... and the op runs on CPU
    covered: tuple[str, ...]  # ... and dualgen has a kernel for it
    uncovered: tuple[str, ...]  # on CPU, no dualgen kernel
    not_on_cpu: tuple[str, ...]  # outside the denominator

    @property
    def ratio(self) -> float:
        return len(self.covered) / len(self.on_cpu)


def coverage(kernels=None) -> Coverage:
    names = forward_formula_overloads()
    have = covered_overloads(kernels)
    on_cpu = tuple(n for n in names if runs_on_cpu(n))
    return Coverage(
        with_formula=names,
        on_cpu=on_cpu,
        covered=tuple(n for n in on_cpu if n in have),
        uncovered=tuple(n for n in on_cpu if n not in have),
        not_on_cpu=tuple(n for n in names if n not in on_cpu),
    )


def markdown(c: Coverage) -> str:
    head = (
        f"PyTorch {torch.__version__}: {len(c.with_formula)} overloads have a forward "
        f"formula in torch's derivatives.yaml, {len(c.on_cpu)} of them run on CPU; "
        f"dualgen covers **{len(c.covered)}/{len(c.on_cpu)} ({100 * c.ratio:.1f}%)**."
    )
    lines = [head, ""]
    if c.uncovered:
        lines += ["| uncovered on CPU | why |", "|---|---|"]
        lines += [
            f"| `{n}` | {KNOWN_LEFT.get(n, '**not in KNOWN_LEFT**')} |"
            for n in c.uncovered
        ]
        lines.append("")
    if c.not_on_cpu:
        have = covered_overloads()
        done = [n for n in c.not_on_cpu if n in have]
        left = [n for n in c.not_on_cpu if n not in have]
        lines.append(
            f"Without a CPU kernel (not counted above): {len(c.not_on_cpu)}; dualgen "
            f"covers {len(done)} of them, proved on CPU through the tests' reference "
            "kernels (docs/devices.md)"
            + (": " + ", ".join(f"`{n}`" for n in done) if done else "")
            + ("; not covered: " + ", ".join(f"`{n}`" for n in left) if left else "")
            + "."
        )
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown(coverage()))
