"""Shared by the gradcheck harness's tests (test_gradcheck_correct.py, _user_rules,
_spec_formulas, _api and test_gradgradcheck.py): seeded float64 / complex128
inputs, the dtype and mode parameters, and kernels generated from a small spec
under test (put in place with `using_kernels`)."""

from __future__ import annotations

import pytest
import torch

from dualgen.tools.cli import generate_files
from dualgen.tools.validate import load_kernels

F64, C128 = torch.float64, torch.complex128
DTYPES = [pytest.param(F64, id="real"), pytest.param(C128, id="complex")]
FAST = [pytest.param(False, id="slow"), pytest.param(True, id="fast")]


def rand(*shape, dtype=F64, seed=0, requires_grad=True, positive=False):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g, dtype=F64)
    if positive:
        x = x.abs() + 0.5
    if dtype.is_complex:
        x = torch.complex(x, torch.randn(shape, generator=g, dtype=F64))
    return x.to(dtype).requires_grad_(requires_grad)


FORWARD_ONLY = {"check_forward_ad": True, "check_backward_ad": False}


# The harness itself runs alias and clone; _conj, resolve_conj, neg and mul are
# what the formulas below call (for second derivatives).
BASE_SPEC = """
- name: alias(Tensor(a) self) -> Tensor(a)
  self: grad

- name: clone(Tensor self, *, MemoryFormat? memory_format=None) -> Tensor
  self: grad
  result: auto_linear

- name: _conj(Tensor(a) self) -> Tensor(a)
  self: grad.conj()

- name: resolve_conj(Tensor(a) self) -> Tensor(a)
  self: grad

- name: neg(Tensor self) -> Tensor
  self: -grad
  result: auto_linear

- name: mul.Tensor(Tensor self, Tensor other) -> Tensor
  self: unbroadcast(grad * other.conj(), self)
  other: unbroadcast(grad * self.conj(), other)
  result: self_t * other_p + other_t * self_p
"""


def spec_text(entries: dict[str, tuple[str, str]]) -> str:
    text = BASE_SPEC
    for op, (backward, forward) in entries.items():
        text += (
            f"\n- name: {op}(Tensor self) -> Tensor\n"
            f"  self: {backward}\n  result: {forward}\n"
        )
    return text


def kernels_from(tmp_path_factory, name: str, text: str) -> dict:
    path = tmp_path_factory.mktemp("spec") / f"{name}.yaml"
    path.write_text(text)
    return load_kernels(generate_files(path).files)
