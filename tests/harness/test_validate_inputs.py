"""The inputs `dualgen validate` draws from `sample:` declarations: through the
command line, a domain an op needs (real log), ops torch refuses in complex (n/a),
an undeclared tensor list, a selection of the real spec on its own samples,
statistics that move with their source; and
tools/validate/inputs.py directly (`cases_for`): default and declared shapes, several
samples and defaults, tensor lists, tensor literals, named numbers, dtypes, the
domains, and determinism for a seed.
"""

from __future__ import annotations

import re

import pytest
import torch
from validate_checks import (
    CHECKS,
    COLUMNS,
    FIRST_ORDER,
    HARNESS,
    LOG,
    LOG_BW,
    REPO,
    entry,
    failures,
    table,
    validate,
)

from dualgen.tools.cli import main
from dualgen.tools.spec.sample import (
    DtypeName,
    Sample,
    TensorListSample,
    TensorSample,
    parse_sample,
)
from dualgen.tools.validate.inputs import cases_for

aten = torch.ops.aten

# ---------------------------------------------------------------- domains


def test_real_log_needs_its_sample_domain(tmp_path, monkeypatch, capsys):
    # Without `sample: self=positive`, real log of the negative draws is NaN: the
    # numerical derivative is NaN and gradcheck fails in float64. The adjoint check
    # compares the formulas only (finite 1/x) and passes; complex log is
    # holomorphic off the negative real axis, which random complex draws miss.
    spec = HARNESS + entry(LOG, LOG_BW, "result: auto_element_wise")
    rc = validate(tmp_path, monkeypatch, spec, "--ops", "log", "-v", "--report", "r")
    out, _ = capsys.readouterr()
    assert rc == 1
    found = failures(out)
    assert set(found) == {
        (k, "float64", c) for k in ("log", "log_") for c in ("slow", "fast")
    }
    assert "numerical:  nan" in out
    rows = table(tmp_path / "r.md")
    for row in rows.values():
        assert row["float64 adjoint"] == "pass"
        assert [row[f"complex128 {c}"] for c in FIRST_ORDER] == ["pass"] * 3
        assert row["complex128 jet"] in ("pass", "n/a")  # n/a: no rule for exp


def test_ops_torch_refuses_in_complex_are_na(tmp_path, monkeypatch, capsys):
    spec = (
        HARNESS
        + entry(
            "maximum(Tensor self, Tensor other) -> Tensor",
            "self: unbroadcast(grad * winner_weight(self, other), self)",
            "other: unbroadcast(grad * winner_weight(other, self), other)",
            "result: self_t * winner_weight(self_p, other_p)"
            " + other_t * winner_weight(other_p, self_p)",
        )
        + entry(
            "clamp(Tensor self, Scalar? min=None, Scalar? max=None) -> Tensor",
            "sample:",
            "  - min=-0.5, max=0.5",
            "  - min=-0.5",
            "self: grad * clamp_mask(self, min, max)",
            "result: auto_element_wise",
        )
        # No differentiable input: nothing to check at all.
        + entry(
            "eq.Tensor(Tensor self, Tensor other) -> Tensor",
            "non_differentiable: [self, other]",
        )
    )
    rc = validate(tmp_path, monkeypatch, spec, "--report", "r")
    out, _ = capsys.readouterr()
    assert rc == 0, out
    assert "7 kernels: 5 pass, 0 fail, 2 have no derivatives to check" in out
    rows = table(tmp_path / "r.md")
    assert list(rows) == [
        "alias",
        "clone",
        "maximum",
        "clamp",
        "clamp_",
        "eq.Tensor",
        "eq_.Tensor",
    ]
    for kernel in ("maximum", "clamp", "clamp_"):
        assert [rows[kernel][f"float64 {c}"] for c in FIRST_ORDER] == ["pass"] * 3
        assert [rows[kernel][f"complex128 {c}"] for c in CHECKS] == ["n/a"] * 5
    for kernel in ("eq.Tensor", "eq_.Tensor"):
        assert [rows[kernel][c] for c in COLUMNS] == ["n/a"] * len(COLUMNS)
    html = (tmp_path / "r.html").read_text()
    cells = [row[c] for row in rows.values() for c in COLUMNS]
    assert html.count('class="na"') == cells.count("n/a") >= 3 * 5 + 2 * 10
    assert (
        'class="na" title="sample, 2-d: torch refuses: RuntimeError: maximum not '
        'implemented for complex tensors."' in html
    )
    assert (
        'class="na" title="sample 1, 2-d: torch refuses: NotImplementedError:' in html
    )
    assert 'title="sample, 2-d: no differentiable input or output"' in html


