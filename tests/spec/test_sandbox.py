"""Everything the formula vocabulary admits is free of side effects.

tools/check/admissible.py decides which torch callables a formula may call from what
each operator *is* (its schema and tags). This test checks that rule from the other
side: every callable it admits, called on small tensors, creates no file in the
working directory, prints nothing (Python-level or C-level), and leaves the global
random number generator as it found it. Calls may raise on synthetic arguments;
that is fine and ignored, but enough of them must run for the test to mean
something.

What "admits" means, as the vocabulary reads it:
1. every aten overload (`torch.ops.aten.<name>.<overload>`, out= variants aside)
   for which `admissible.why_not_op` is None;
2. every public function of `torch`, `torch.linalg`, `torch.special`, `torch.fft`
   and `torch.nn.functional` for which `admissible.why_not` is None;
3. every public Tensor method for which `admissible.why_not_method` is None.

Arguments come from the aten schema where there is one (several profiles: 2-d,
1-d and 0-d float64 tensors; small ints and sizes; bools both ways, once with
defaulted floats and bools overridden so `p=`/`train=`-style switches are tried
too); Python functions and methods are also called with one and with two tensors.
"""

from __future__ import annotations

import contextlib
import inspect
import io
import os
import re
import shutil
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch

from dualgen.tools.check import admissible
from dualgen.tools.validate.sandbox_dir import empty_cwd

aten = torch.ops.aten
_Packet = torch._ops.OpOverloadPacket

# Admitted callables that crash the interpreter (or hang) on synthetic arguments,
# so they cannot be called in-process. Keep this short, and say why.
_SEGFAULTS = "segfaults on synthetic arguments (missing or mismatched statistics)"
SKIP: dict[str, str] = {
    "aten._batch_norm_impl_index_backward.default": _SEGFAULTS,
    "aten._batch_norm_no_update.default": _SEGFAULTS,
    "aten._native_batch_norm_legit.no_stats": _SEGFAULTS,
    "aten.batch_norm_backward.default": _SEGFAULTS,
    "aten.native_batch_norm.default": _SEGFAULTS,
    "aten.native_batch_norm_backward.default": _SEGFAULTS,
    "torch.native_batch_norm": _SEGFAULTS,
    "aten._nnpack_spatial_convolution.default": "segfaults on 2-d inputs",
    "aten._thnn_differentiable_gru_cell_backward.default": "segfaults on 2-d inputs",
    "aten.slow_conv_transpose3d.default": "segfaults on 5-d inputs, 1-d weight",
    # TorchScript-only overloads: called eagerly with copy=True they read an
    # uninitialised dtype (a torch bug): "Unsupported TypeMeta", bad_alloc after
    # 10 GB allocations, uint8 results, or a segfault.
    "aten.to.prim_Device": "reads an uninitialised dtype with copy=True",
    "aten.to.prim_dtype": "reads an uninitialised dtype with copy=True",
    "aten.to.prim_other": "reads an uninitialised dtype with copy=True",
}

NAMESPACES = ("", "linalg", "special", "fft", "nn.functional")


# ---------------------------------------------------------------- what is admitted


def _aten_packet_names() -> list[str]:
    """Every aten operator name. `dir(torch.ops.aten)` lists only the packets
    loaded so far, so the names come from the dispatcher and the JIT registry."""
    names = {
        n.split("::", 1)[1].split(".", 1)[0]
        for n in torch._C._dispatch_get_all_op_names()
        if n.startswith("aten::")
    }
    names |= {
        s.name.split("::", 1)[1]
        for s in torch._C._jit_get_all_schemas()
        if s.name.startswith("aten::")
    }
    names |= set(dir(aten))
    return sorted(n for n in names if isinstance(getattr(aten, n, None), _Packet))


def _is_out_variant(op) -> bool:
    return any(a.is_out for a in op._schema.arguments)


def admitted_overloads() -> list[torch._ops.OpOverload]:
    ops = []
    for name in _aten_packet_names():
        packet = getattr(aten, name)
        for overload in packet.overloads():
            op = getattr(packet, overload, None)
            if op is None or _is_out_variant(op):
                continue
            if admissible.why_not_op(op) is None:
                ops.append(op)
    return ops


def _namespace(prefix: str):
    obj = torch
    for part in prefix.split(".") if prefix else ():
        obj = getattr(obj, part)
    return obj


def admitted_functions() -> list[tuple[str, Callable]]:
    """(path below `torch`, callable) for each admitted public function."""
    found = []
    for prefix in NAMESPACES:
        namespace = _namespace(prefix)
        for name in sorted(dir(namespace)):
            if name.startswith("_"):
                continue
            obj = getattr(namespace, name, None)
            if not callable(obj) or isinstance(obj, torch.dtype):
                continue
            path = f"{prefix}.{name}" if prefix else name
            if admissible.why_not(path) is None:
                found.append((path, obj))
    return found


