"""Which dtype a tangent gets where tangent and primal dtypes differ.

Native forward AD evaluates a formula's every term, with zeros of the primals'
dtypes for absent tangents, so its tangents promote as the primals do; dualgen drops
those terms, and these helpers give the tangents the dtypes native's would have.
"""

from __future__ import annotations

import torch

from .layout import laid_out_like, same_layout
from .levels import with_lazy_bits
from .rules.rule import Rule
from .rules.table import rule_for
from .tangents import autograd_enabled, tensors_in


def tangents_have_primal_dtypes(primals, tangents, indices) -> bool:
    for i, tangent in zip(indices, tangents):
        pairs = (
            zip(primals[i], tangent)
            if isinstance(tangent, list)
            else [(primals[i], tangent)]
        )
        for p, t in pairs:
            if t is not None and isinstance(p, torch.Tensor) and t.dtype != p.dtype:
                return False
    return True


def _real_of_complex(primal, tangent) -> bool:
    return (
        isinstance(primal, torch.Tensor)
        and isinstance(tangent, torch.Tensor)
        and primal.is_complex()
        and not tangent.is_complex()
    )


def real_tangent_of_complex(inputs, tangents) -> bool:
    """True if a complex input (of the op's differentiable ones) has a real tangent."""
    return any(_real_of_complex(p, t) for p, t in zip(inputs, tangents))


def in_complex_primal_dtypes(inputs, tangents) -> list:
    """tangents, each real one of a complex input in that input's dtype: the
    complex tangent t + 0i it stands for."""
    return [
        t.to(p.dtype) if _real_of_complex(p, t) else t for p, t in zip(inputs, tangents)
    ]


def _as_meta(value):
    """A meta stand-in with value's dtype and layout (sizes, strides, storage
    offset and length), so a formula run on it lays its result out as on value."""
    if isinstance(value, torch.Tensor):
        try:
            length = value.untyped_storage().nbytes() // value.element_size()
        except RuntimeError:  # no storage (batched by vmap): its own geometry
            length = None
        if length is None:
            return torch.empty_strided(
                value.size(), value.stride(), dtype=value.dtype, device="meta"
            )
        storage = torch.empty(length, dtype=value.dtype, device="meta")
        meta = storage.as_strided(value.size(), value.stride(), value.storage_offset())
        return with_lazy_bits(meta, value)
    if isinstance(value, (list, tuple)):
        return type(value)(_as_meta(v) for v in value)
    return value


def _zero_filled(tangent, primal):
    """A meta stand-in for each absent tangent: a ZeroTensor of its primal's
    dtype, as native's zero tangents (`_efficientzerotensor`): its terms set the
    dtype by promotion but not the layout (`x * y` of a dual vector and a
    transposed matrix without tangent keeps the float64 of the vector's tangent,
    laid out as the product, whatever the order of the terms). Integer and bool
    tensors get theirs too, as in native (`x * mask` with a float32 tangent
    of a float64 x is float64, from `other_t * self_p`)."""
    if isinstance(tangent, list) or isinstance(primal, (list, tuple)):
        tangents = tangent or [None] * len(primal)
        return [_zero_filled(t, p) for t, p in zip(tangents, primal)]
    if tangent is None and isinstance(primal, torch.Tensor):
        # A ZeroTensor, as native's: a term of it is a ZeroTensor, and a sum with
        # one takes the other term's layout (in the promoted dtype).
        return torch._efficientzerotensor(
            primal.shape, dtype=primal.dtype, device="meta"
        )
    if tangent is None and type(primal) in (int, float, complex):
        # A number where the schema has a tensor: native wraps it, and its zero
        # tangent promotes as a number does (`x + 0.5` keeps x's tangent dtype,
        # `x * 0.5` gets x's dtype from `other_t * self_p`).
        return type(primal)(0)
    return _as_meta(tangent)


def in_native_dtypes(rule: Rule, primals, tangents, outputs, results):
    """Where a tangent has another dtype than its primal, the tangents in the
    dtypes native gives them. Native evaluates a formula's every term, with
    zeros of the primals' dtypes for absent tangents, where dualgen drops those
    terms (`x * 0.5` with a float32 tangent of a float64 x is float64, from
    `other_t * self_p`); and it keeps the formula's value in its dtype only when
    laid out as the output is, copying it into the output's dtype otherwise
    (`conform_layout`, which sees the kernel's value). With every term present
    the kernel's value is native's, dtype and layout: it stays as it is.
    Otherwise the formula run on meta tensors, every term present, tells; one
    meta cannot run keeps the dtypes the kernels gave."""
    if rule.element_wise_jvp:
        # Native's element-wise formula is a conjugate view for a complex
        # output (conj of the VJP of conj(x_t)), which it copies into the
        # output's dtype: a complex128 tangent of a complex64 primal gives
        # complex64, as a float64 one does through `(x * 1j).sin()`.
        results = tuple(_in_output_dtype(r, o) for r, o in zip(results, outputs))
    formula = _native_formula(rule)
    if formula is rule and not any(_absent(t) for t in tangents):
        return results
    try:
        filled = [
            _zero_filled(t, primals[i]) for i, t in zip(rule.input_indices, tangents)
        ]
        meta_outputs = _as_meta(outputs)
        meta = formula.call([_as_meta(p) for p in primals], filled, meta_outputs)
    except Exception:  # noqa: BLE001 - a formula meta tensors cannot run
        return results
    metas = meta if len(results) > 1 else (meta,)
    narrow = _zero_dim_terms_only(rule, primals, tangents)
    return tuple(
        _in_native_dtype(*values, narrow)
        for values in zip(results, metas, outputs, meta_outputs)
    )


