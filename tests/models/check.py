"""One JVP of a suite model, by each system, and how they compare.

Systems: dualgen (`dualgen.forward_ad`), native (`torch.autograd.forward_ad`) and
`torch.func.jvp`, each at PyTorch's and the library's defaults; references where
native fails at the defaults: native with attention by its definition (the MATH
backend, no fused MultiheadAttention path), and finite differences of the model
in float64. Tangents go on the differentiable inputs or on every parameter
(`torch.func.functional_call`); each run builds the model afresh from the same
seed (train-mode BatchNorm updates its statistics once per run) and runs it from
the same seed (dropout draws the same mask as a plain forward).
"""

from __future__ import annotations

import contextlib
import copy
import random
import time
import warnings
from dataclasses import dataclass

import torch
import torch.autograd.forward_ad as native_ad
from devices import DEVICE
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

import dualgen.forward_ad as dual_ad

try:
    import numpy as np
except ImportError:  # numpy is optional for torch
    np = None

from .families import Family

SEED = 0
SYSTEMS = ("dualgen", "native", "func.jvp")
# Finite-difference steps tried in turn: small for models computed in float64
# throughout (and kinks such as relu's), larger for models that keep float32
# islands in a float64 run (HF's RMSNorm upcasts to float32 only).
FD_STEPS = (1e-6, 1e-4, 1e-3)
# Norm-relative tolerances: against native in the same dtype (the same math, in
# another order), and against float64 finite differences.
SAME_DTYPE = {torch.float64: 1e-9, torch.float32: 1e-4}
AGAINST_FD = 1e-3


@dataclass(frozen=True)
class Case:
    """A model, in a mode and dtype, with tangents on `on` (inputs or parameters)."""

    family: Family
    mode: str
    dtype: torch.dtype
    on: str

    @property
    def id(self) -> str:
        dtype = str(self.dtype).removeprefix("torch.")
        return f"{self.family.name}-{self.mode}-{dtype}-{self.on}"


@dataclass(frozen=True)
class Run:
    """What one system gave: the main output and its tangent, or the first line
    of the error it raised."""

    primal: torch.Tensor | None
    tangent: torch.Tensor | None
    error: str | None
    seconds: float


@dataclass(frozen=True)
class Prepared:
    model: nn.Module
    inputs: dict  # differentiable, by keyword
    plain: dict  # the others (masks, ids)
    params: dict
    input_tangents: dict
    param_tangents: dict


def prepare(
    family: Family, mode: str, dtype: torch.dtype, overrides: dict | None = None
) -> Prepared:
    """The model (seeded, in `mode` and `dtype`, its config changed by
    `overrides`), its inputs, and tangents for them and for every parameter, all
    drawn in float32 whatever the dtype so a float64 run sees the same values."""
    torch.manual_seed(SEED)
    model = (family.build(**overrides) if overrides else family.build()).to(dtype)
    model.train(mode == "train")
    inputs, plain = family.inputs(torch.float32)
    inputs = {k: v.to(dtype) for k, v in inputs.items()}
    params = {n: p.detach() for n, p in model.named_parameters()}
    generator = torch.Generator(DEVICE).manual_seed(SEED + 1)

    def randn_like(t):
        return torch.randn(t.shape, generator=generator).to(t.dtype)

    return Prepared(
        model,
        inputs,
        plain,
        params,
        {k: randn_like(v) for k, v in inputs.items()},
        {k: randn_like(v) for k, v in params.items()},
    )


def main_output(out, field: str | None = None) -> torch.Tensor:
    """The tensor a check compares: the named field, else a model output's first
    tensor (hidden states or logits), or a module's."""
    if field is not None:
        return getattr(out, field)
    if isinstance(out, torch.Tensor):
        return out
    if hasattr(out, "to_tuple"):
        out = out.to_tuple()
    for item in out:
        if isinstance(item, torch.Tensor):
            return item
    raise TypeError(f"no tensor in the model's output {type(out).__name__}")


def call(case: Case, p: Prepared, params: dict, inputs: dict) -> torch.Tensor:
    seed_everything()
    out = torch.func.functional_call(p.model, params, (), {**inputs, **p.plain})
    return main_output(out, case.family.output)


def seed_everything() -> None:
    """torch's generator, and numpy's and Python's (wav2vec2 draws its
    SpecAugment masks in train mode with numpy)."""
    torch.manual_seed(SEED)
    random.seed(SEED)
    if np is not None:
        np.random.seed(SEED)


def plain_forward(case: Case) -> torch.Tensor:
    """The model's main output with no tangents anywhere."""
    p = prepare(case.family, case.mode, case.dtype)
    with torch.no_grad():
        return call(case, p, p.params, p.inputs)


