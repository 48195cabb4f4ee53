"""Tensors as Python source: the leaves of a program and the constants of its steps.

Programs print as code, and a shrunk failure must run as printed, so every tensor a
program starts from is a literal. Values are multiples of 1/8 in [-2, 2]: exact in
float32 and float64 (the printed program is the program that ran), short to read,
and far from overflow, so finite differences stay accurate. A layout is a suffix
applied to a literal storage (`.transpose(0, 1)`, `[..., ::2]`, `.expand(...)`,
`.conj()`), which is how non-contiguous, offset, expanded and conjugate tensors get
into programs without helpers the reproducer would need.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from hypothesis import strategies as st

FLOATING = (torch.float32, torch.float64)
COMPLEX = (torch.complex128,)
DTYPES = (torch.float64, torch.float32, torch.complex128)

# Simplest first: hypothesis shrinks a sampled_from towards its first element.
SHAPES: tuple[tuple[int, ...], ...] = (
    (),
    (2,),
    (3,),
    (2, 2),
    (2, 3),
    (3, 2),
    (1, 3),
    (0,),
    (2, 0),
    (2, 1, 2),
    (2, 2, 2),
)

LAYOUTS = ("contiguous", "transposed", "strided", "offset", "expanded")


def dtype_name(dtype: torch.dtype) -> str:
    """`torch.float64` for torch.float64: how a dtype prints in a program."""
    return str(dtype)


def _number(value: complex, is_complex: bool) -> str:
    if is_complex:
        real, imag = value.real, value.imag
        return f"({real!r}{'+' if imag >= 0 else '-'}{abs(imag)!r}j)"
    return repr(float(value))


def _nested(values: list, is_complex: bool) -> str:
    if isinstance(values, list):
        return "[" + ", ".join(_nested(v, is_complex) for v in values) + "]"
    return _number(values, is_complex)


def literal(values: torch.Tensor) -> str:
    """`values` (contiguous, no conjugate bit) as a `torch.tensor(...)` expression."""
    dtype = dtype_name(values.dtype)
    if values.numel() == 0:
        return f"torch.zeros({tuple(values.shape)}, dtype={dtype})"
    body = _nested(values.tolist(), values.is_complex())
    return f"torch.tensor({body}, dtype={dtype})"


def index_literal(values: torch.Tensor) -> str:
    """A long index tensor (or a bool mask) as source."""
    if values.numel() == 0:
        return f"torch.zeros({tuple(values.shape)}, dtype={values.dtype})"
    return f"torch.tensor({values.tolist()!r})"


def bools_literal(draw, shape: tuple[int, ...]) -> str:
    """A literal bool mask of `shape` (drawn with `draw`)."""
    n = int(torch.Size(shape).numel())
    flat = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    return index_literal(torch.tensor(flat, dtype=torch.bool).reshape(shape))


def indices_literal(draw, shape: tuple[int, ...], high: int) -> str:
    """A literal long tensor of `shape` with values in [0, high)."""
    n = int(torch.Size(shape).numel())
    flat = draw(st.lists(st.integers(0, high - 1), min_size=n, max_size=n))
    return index_literal(torch.tensor(flat, dtype=torch.long).reshape(shape))


def distinct_indices_literal(draw, n: int, high: int) -> str:
    """n distinct positions in [0, high): writes through repeated positions
    (`x[idx] = v`) leave which write wins unspecified."""
    positions = draw(st.permutations(range(high)))[: min(n, high)]
    return index_literal(torch.tensor(positions, dtype=torch.long))


def scatter_index_literal(draw, shape: tuple[int, ...], dim: int) -> str:
    """An index of `shape` for scatter along `dim` hitting every position once:
    one permutation of that dimension, the same in every slice (repeated targets
    would leave which source wins unspecified)."""
    perm = torch.tensor(draw(st.permutations(range(shape[dim]))), dtype=torch.long)
    view = [1] * len(shape)
    view[dim] = shape[dim]
    return index_literal(perm.reshape(view).expand(shape).contiguous())


@dataclass(frozen=True)
class TensorCode:
    """A literal storage and the suffix that gives it its layout (`layout` and
    `expand_dim` say which, so a tangent can be given its primal's layout)."""

    storage: str
    suffix: str = ""
    layout: str = "contiguous"
    expand_dim: int | None = None
    conj: bool = False

    def __str__(self) -> str:
        return self.storage + self.suffix


def _storage_shape(shape: tuple[int, ...], layout: str, expand_dim: int) -> tuple:
    if layout == "transposed":
        return (shape[1], shape[0], *shape[2:])
    if layout == "strided":
        return (*shape[:-1], 2 * shape[-1])
    if layout == "offset":
        return (shape[0] + 1, *shape[1:])
    if layout == "expanded":
        return tuple(1 if d == expand_dim else n for d, n in enumerate(shape))
    return shape


def _suffix(shape: tuple[int, ...], layout: str) -> str:
    if layout == "transposed":
        return ".transpose(0, 1)"
    if layout == "strided":
        return "[..., ::2]"
    if layout == "offset":
        return "[1:]"
    if layout == "expanded":
        return f".expand({', '.join(map(str, shape))})"
    return ""


def layouts_for(shape: tuple[int, ...]) -> tuple[str, ...]:
    """The layouts a tensor of `shape` can have."""
    out = ["contiguous"]
    if len(shape) >= 2:
        out.append("transposed")
    if len(shape) >= 1:
        out += ["strided", "offset"]
    if any(n > 1 for n in shape):
        out.append("expanded")
    return tuple(out)


@st.composite
def values_of(draw, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """A contiguous tensor of multiples of 1/8 in [-2, 2]."""
    n = 1
    for size in shape:
        n *= size
    parts = 2 if dtype.is_complex else 1
    ints = draw(st.lists(st.integers(-16, 16), min_size=n * parts, max_size=n * parts))
    real = torch.tensor(ints, dtype=torch.float64) / 8
    if parts == 2:
        real = torch.complex(real[:n], real[n:])
    return real.reshape(shape).to(dtype)


@st.composite
def tensor_code(
    draw,
    shape: tuple[int, ...],
    dtype: torch.dtype,
    layout: str | None = None,
    expand_dim: int | None = None,
    conj: bool | None = None,
) -> TensorCode:
    """Source for a tensor of `shape` and `dtype` in some layout (drawn when None;
    an expanded layout expands `expand_dim`, drawn when None), complex ones with a
    conjugate bit or not (`conj`, drawn when None)."""
    if layout is None:
        layout = draw(st.sampled_from(layouts_for(shape)))
    if layout == "expanded" and expand_dim is None:
        expand_dim = draw(st.sampled_from([d for d, n in enumerate(shape) if n > 1]))
    storage = draw(values_of(_storage_shape(shape, layout, expand_dim), dtype))
    if conj is None:
        conj = dtype.is_complex and draw(st.booleans())
    conj = conj and dtype.is_complex
    if conj:
        storage = storage.conj().resolve_conj()
    suffix = _suffix(shape, layout) + (".conj()" if conj else "")
    return TensorCode(literal(storage), suffix, layout, expand_dim, conj)