def test_unlisted_tensor_list_argument(tmp_path, monkeypatch, capsys):
    # A Tensor[] argument without a sample gets a list of two tensors.
    spec = HARNESS + entry(
        "cat(Tensor[] tensors, int dim=0) -> Tensor",
        "tensors: split_like(grad, tensors, dim)",
        "result: auto_linear",
    )
    rc = validate(tmp_path, monkeypatch, spec, "--ops", "cat")
    out, err = capsys.readouterr()
    assert rc == 0, out + err
    assert "1 kernels: 1 pass, 0 fail" in out


# ---------------------------------------------------------------- the real spec


def test_real_spec_selection_passes(monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(REPO)
    ops = [
        "exp",
        "mul.Tensor",
        "view",
        "max.dim",
        "cat",
        "add_.Tensor",
        "tanh_backward",
        "bernoulli",  # random: each evaluation is seeded alike
    ]
    report = tmp_path / "real"
    rc = main(["validate", "--no-progress", "--report", str(report), "--ops", *ops])
    out, _ = capsys.readouterr()
    assert rc == 0, out
    assert "FAIL" not in out
    rows = table(report.with_suffix(".md"))
    assert set(ops) <= set(rows)
    assert "exp_" in rows  # derived in-place variants of a selected entry
    for kernel, row in rows.items():
        assert [row[f"float64 {c}"] for c in CHECKS] == ["pass"] * len(CHECKS), kernel
    assert re.search(rf"{len(rows)} kernels: {len(rows)} pass, 0 fail", out)


def _real_entry(name: str) -> str:
    """The text of one entry of the real spec."""
    text = (REPO / "derivatives.yaml").read_text()
    start = text.index(f"- name: {name}(")
    end = text.find("\n- name: ", start + 1)
    return text[start:] if end < 0 else text[start : end + 1]


@pytest.mark.parametrize("statistics", [True, False])
def test_statistics_move_with_their_source(tmp_path, monkeypatch, capsys, statistics):
    # The rule of native_layer_norm_backward takes mean and rstd as the input's.
    # With samples that recompute them from the perturbed input it passes; with
    # fixed ones, finite differences see another function and it fails.
    real = _real_entry("native_layer_norm_backward")
    if not statistics:
        real = re.sub(
            r"mean_of\(input, dims=\[2\], keepdim=True\)", "any(2, 3, 1)", real
        )
        real = re.sub(r"rstd_of\(input, dims=\[2\][^)]*\)", "positive(2, 3, 1)", real)
    rc = validate(
        tmp_path, monkeypatch, HARNESS + real, "--ops", "native_layer_norm_backward"
    )
    out, _ = capsys.readouterr()
    if statistics:
        assert rc == 0, out
    else:
        assert rc == 1
        found = failures(out)
        assert ("native_layer_norm_backward", "float64", "slow") in found
        assert all(detail.startswith("sample 1") for _, detail in found.values())


# ---------------------------------------------------------------- tools/validate/inputs.py


def sample(**values) -> Sample:
    return Sample(tuple(values.items()), None)


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128])
def test_free_shapes_give_2d_0d_and_empty_cases(dtype):
    cases = cases_for(aten.sin.default, (), dtype, 0)
    assert [c.label for c in cases] == ["sample, 2-d", "sample, 0-d", "sample, empty"]
    assert [tuple(c.values["self"].shape) for c in cases] == [(3, 4), (), (0, 4)]
    assert all(c.values["self"].dtype == dtype for c in cases)