def run(case: Case, system: str) -> Run:
    """One JVP by `system`: its primal and tangent, or its error."""
    p = prepare(case.family, case.mode, case.dtype)
    start = time.perf_counter()
    try:
        primal, tangent = jvp(system, case, p)
    except Exception as exc:  # noqa: BLE001 - what a system raises is its result
        text = str(exc).strip()
        first = text.splitlines()[0] if text else ""
        error = f"{type(exc).__name__}: {first}"[:300]
        return Run(None, None, error, time.perf_counter() - start)
    seconds = time.perf_counter() - start
    primal = primal.detach().clone()
    if tangent is None:
        return Run(primal, None, "no tangent: the output is not dual", seconds)
    return Run(primal, tangent.detach().clone(), None, seconds)


def jvp(system: str, case: Case, p: Prepared):
    """The main output and its tangent by `system` (raises what it raises)."""
    if system == "func.jvp":
        return _func_jvp(case, p)
    return _forward_ad(dual_ad if system == "dualgen" else native_ad, case, p)


def _forward_ad(api, case: Case, p: Prepared):
    params, inputs = p.params, p.inputs
    with api.dual_level():
        if case.on == "inputs":
            inputs = {
                k: api.make_dual(v, p.input_tangents[k]) for k, v in inputs.items()
            }
        else:
            params = {
                k: api.make_dual(v, p.param_tangents[k]) for k, v in params.items()
            }
        return tuple(api.unpack_dual(call(case, p, params, inputs)))


def _func_jvp(case: Case, p: Prepared):
    if case.on == "inputs":
        return torch.func.jvp(
            lambda i: call(case, p, p.params, i), (p.inputs,), (p.input_tangents,)
        )
    return torch.func.jvp(
        lambda q: call(case, p, q, p.inputs), (p.params,), (p.param_tangents,)
    )


@contextlib.contextmanager
def by_definition():
    """Attention and recurrences by their definitions, which native forward AD can
    differentiate: the MATH backend of scaled_dot_product_attention, no fused
    MultiheadAttention / TransformerEncoderLayer fast path, no oneDNN RNN layer."""
    with contextlib.ExitStack() as stack:
        stack.callback(
            torch.backends.mha.set_fastpath_enabled,
            torch.backends.mha.get_fastpath_enabled(),
        )
        torch.backends.mha.set_fastpath_enabled(False)
        stack.enter_context(_quietly(torch.backends.mkldnn.flags(enabled=False)))
        stack.enter_context(sdpa_kernel([SDPBackend.MATH]))
        yield


@contextlib.contextmanager
def _quietly(manager):
    """Enter and leave `manager` without its notices (oneDNN's flags warn about
    Intel GPUs' TF32 each time they are set)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        manager.__enter__()
    try:
        yield
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            manager.__exit__(None, None, None)


def reference(case: Case) -> tuple[str, Run]:
    """Native forward AD at the defaults; where it fails there, native with
    attention and recurrences by their definitions."""
    native = run(case, "native")
    if native.error is None:
        return "native", native
    with by_definition():
        return "native, attention by definition", run(case, "native")


def finite_differences(case: Case, step: float) -> torch.Tensor:
    """The four-point central difference (error O(h^4)) of the model in float64
    along the case's tangents."""
    p = prepare(case.family, case.mode, torch.float64, case.family.float64_overrides)

    def moved(h):
        model = copy.deepcopy(p.model)  # train-mode statistics move once per call
        fresh = Prepared(
            model, p.inputs, p.plain, p.params, p.input_tangents, p.param_tangents
        )
        if case.on == "inputs":
            inputs = {k: v + h * p.input_tangents[k] for k, v in p.inputs.items()}
            return call(case, fresh, p.params, inputs)
        params = {k: v + h * p.param_tangents[k] for k, v in p.params.items()}
        return call(case, fresh, params, p.inputs)

    with torch.no_grad():
        return four_point(moved, step)


def four_point(f, step: float):
    """The central difference of `f` at 0 with the four-point stencil (error
    O(h^4)); `f` returns a tensor or a list of tensors."""

    def difference(h):
        ahead, behind = f(h), f(-h)
        if isinstance(ahead, torch.Tensor):
            return ahead - behind
        return [a - b for a, b in zip(ahead, behind)]

    near, far = difference(step), difference(2 * step)
    if isinstance(near, torch.Tensor):
        return (8 * near - far) / (12 * step)
    return [(8 * n - f) / (12 * step) for n, f in zip(near, far)]


def error_against_fd(case: Case, tangent: torch.Tensor) -> float:
    """The smallest relative error of `tangent` against finite differences over
    the steps tried (a wrong tangent disagrees at every step)."""
    best = float("inf")
    for step in FD_STEPS:
        best = min(best, relative_error(tangent, finite_differences(case, step)))
        if best <= AGAINST_FD / 10:
            break
    return best


def relative_error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    actual, expected = actual.double(), expected.double()
    if actual.shape != expected.shape:
        return float("inf")
    scale = expected.norm().item()
    return (actual - expected).norm().item() / max(scale, 1e-12)
