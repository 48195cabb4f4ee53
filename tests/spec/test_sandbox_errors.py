"""The formula sandbox: calls that are not pure, deterministic tensor math are
refused by what they are (tools/check/admissible.py), in backward and forward formulas,
also nested inside a linear term and inside a helper's arguments, with the exact
one-line error and nothing generated (or written anywhere).

The calls are the ones a new user tried (files, printing, random numbers,
uninitialised memory, quantized tensors, Python numbers), then neighbours of each.
"""

from __future__ import annotations

import pytest
from spec_error_cases import SENTINEL, _generate, entry

from dualgen.tools.check import admissible

NEG = "neg(Tensor self) -> Tensor"
MUL = "mul.Tensor(Tensor self, Tensor other) -> Tensor"

FILES = "reads or writes files"
SIDE_EFFECT = "returns nothing: it exists for a side effect (printing, asserting, I/O)"
RANDOM = "draws random numbers (nondeterministic, advances the global generator)"
UNINITIALISED = "returns uninitialised memory (aten's empty* and resize* operators)"
QUANTIZED = "builds quantized, sparse or MKL-DNN tensors (not what a derivative needs)"
NUMBER = "reads tensor values into a Python number (not tensor math)"
TORCHSCRIPT = (
    "is a TorchScript operator, not one of the dispatcher's (no eager kernel to "
    "judge or run)"
)
NOT_KNOWN = (
    "is no aten operator and not on the allowlist of pure Python functions "
    "(tools/check/admissible.py), so it is not known to be pure tensor math"
)

# Why a call is refused -> {name: the call, with {x} standing for a tensor in
# scope}; what is refused is the function or method called: the call's text up to
# its "(".
REFUSED_BY_WHY = {
    FILES: {
        "from_file": (
            "torch.ops.aten.from_file('/some/path', True, 4, dtype=torch.float64).sum()"
        ),
    },
    NOT_KNOWN: {
        # torch.save is Python (its namesake aten::save is TorchScript only)
        "save": "torch.save({x}, 'f.pt')",
        "manual_seed": "torch.manual_seed(0)",
        "set_grad_enabled": "torch.set_grad_enabled(True)",
        "embedding_max_norm": (
            "torch.nn.functional.embedding({x}.long(), {x}, max_norm=1.0)"
        ),
        "fractional_max_pool2d": "torch.nn.functional.fractional_max_pool2d({x}, 2)",
        "compile": "torch.compile({x})",
    },
    SIDE_EFFECT: {"print": "torch.ops.aten._print('x')"},
    RANDOM: {
        "randn": "torch.randn(1)",
        "rand_like": "torch.rand_like({x})",
        "aten_randn": "torch.ops.aten.randn([1])",
        "bernoulli_p": "torch.ops.aten.bernoulli.p({x}, 0.5)",
        "dropout": "torch.nn.functional.dropout({x})",
        "normal_method": "{x}.bernoulli()",
    },
    UNINITIALISED: {
        "empty": "torch.ops.aten.empty([3])",
        "empty_like": "torch.empty_like({x})",
        "new_empty": "{x}.new_empty([2])",
    },
    QUANTIZED: {
        "quantized": "torch.ops.aten._make_per_tensor_quantized_tensor({x}, 1.0, 0)",
        "to_sparse": "{x}.to_sparse()",
    },
    NUMBER: {
        "local_scalar_dense": "torch.ops.aten._local_scalar_dense({x})",
        "item": "{x}.item()",
    },
    TORCHSCRIPT: {"to_prim": "torch.ops.aten.to.prim_Device({x}, None)"},
}
# name -> (call, why)
REFUSED = {
    name: (call, why)
    for why, calls in REFUSED_BY_WHY.items()
    for name, call in calls.items()
}

# Where the call sits: a whole term, inside a linear term, inside a helper call.
BACKWARD_PLACES = {
    "term": "-grad + 0 * {call}",
    "linear_term": "-(grad * (1 + 0 * {call}))",
    "helper_argument": "-unbroadcast(grad * (1 + 0 * {call}), self)",
}
FORWARD_PLACES = {
    "term": "self_t * other_p + other_t * self_p + 0 * {call}",
    "linear_term": "self_t * (other_p + 0 * {call}) + other_t * self_p",
    "helper_argument": "scale(self_t, other_p + 0 * {call}) + other_t * self_p",
}


def _message(name: str) -> str:
    call, why = REFUSED[name]
    refused = call.split("(")[0].replace("{x}", "")
    return f"'{refused}' is not allowed in formulas: it {why}"