def test_declared_shapes_give_one_case():
    cases = cases_for(
        aten.view.default,
        (sample(self=TensorSample("any", (3, 4)), size=(4, 3)),),
        torch.float64,
        0,
    )
    assert [c.label for c in cases] == ["sample"]
    assert cases[0].values["self"].shape == (3, 4)
    assert cases[0].values["size"] == [4, 3]


def test_undeclared_tensor_keeps_the_default_shapes():
    # `self` has a shape; `other`, not in the sample, is tried in each default one.
    cases = cases_for(
        aten.mul.Tensor, (sample(self=TensorSample("any", (2, 3))),), torch.float64, 0
    )
    assert [tuple(c.values["self"].shape) for c in cases] == [(2, 3)] * 3
    assert [tuple(c.values["other"].shape) for c in cases] == [(3, 4), (), (0, 4)]


def test_several_samples_and_defaults():
    samples = (sample(min=-0.5, max=0.5), sample(min=-0.5))
    cases = cases_for(aten.clamp.default, samples, torch.float64, 0)
    assert [c.label for c in cases] == [
        f"sample {n}, {v}" for n in (1, 2) for v in ("2-d", "0-d", "empty")
    ]
    assert [(c.values["min"], c.values["max"]) for c in cases] == [(-0.5, 0.5)] * 3 + [
        (-0.5, None)
    ] * 3
    # Schema defaults, then type defaults for required arguments.
    add, *_ = cases_for(aten.add.Tensor, (), torch.float64, 0)
    assert add.values["alpha"] == 1
    softmax, *_ = cases_for(aten.softmax.int, (), torch.float64, 0)
    assert softmax.values["dim"] == -1 and softmax.values["dtype"] is None
    full, *_ = cases_for(aten.full_like.default, (), torch.float64, 0)
    assert full.values["fill_value"] == 0.5


def test_tensor_list_sample():
    tensors = TensorListSample((TensorSample("any", (2, 3)), TensorSample("positive")))
    cases = cases_for(
        aten.cat.default, (sample(tensors=tensors, dim=1),), torch.float64, 0
    )
    assert len(cases) == 3  # the unshaped item takes the default shapes
    first = cases[0].values
    assert isinstance(first["tensors"], list) and first["dim"] == 1
    assert [tuple(t.shape) for t in first["tensors"]] == [(2, 3), (3, 4)]
    assert (first["tensors"][1] > 0).all()


def parsed(op, text: str):
    """A sample as the spec writes it, parsed against `op`'s arguments."""
    from dualgen.tools.spec.errors import Location
    from dualgen.tools.spec.schema import parse_schema

    schema = parse_schema(str(op._schema).removeprefix("aten::"))
    arguments = {a.name: a for a in schema.arguments}
    return parse_sample(text, arguments, Location("spec.yaml", 1))


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128])
def test_tensor_literals(dtype):
    (case,) = cases_for(
        aten.index_put.default,
        (
            parsed(
                aten.index_put.default,
                "self=tensor([[nan, 1.5], [-inf, 2]]), "
                "indices=[None, tensor([1, 1])], values=any(2), accumulate=True",
            ),
        ),
        dtype,
        0,
    )
    values = case.values
    assert values["self"].dtype is dtype  # numbers take the case's dtype
    expected = torch.tensor([[float("nan"), 1.5], [-float("inf"), 2.0]], dtype=dtype)
    torch.testing.assert_close(values["self"], expected, equal_nan=True)
    none, index = values["indices"]
    assert none is None and index.dtype is torch.int64 and index.tolist() == [1, 1]
    (mask,) = cases_for(
        aten.masked_fill.Scalar,
        (parsed(aten.masked_fill.Scalar, "mask=tensor([[True], [False]]), value=2"),),
        dtype,
        0,
    )[:1]
    assert mask.values["mask"].dtype is torch.bool
    assert mask.values["mask"].tolist() == [[True], [False]]