def _zero_dim_terms_only(rule: Rule, primals, tangents) -> bool:
    """True if every tangent present is 0-d and an absent one is not: native's
    zero term of that tangent then sets the dtype (a tensor with dims outranks 0-d
    ones in promotion), as the meta run's does: `addcmul(x, s, s)` of a float32
    x without a tangent and a 0-d float64 s with a float32 tangent is float32."""
    present = [t for t in tensors_in(tangents)]
    absent = [
        primals[i]
        for i, t in zip(rule.input_indices, tangents)
        if t is None and isinstance(primals[i], torch.Tensor)
    ]
    return (
        bool(present)
        and all(t.dim() == 0 for t in present)
        and any(p.dim() > 0 for p in absent)
    )


def _in_output_dtype(value, output):
    """value in output's dtype and layout where output is complex (native's
    copy of a conjugate view into the output's memory)."""
    if not (
        isinstance(value, torch.Tensor)
        and isinstance(output, torch.Tensor)
        and output.is_complex()
        and value.dtype != output.dtype
    ):
        return value
    with autograd_enabled():
        if torch._C._has_storage(value) and not same_layout(value, output):
            return laid_out_like(output, output.dtype, zeros=False).copy_(value)
        return value.to(output.dtype)


def _absent(tangent) -> bool:
    if isinstance(tangent, list):
        return any(t is None for t in tangent)
    return tangent is None


def _native_formula(rule: Rule) -> Rule:
    """The rule whose formula native evaluates for rule.op: a view's copy
    (`expand_copy`, `transpose_copy`) has its view's formula, whose value is a
    view of the input's tangent, unless the view has no formula of its own (a
    composite: `narrow`, so `narrow_copy` has one)."""
    op = rule.op
    if torch.Tag.view_copy not in op.tags:
        return rule

    name = op._schema.name.split("::")[-1].removesuffix("_copy")
    view = getattr(getattr(torch.ops.aten, name, None), op._overloadname, None)
    if view is None or torch._C._dispatch_has_kernel_for_dispatch_key(
        view.name(), "CompositeImplicitAutograd"
    ):
        return rule
    view_rule = rule_for(view)
    return view_rule if view_rule is not None and view_rule.kind == "view" else rule


def _in_native_dtype(value, like, output, meta_output, narrow=False):
    """value (a kernel's tangent for `output`) in native's dtype, `like` being
    the formula's value on meta tensors with every term present (`meta_output`:
    output's stand-in there); like's dtype exactly where `narrow`
    (`_zero_dim_terms_only`)."""
    if isinstance(value, (list, tuple)) and isinstance(like, (list, tuple)):
        return type(value)(
            _in_native_dtype(*values, narrow)
            for values in zip(value, like, output, meta_output)
        )
    if not (
        isinstance(value, torch.Tensor)
        and isinstance(like, torch.Tensor)
        and isinstance(output, torch.Tensor)
    ):
        return value
    if not same_layout(like, meta_output):
        dtype = output.dtype  # native copies it into the output's memory
    elif narrow:
        dtype = like.dtype
    else:
        # The kernels' dtype is never narrowed: some meta kernels promote less
        # than the device's (threshold_backward: float32 for a float32 grad
        # and a float64 self, float64 on the CPU).
        dtype = torch.promote_types(value.dtype, like.dtype)
    relaid = (
        dtype != output.dtype
        and torch._C._has_storage(value)
        and not same_layout(value, output)
    )
    if value.dtype == dtype and not relaid:
        return value
    with autograd_enabled():
        if relaid:
            # (Also where the dtype is already native's: the kernel's value is
            # an operand's tangent laid out otherwise, where native's formula
            # computed a new tensor laid out as the output, which keeps this
            # dtype; attaching the operand's would copy it into the output's.)
            # Native's value has the output's layout and this dtype: so does
            # the copy (conform_layout would copy into the output's dtype).
            return laid_out_like(output, dtype, zeros=False).copy_(value)
        return value.to(dtype)


def in_dtype_of(tangent: torch.Tensor, primal: torch.Tensor) -> torch.Tensor:
    """The output tangent in its primal's dtype, when every input tangent has its
    primal's dtype. Native forward AD evaluates formulas with zeros of the
    primals' dtypes for absent tangents, so its tangents promote like the primals
    do; dualgen drops those terms (a float64 0-d tangent times float32 values
    would stay float32). Tangents made with another dtype on purpose keep it."""
    if tangent.dtype == primal.dtype or (
        tangent.is_complex() and not primal.is_complex()
    ):
        return tangent
    with autograd_enabled():
        return tangent.to(primal.dtype)


def promoted_for_self(new: torch.Tensor, self_value: torch.Tensor, tangents):
    """The tangent an in-place op gives a tensor that had none, in the dtype
    native's formula gives it: the promotion of a zero tangent of self's dtype
    with the operands' tangents (so a float32 tensor updated from a float64 dual
    gets a float64 tangent, and from a 0-d float64 dual a float32 one)."""
    dtype = self_value.dtype
    for t in tensors_in(tangents):
        if t.dtype != dtype:
            dtype = torch.result_type(
                torch.empty(self_value.shape, dtype=dtype, device="meta"),
                torch.empty(t.shape, dtype=t.dtype, device="meta"),
            )
    if not self_value.is_complex():
        # as writing complex values into real memory does
        new = new.real if new.is_complex() else new
        dtype = dtype.to_real() if dtype.is_complex else dtype
    if new.dtype == dtype or (new.is_complex() and not dtype.is_complex):
        return new
    with autograd_enabled():
        return new.to(dtype)


def in_gradient_dtype(g: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A gradient in its value's dtype, as autograd gives it: the real part for a
    real value, then that dtype."""
    if g.dtype == dtype:
        return g
    if g.is_complex() and not dtype.is_complex:
        g = g.real
    return g.to(dtype)