def _run(tmp_path, monkeypatch, capsys, spec: str) -> str:
    out = tmp_path / "out"
    out.mkdir()
    (out / "sentinel.py").write_bytes(SENTINEL)
    assert _generate(tmp_path, monkeypatch, spec) == 1
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err and captured.out == ""
    # Nothing generated, nothing written (the formula never ran).
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "spec.yaml"]
    assert [p.name for p in out.iterdir()] == ["sentinel.py"]
    return captured.err


@pytest.mark.parametrize("place", BACKWARD_PLACES)
@pytest.mark.parametrize("name", REFUSED)
def test_backward_formula_refused(tmp_path, monkeypatch, capsys, name, place):
    call = REFUSED[name][0].format(x="self")
    formula = BACKWARD_PLACES[place].format(call=call)
    spec = entry(NEG, f"self: {formula}", "result: auto_linear")
    err = _run(tmp_path, monkeypatch, capsys, spec)
    assert err == f"spec.yaml:2: error: neg: self: {_message(name)}\n" + (
        "1 error(s); out left unchanged\n"
    )


@pytest.mark.parametrize("place", FORWARD_PLACES)
@pytest.mark.parametrize("name", REFUSED)
def test_forward_formula_refused(tmp_path, monkeypatch, capsys, name, place):
    call = REFUSED[name][0].format(x="self_p")
    formula = FORWARD_PLACES[place].format(call=call)
    spec = entry(
        MUL,
        "self: grad * other.conj()",
        "other: grad * self.conj()",
        f"result: {formula}",
    )
    err = _run(tmp_path, monkeypatch, capsys, spec)
    assert err == f"spec.yaml:4: error: mul.Tensor: result: {_message(name)}\n" + (
        "1 error(s); out left unchanged\n"
    )


def test_the_same_places_admit_pure_calls(tmp_path, monkeypatch, capsys):
    """The control: the same formulas with a pure call instead generate."""
    monkeypatch.chdir(tmp_path)
    from dualgen.tools.cli import main

    backward = BACKWARD_PLACES["helper_argument"].format(call="torch.cos(self)")
    forward = FORWARD_PLACES["helper_argument"].format(call="self_p.cos()")
    (tmp_path / "spec.yaml").write_text(
        entry(NEG, f"self: {backward}", "result: auto_linear")
        + entry(
            MUL,
            "self: grad * other.conj()",
            "other: grad * self.conj()",
            f"result: {forward}",
        )
    )
    assert main(["generate", "--spec", "spec.yaml", "--out", "out"]) == 0


@pytest.mark.parametrize(
    "path, why",
    [
        ("ops.aten.cos", None),
        ("ops.aten.cos.default", None),
        ("linalg.solve", None),
        ("nn.functional.relu", None),
        ("einsum", None),  # a `str` equation is no file name
        ("finfo", None),
        ("ops.aten.normal.Tensor_float", RANDOM),
        ("ops.aten.resize", UNINITIALISED),
        ("ops.aten.sin_", "mutates its arguments"),
        ("set_default_dtype", NOT_KNOWN),
    ],
)
def test_admissibility_is_read_from_the_operator(path, why):
    assert admissible.why_not(path) == why


def test_every_method_and_function_the_spec_uses_is_admitted():
    """The rule admits everything derivatives.yaml calls today (else the rule,
    not the spec, would be wrong): `dualgen generate --check` parses them all."""
    from dualgen.tools.cli import main

    assert main(["generate", "--check"]) == 0


@pytest.mark.parametrize(
    "method, why",
    [
        ("cos", None),
        ("double", None),  # no operator of its name: on the allowlist
        ("size", None),  # returns an int, but from metadata
        ("item", NUMBER),
        ("tolist", NOT_KNOWN.replace("Python functions", "Tensor methods")),
        ("exponential_", "mutates its arguments"),
    ],
)
def test_methods_are_judged_as_their_operator(method, why):
    assert admissible.why_not_method(method) == why


@pytest.mark.parametrize(
    "call, parameter",
    [
        ("torch.nn.functional.relu(grad, True)", "inplace"),
        ("torch.nn.functional.silu(grad, grad)", "inplace"),
        ("torch.nn.functional.threshold(grad, 0.5, 0.0, True)", "inplace"),
    ],
)
def test_mutating_argument_given_by_position(
    tmp_path, monkeypatch, capsys, call, parameter
):
    """`inplace=` by keyword is refused; by position it must be too."""
    spec = entry(NEG, f"self: -{call}", "result: auto_linear")
    err = _run(tmp_path, monkeypatch, capsys, spec)
    function = call.split("(")[0]
    assert err == (
        f"spec.yaml:2: error: neg: self: argument '{parameter}' of '{function}' is "
        "not allowed in formulas (it mutates)\n1 error(s); out left unchanged\n"
    )