def test_named_numbers_and_float_lists():
    (norm,) = cases_for(
        aten.linalg_vector_norm.default,
        (parsed(aten.linalg_vector_norm.default, "self=any(3), ord=-inf, dim=[0]"),),
        torch.float64,
        0,
    )
    assert norm.values["ord"] == -float("inf")
    op = aten.upsample_bilinear2d.vec
    (up,) = cases_for(
        op,
        (
            parsed(
                op,
                "input=any(1, 1, 2, 2), output_size=None, align_corners=False, "
                "scale_factors=[2.0, 1.5]",
            ),
        ),
        torch.float64,
        0,
    )
    assert up.values["scale_factors"] == [2.0, 1.5]


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128])
def test_scalar_type_defaults_to_the_sample_dtype(dtype):
    case, *_ = cases_for(aten.to.dtype, (), dtype, 0)
    assert case.values["dtype"] is dtype
    (declared,) = cases_for(
        aten.to.dtype,
        (sample(self=TensorSample("any", (2,)), dtype=DtypeName("float32")),),
        dtype,
        0,
    )
    assert declared.values["dtype"] is torch.float32


def draw(domain: str, dtype: torch.dtype, shape=(40, 25)) -> torch.Tensor:
    (case,) = cases_for(
        aten.sin.default, (sample(self=TensorSample(domain, shape)),), dtype, 0
    )
    return case.values["self"]


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128])
def test_domains(dtype):
    positive = draw("positive", dtype)
    assert positive.dtype == dtype and positive.shape == (40, 25)
    assert (positive.real >= 0.5).all() and (positive.real < 1.5).all()
    unit = draw("unit", dtype)
    assert (unit.real.abs() < 0.8).all()
    if dtype.is_complex:
        assert (unit.imag.abs() < 0.8).all() and (unit.imag != 0).any()
    else:
        assert (unit.abs() < 1).all()
    nonzero = draw("nonzero", dtype)
    assert (nonzero.real.abs() >= 0.5).all()
    assert (nonzero.real < 0).any() and (nonzero.real > 0).any()
    distinct = draw("distinct", dtype).real
    assert distinct.unique().numel() == distinct.numel()
    anything = draw("any", dtype)
    assert (anything.real < 0).any() and (anything.real > 0).any()


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128])
def test_bool_domain(dtype):
    cases = cases_for(
        aten.where.self, (sample(condition=TensorSample("bool")),), dtype, 0
    )
    assert len(cases) == 3
    for case in cases:
        assert case.values["condition"].dtype == torch.bool
        assert case.values["self"].dtype == dtype
    mask = cases[0].values["condition"]
    assert mask.any() and not mask.all()


def test_cases_are_deterministic_for_a_seed():
    samples = (
        sample(self=TensorSample("any", (3, 4))),
        sample(self=TensorSample("distinct"), dim=0, keepdim=True),
    )

    def tensors(seed):
        cases = cases_for(aten.max.dim, samples, torch.complex128, seed)
        return [c.values["self"] for c in cases]

    first, again, other = tensors(7), tensors(7), tensors(8)
    assert len(first) == 4
    assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))
    assert not torch.equal(first[0], other[0])


def _schema_named(*names):
    from types import SimpleNamespace

    arguments = [SimpleNamespace(name=name) for name in names]
    return SimpleNamespace(_schema=SimpleNamespace(arguments=arguments))


@pytest.mark.parametrize(
    "torch_names",
    [
        ("grad", "x1", "x2", "p", "cdist"),  # torch 2.12, 2.13
        ("grad_output", "x1", "x2", "p", "cdist"),  # torch 2.14
    ],
)
def test_samples_are_keyed_by_the_installed_torchs_argument_names(torch_names):
    """An argument a release renamed (`renamed_in_torch`) keeps its declared
    sample: undeclared, it would be drawn in free shapes, and torch 2.14's
    _cdist_backward crashes the process on a grad of the wrong shape."""
    from kernel_harness import SPEC_PATH

    from dualgen.tools.cli import checked_spec
    from dualgen.tools.validate import samples_of

    spec, _ = checked_spec(SPEC_PATH)
    (entry,) = [e for e in spec.entries if e.schema.full_name == "_cdist_backward"]
    samples = samples_of(spec, entry, _schema_named(*torch_names))
    assert len(samples) == len(entry.samples) == 4
    for sample in samples:
        assert [name for name, _ in sample.values] == list(torch_names)
