"""Each call in a formula is checked at generate time against its callee's
schema or signature (tools/check/calls.py): positional count and keyword names, with a
located error naming the call and the signature it expected. Python's
conveniences that schemas do not show (varargs sizes, an int for an int list,
numpy's keyword names, `x.to(dtype)`) still pass.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dualgen.tools.cli import main

NEG = "neg(Tensor self) -> Tensor"
COS = "aten::cos(Tensor self) -> Tensor"
SUM = (
    "aten::sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, "
    "ScalarType? dtype=None) -> Tensor; "
    "aten::sum(Tensor self, *, ScalarType? dtype=None) -> Tensor"
)


def entry(name: str, *lines: str) -> str:
    """One spec entry: `- name: <name>` then its other keys, one per line."""
    return f"- name: {name}\n" + "".join(f"  {line}\n" for line in lines)


def neg_bw(formula: str) -> str:
    """A backward formula on line 2 (auto_linear adds no follow-on error)."""
    return entry(NEG, f"self: {formula}", "result: auto_linear")


def bw(message: str) -> str:
    return f"spec.yaml:2: error: neg: self: {message}"


CASES = [
    (
        "aten_packet_too_many_positional",
        "grad * torch.ops.aten.cos(self, 3)",
        (
            "torch.ops.aten.cos(self, 3): no overload of aten::cos takes 2 positional "
            f"arguments; {COS}"
        ),
    ),
    (
        "aten_packet_unknown_keyword",
        "torch.ops.aten.sum(grad, dims=0)",
        (
            "torch.ops.aten.sum(grad, dims=0): no overload of aten::sum takes keyword "
            f"'dims'; {SUM}"
        ),
    ),
    (
        "aten_overload_too_many_positional",
        "grad * torch.ops.aten.cos.default(self, 3)",
        (
            "torch.ops.aten.cos.default(self, 3): aten::cos takes at most 1 positional "
            f"argument (2 given); {COS}"
        ),
    ),
    (
        "aten_overload_missing_argument",
        "torch.ops.aten.mul.Tensor(grad)",
        (
            "torch.ops.aten.mul.Tensor(grad): aten::mul.Tensor is missing argument "
            "'other'; aten::mul.Tensor(Tensor self, Tensor other) -> Tensor"
        ),
    ),
    (
        "aten_overload_argument_twice",
        "torch.ops.aten.mul.Tensor(grad, self=grad)",
        (
            "torch.ops.aten.mul.Tensor(grad, self=grad): aten::mul.Tensor got argument "
            "'self' by position and by keyword; "
            "aten::mul.Tensor(Tensor self, Tensor other) -> Tensor"
        ),
    ),
    (
        "torch_function_too_many_positional",
        "grad * torch.cos(self, 3)",
        (
            "torch.cos(self, 3): no overload of torch.cos (aten::cos) takes 2 positional "
            f"arguments; {COS}"
        ),
    ),
    (
        "python_torch_function_unknown_keyword",
        "torch.nn.functional.relu(grad, bogus=True)",
        (
            "torch.nn.functional.relu(grad, bogus=True): got an unexpected keyword "
            "argument 'bogus'; torch.nn.functional.relu(input, inplace=False)"
        ),
    ),
    (
        "helper_too_many_positional",
        "as_real_like(grad, self, 3)",
        (
            "as_real_like(grad, self, 3): too many positional arguments; "
            "as_real_like(t, like)"
        ),
    ),
    (
        "helper_missing_argument",
        "as_real_like(grad)",
        (
            "as_real_like(grad): missing a required argument: 'like'; "
            "as_real_like(t, like)"
        ),
    ),
    (
        "helper_unknown_keyword",
        "as_real_like(grad, lik=self)",
        (
            "as_real_like(grad, lik=self): got an unexpected keyword argument 'lik'; "
            "as_real_like(t, like)"
        ),
    ),
    (
        "method_unknown_keyword",
        "grad.sum(dims=0)",
        (
            f"grad.sum(dims=0): no overload of Tensor.sum (aten::sum) takes keyword "
            f"'dims'; {SUM}"
        ),
    ),
    (
        "method_too_many_positional",
        "grad.neg(1)",
        (
            "grad.neg(1): no overload of Tensor.neg (aten::neg) takes 1 positional "
            "argument; aten::neg(Tensor self) -> Tensor"
        ),
    ),
    (
        "method_receiver_is_self",
        "grad.mul(self=grad)",
        (
            "grad.mul(self=grad): no overload of Tensor.mul (aten::mul) takes keyword "
            "'self'; aten::mul.Tensor(Tensor self, Tensor other) -> Tensor; "
            "aten::mul.Scalar(Tensor self, Scalar other) -> Tensor"
        ),
    ),
    (
        "nested_call_is_checked",
        "grad * self.cos().sin(2)",
        (
            "self.cos().sin(2): no overload of Tensor.sin (aten::sin) takes 1 positional "
            "argument; aten::sin(Tensor self) -> Tensor"
        ),
    ),
    (
        "long_call_is_shortened",
        "torch.ops.aten.cos(grad * self * self * self * self * self * self, self + self + self)",
        (
            "torch.ops.aten.cos(...): no overload of aten::cos takes 2 positional "
            f"arguments; {COS}"
        ),
    ),
]

# Python's conveniences that aten schemas do not show, and ordinary calls: no error.
PASSING = [
    "grad.sum(0)",
    "grad.sum(0, True)",
    "grad.sum(dim=0, keepdim=True)",
    "grad.sum([0, 1])",
    "grad.view(3, 4)",
    "grad.view([3, 4])",
    "grad.view(torch.float64)",
    "grad.reshape(2, -1)",
    "grad.reshape([2, -1])",
    "grad.permute(1, 0)",
    "grad.expand(3, 4)",
    "grad.expand_as(self)",
    "grad.repeat(2, 1)",
    "grad.flip(0)",
    "grad.flip(0, 1)",
    "grad.to(torch.float64)",
    "grad.to(self)",
    "grad.to(dtype=torch.float64)",
    "grad.to(self.dtype, copy=True)",
    "grad.transpose(0, 1)",
    "grad.contiguous()",
    "grad.double()",
    "torch.stack([grad, grad])",
    "torch.stack([grad, grad], dim=0)",
    "torch.cat([grad, grad], 0)",
    "grad * grad.size(0)",
    "grad * grad.size(dim=0)",
    "grad * grad.size()[0]",
    "grad * grad.dim()",
    "grad.mT",
    "grad * self.shape[0]",
    "torch.sum(grad, axis=0, keepdims=True)",
    "torch.sum(input=grad)",
    "grad + torch.zeros(2, 3)",
    "grad + torch.zeros([2, 3], dtype=grad.dtype)",
    "torch.zeros_like(grad, memory_format=torch.preserve_format)",
    "grad.new_zeros(2, 3)",
    "grad.new_zeros([2, 3], dtype=torch.float64)",
    "torch.addmm(grad, grad, grad, beta=2)",
    "torch.where(self > 0, grad, 0)",
    "grad.where(self > 0, 0)",
    "torch.linalg.vector_norm(grad, 2, dim=0)",
    "torch.nn.functional.relu(grad)",
    "torch.nn.functional.gelu(grad, approximate='tanh')",
    "torch.ops.aten.sum(grad, 0)",
    "torch.ops.aten.sum(grad, [0], True)",
    "torch.ops.aten.sum.dim_IntList(grad, [0], keepdim=True)",
    "torch.ops.aten.cos.default(grad)",
    "grad if torch.finfo(grad.dtype) else grad",
    "torch.einsum('ij->ji', grad)",
    "torch.meshgrid(grad, grad, indexing='ij')[0]",
    "torch.nn.functional.pad(grad, [1, 1])",
    "torch.linalg.solve(grad, grad, left=False)",
    "torch.linalg.vector_norm(input=grad, axis=0, keepdims=True)",
    "torch.fft.fft(grad, norm='ortho')",
    "torch.special.xlogy(grad, self)",
    "torch.norm(grad, 2, dim=0)",
    "grad * self.shape.numel()",
    "as_real_like(grad, self)",
    "as_real_like(t=grad, like=self)",
]


def _generate(tmp_path: Path, monkeypatch, spec_text: str) -> int:
    monkeypatch.chdir(tmp_path)
    Path("spec.yaml").write_text(spec_text, encoding="utf-8")
    return main(["generate", "--spec", "spec.yaml", "--out", "out"])


def test_case_ids_are_unique():
    ids = [case[0] for case in CASES]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize(
    "formula, message", [case[1:] for case in CASES], ids=[case[0] for case in CASES]
)
def test_wrong_call_is_reported_exactly(
    tmp_path, monkeypatch, capsys, formula, message
):
    assert _generate(tmp_path, monkeypatch, neg_bw(formula)) == 1
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    assert captured.out == ""
    assert captured.err == f"{bw(message)}\n1 error(s); out left unchanged\n"
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("formula", PASSING)
def test_python_conveniences_pass(tmp_path, monkeypatch, capsys, formula):
    assert _generate(tmp_path, monkeypatch, neg_bw(formula)) == 0
    assert capsys.readouterr().err == ""
