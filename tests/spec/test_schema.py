"""Schema notation parses into the model and prints back to the same text."""

from __future__ import annotations

import pytest
import torch

from dualgen.tools.spec.model import OpKind, TypeKind
from dualgen.tools.spec.schema import SchemaSyntaxError, TorchOperators, parse_schema


def _aten_schemas() -> list[str]:
    texts = [
        str(s) for s in torch._C._jit_get_all_schemas() if s.name.startswith("aten::")
    ]
    # TorchScript builtins over generic types (`t[]`, `Dict(str, t)`) are not operators
    # a derivatives spec can name.
    generic = (
        "(t",
        " t ",
        "t[]",
        "Dict(",
        "...",
        "(str,",
        "(int,",
        "(float,",
        "(bool,",
        "(complex,",
        "(Tensor,",
    )
    return [t for t in texts if not any(g in t for g in generic)]


def test_every_aten_schema_round_trips():
    texts = _aten_schemas()
    assert len(texts) > 3000
    bad = [t for t in texts if "aten::" + str(parse_schema(t)) != t]
    assert not bad, bad[:5]


@pytest.mark.parametrize(
    "text, kind",
    [
        (
            "add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
            OpKind.FUNCTIONAL,
        ),
        (
            "add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)",
            OpKind.INPLACE,
        ),
        (
            "add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)",
            OpKind.OUT,
        ),
        ("view(Tensor(a) self, SymInt[] size) -> Tensor(a)", OpKind.VIEW),
        (
            "split.Tensor(Tensor(a -> *) self, SymInt split_size, int dim=0) -> Tensor(a)[]",
            OpKind.VIEW,
        ),
    ],
)
def test_kind_comes_from_alias_annotations(text, kind):
    assert parse_schema(text).kind is kind


def test_argument_kinds():
    schema = parse_schema("index.Tensor(Tensor self, Tensor?[] indices) -> Tensor")
    assert [a.kind for a in schema.arguments] == [
        TypeKind.TENSOR,
        TypeKind.OPTIONAL_TENSOR_LIST,
    ]
    schema = parse_schema("cat(Tensor[] tensors, int dim=0) -> Tensor")
    assert schema.arguments[0].kind is TypeKind.TENSOR_LIST
    assert schema.arguments[1].kind is TypeKind.OTHER


def test_output_names():
    assert parse_schema("sin(Tensor self) -> Tensor").output_names() == ("result",)
    max_dim = parse_schema(
        "max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)"
    )
    assert max_dim.output_names() == ("values", "indices")
    assert parse_schema("f(Tensor self) -> (Tensor, Tensor)").output_names() == (
        "result0",
        "result1",
    )


@pytest.mark.parametrize(
    "text",
    [
        "sin(Tensor self",
        "sin Tensor self -> Tensor",
        "sin(Tensor) -> Tensor",
        "si-n(Tensor self) -> Tensor",
    ],
)
def test_malformed_schemas_raise(text):
    with pytest.raises(SchemaSyntaxError):
        parse_schema(text)


def test_lookup_suggests_close_names():
    ops = TorchOperators()
    assert ops.lookup("mul.Tensor").schema is not None
    miss = ops.lookup("mull.Tensor")
    assert miss.schema is None and "mul.Tensor" in miss.suggestions