def admitted_methods() -> list[str]:
    return [
        name
        for name in sorted(dir(torch.Tensor))
        if not name.startswith("_")
        and callable(getattr(torch.Tensor, name, None))
        and admissible.why_not_method(name) is None
    ]


def _aten_overloads_of(name: str) -> list[torch._ops.OpOverload]:
    packet = getattr(aten, name, None)
    if not isinstance(packet, _Packet):
        return []
    ops = [getattr(packet, o, None) for o in packet.overloads()]
    return [op for op in ops if op is not None and not _is_out_variant(op)]


def _aten_name(path: str) -> str:
    """The aten operator name `admissible` judges a Python path by."""
    parts = path.split(".")
    if len(parts) == 2:  # linalg.solve -> linalg_solve
        return f"{parts[0]}_{parts[1]}"
    return parts[-1]  # cos, nn.functional.relu -> relu


# ---------------------------------------------------------------- arguments


def _tensor(*shape: int) -> torch.Tensor:
    # Values in (0, 1), without touching the global generator.
    n = 1
    for s in shape:
        n *= s
    return torch.linspace(0.2, 0.8, n, dtype=torch.float64).reshape(shape)


@dataclass(frozen=True)
class Profile:
    """One way of filling in arguments."""

    shape: tuple[int, ...]
    int_: int
    ints: tuple[int, ...]
    bool_: bool
    override_defaults: bool = False  # defaulted floats -> 0.5, bools -> bool_

    def tensor(self) -> torch.Tensor:
        return _tensor(*self.shape)


PROFILES = (
    Profile(shape=(2, 2), int_=1, ints=(2, 2), bool_=False),
    Profile(shape=(2,), int_=-1, ints=(1,), bool_=True),
    Profile(shape=(), int_=-1, ints=(1,), bool_=False),
    Profile(shape=(2, 2), int_=1, ints=(1,), bool_=True, override_defaults=True),
    # batched, channelled inputs for pooling, convolution, normalisation
    Profile(shape=(1, 1, 2, 2), int_=1, ints=(1, 1), bool_=False),
    Profile(shape=(1, 1, 1, 2, 2), int_=1, ints=(1, 1, 1), bool_=True),
)

_SKIP_ARGUMENT = object()  # no sensible value: the overload is not called


def _value(argument, profile: Profile):
    kind = str(argument.real_type)
    default = argument.has_default_value()
    if profile.override_defaults and default and kind in ("float", "bool"):
        return 0.5 if kind == "float" else profile.bool_
    if default:
        return argument.default_value
    if kind.startswith("Optional["):
        return None
    return _SIMPLE.get(kind, lambda p: _SKIP_ARGUMENT)(profile)


_SIMPLE: dict[str, Callable[[Profile], object]] = {
    "Tensor": lambda p: p.tensor(),
    "int": lambda p: p.int_,
    "SymInt": lambda p: p.int_,
    "float": lambda p: 0.5,
    "number": lambda p: 0.5,
    "Scalar": lambda p: 0.5,
    "complex": lambda p: 0.5 + 0.5j,
    "bool": lambda p: p.bool_,
    "List[int]": lambda p: list(p.ints),
    "List[SymInt]": lambda p: list(p.ints),
    "List[float]": lambda p: [0.5, 0.5],
    "List[number]": lambda p: [0.5, 0.5],
    "List[complex]": lambda p: [0.5j],
    "List[bool]": lambda p: [p.bool_] * 3,
    "List[Tensor]": lambda p: [p.tensor(), p.tensor()],
    "List[Optional[Tensor]]": lambda p: [p.tensor()],
    "List[t]": lambda p: [1, 1],
    "ScalarType": lambda p: torch.float64,
    "Layout": lambda p: torch.strided,
    "MemoryFormat": lambda p: torch.contiguous_format,
    "Device": lambda p: torch.device("cpu"),
}


def _schema_call(schema, profile: Profile, skip_self: bool = False):
    """(args, kwargs) filling in `schema` with `profile`, or None."""
    args, kwargs = [], {}
    arguments = list(schema.arguments)
    if skip_self:
        if not arguments or str(arguments[0].real_type) != "Tensor":
            return None
        arguments = arguments[1:]
    for argument in arguments:
        value = _value(argument, profile)
        if value is _SKIP_ARGUMENT:
            return None
        if argument.kwarg_only:
            kwargs[argument.name] = value
        else:
            args.append(value)
    return args, kwargs


# ---------------------------------------------------------------- one observed call


# A C++ TORCH_WARN that reaches stderr (no Python warning handler on the call path)
# is a warning, as Python's are (those are silenced here), not the op printing.
_C_WARNING = re.compile(
    r"^\[W\d{4} [\d:.]+ [\w.]+:\d+\] Warning: .*?\(function [^\n]*\)\n",
    re.DOTALL | re.MULTILINE,
)


@dataclass
class Observer:
    """Calls things and records every side effect, per call: files, prints, the
    random-number state, and changes to the tensors passed in."""

    capfd: pytest.CaptureFixture
    problems: list[str]
    calls: int = 0
    ran: int = 0

    def call(self, label: str, fn: Callable, args=(), kwargs=None) -> bool:
        """True if the call returned (raising is fine); side effects are recorded."""
        rng = torch.random.get_rng_state()
        before = _snapshot(args, kwargs)
        out, err = io.StringIO(), io.StringIO()
        ok = True
        self.calls += 1
        try:
            with (
                contextlib.redirect_stdout(out),
                contextlib.redirect_stderr(err),
                warnings.catch_warnings(),
            ):
                warnings.simplefilter("ignore")
                fn(*args, **(kwargs or {}))
        except Exception:  # noqa: BLE001 (synthetic arguments: refusals expected)
            ok = False
        self.ran += ok
        changed = [i for i, (t, copy) in enumerate(before) if not _same(t, copy)]
        if changed:
            self.problems.append(f"{label}: changed its tensor arguments {changed}")
        written = sorted(os.listdir("."))
        if written:
            self.problems.append(f"{label}: created files {written}")
            for name in written:  # so the next call is judged on its own
                path = os.path.join(".", name)
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path)
                else:
                    os.unlink(path)
        if out.getvalue() or err.getvalue():
            self.problems.append(
                f"{label}: printed {(out.getvalue() + err.getvalue())[:200]!r}"
            )
        fd = self.capfd.readouterr()
        printed = _C_WARNING.sub("", fd.out + fd.err)
        if printed:
            self.problems.append(f"{label}: printed (C level) {printed[:200]!r}")
        if not torch.equal(rng, torch.random.get_rng_state()):
            self.problems.append(f"{label}: changed the global RNG state")
            torch.random.set_rng_state(rng)
        return ok

    def assert_no_side_effects(self) -> None:
        assert not self.problems, "admitted callables with side effects:\n" + (
            "\n".join(self.problems)
        )


def _snapshot(args, kwargs) -> list:
    """(tensor, copy) for every tensor argument, in lists too."""
    values = [*args, *(kwargs or {}).values()]
    flat = [v for x in values for v in (x if isinstance(x, (list, tuple)) else [x])]
    return [
        (t, (t.clone(), t.shape, t.stride()))
        for t in flat
        if isinstance(t, torch.Tensor) and t.layout == torch.strided
    ]


def _same(t: torch.Tensor, copy) -> bool:
    values, shape, stride = copy
    if t.shape != shape or t.stride() != stride:
        return False
    return bool(torch.eq(t, values).logical_or(t.ne(t) & values.ne(values)).all())


@pytest.fixture
def observer(capfd):
    """An Observer, run in a fresh, empty working directory (`empty_cwd` fails the
    test if anything is left there, whatever the per-call checks missed)."""
    with empty_cwd(prefix="dualgen-sandbox-"):
        yield Observer(capfd, [])


# ---------------------------------------------------------------- the properties

CHUNKS = 4


def _chunk(items: list, index: int) -> list:
    return items[index::CHUNKS]


@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_admitted_aten_overloads_have_no_side_effects(observer, chunk):
    ops = _chunk(admitted_overloads(), chunk)
    ran = set()
    for op in ops:
        name = str(op)  # aten.cos.default
        if name in SKIP:
            continue
        for profile in PROFILES:
            made = _schema_call(op._schema, profile)
            if made is not None and observer.call(name, op, *made):
                ran.add(name)
    observer.assert_no_side_effects()
    # Enough of them must actually run, at least 800 of the ~1,400 admitted over
    # the chunks (~950 do; the others refuse synthetic arguments: sizes, index
    # tensors, CUDA-only kernels).
    assert len(ran) >= 800 // CHUNKS, (len(ran), len(ops))


def _python_calls(label: str, fn: Callable, overloads, profile: Profile, method):
    """(label, callable, args, kwargs) to try for a Python function or method."""
    t = profile.tensor()
    target = getattr(t, fn) if method else fn
    calls = [(label, target, (), {})] if method else []
    calls += [(label, target, (t,), {}), (label, target, (t, profile.tensor()), {})]
    for op in overloads:
        made = _schema_call(op._schema, profile, skip_self=method)
        if made is not None:
            calls.append((f"{label} as {op}", target, *made))
        made = _by_name_call(target, op._schema, profile)
        if made is not None:
            calls.append((f"{label} by the names of {op}", target, *made))
    # Not what a formula may write: `F.silu(x, y)` passes y as `inplace`.
    mutating = None if method else admissible.mutating_position(label[len("torch.") :])
    if mutating is not None:
        calls = [c for c in calls if len(c[2]) <= mutating[0]]
    return calls


_INPUT_NAMES = ("input", "self", "A", "x")


def _by_name_call(fn: Callable, schema, profile: Profile):
    """(args, kwargs) for a Python function, read from its own signature: each
    parameter the aten schema also names gets a value (optional ones too, so
    `output_size=`-style switches are tried), the first input a tensor, the rest
    (private `_name`s included) their defaults. None for builtins (no signature)
    or a required parameter the schema does not name."""
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    by_name = {a.name: a for a in schema.arguments}
    args, kwargs = [], {}
    for p in parameters:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if p.name in admissible.MUTATING_PARAMETERS:
            continue  # formulas may not pass these (tests/spec/test_sandbox_errors.py)
        argument = by_name.get(p.name)
        if argument is None and p.name in _INPUT_NAMES:
            argument = by_name.get("self") or by_name.get("input")
        kind = None if argument is None else str(argument.real_type)
        if kind is not None and kind.startswith("Optional["):
            kind = kind.removeprefix("Optional[").removesuffix("]")
        value = _SIMPLE.get(kind, lambda _: _SKIP_ARGUMENT)(profile)
        if value is _SKIP_ARGUMENT:
            if p.default is p.empty:
                return None
            continue
        if p.kind is p.POSITIONAL_ONLY:
            args.append(value)
        else:
            kwargs[p.name] = value
    return args, kwargs


def _observe(observer, label, target, overloads, method) -> bool:
    """Every call of `target` that PROFILES make, under the observer; whether any
    ran."""
    ran = False
    for profile in PROFILES:
        for call in _python_calls(label, target, overloads, profile, method=method):
            ran = observer.call(*call) or ran
    return ran


@pytest.mark.parametrize("namespace", NAMESPACES)
def test_admitted_torch_functions_have_no_side_effects(observer, namespace):
    functions = [
        (path, fn)
        for path, fn in admitted_functions()
        if (path.rsplit(".", 1)[0] if "." in path else "") == namespace
    ]
    ran = set()
    for path, fn in functions:
        if f"torch.{path}" in SKIP:
            continue
        overloads = _aten_overloads_of(_aten_name(path))
        if _observe(observer, f"torch.{path}", fn, overloads, method=False):
            ran.add(path)
    observer.assert_no_side_effects()
    assert len(ran) >= 0.6 * len(functions), (len(ran), len(functions))


def test_admitted_tensor_methods_have_no_side_effects(observer):
    methods = admitted_methods()
    ran = set()
    for name in methods:
        if f"Tensor.{name}" in SKIP:
            continue
        if _observe(observer, f"Tensor.{name}", name, _aten_overloads_of(name), True):
            ran.add(name)
    observer.assert_no_side_effects()
    assert len(ran) >= 250, (len(ran), len(methods))  # ~290 of ~350 run


def test_the_sample_is_large():
    """The properties above mean something only over a large set of callables."""
    assert len(admitted_overloads()) >= 1200  # ~1,400 dispatcher overloads
    assert len(admitted_functions()) >= 500  # ~685
    assert len(admitted_methods()) >= 300  # ~350


@pytest.mark.parametrize(
    "path",
    [
        "ops.aten.from_file",  # reads a file
        "ops.aten._print",  # prints
        "randn",  # draws random numbers
        "rand_like",
        "ops.aten.randn",
        "ops.aten.bernoulli.p",
        "ops.aten.empty",  # uninitialised memory
        "ops.aten._make_per_tensor_quantized_tensor",  # quantized
        "ops.aten._local_scalar_dense",  # a Python number out of a tensor
    ],
)
def test_the_issue_examples_are_refused(path):
    assert admissible.why_not(path) is not None


def test_the_observer_sees_each_side_effect(capfd):
    """The properties above are only as good as the Observer: it must see each."""
    with empty_cwd():
        observer = Observer(capfd, [])
        observer.call("file", lambda: open("leak.txt", "w").close())
        observer.call("print", print, ("hello",))
        observer.call("C print", os.write, (1, b"hello\n"))
        observer.call("rng", torch.rand, (2,))
        observer.call("raises", torch.cos, ("not a tensor",))
        assert observer.call("pure", torch.cos, (torch.ones(2),))
    assert [p.split(":")[0] for p in observer.problems] == [
        "file",
        "print",
        "C print",
        "rng",
    ]
    assert "leak.txt" in observer.problems[0]
    assert observer.ran == 5 and observer.calls == 6
