"""The function each validate check differentiates, made from one case: the
op's differentiable inputs (tensors, list items and nested tensors' components
one by one) in, its differentiable outputs (nested ones padded with zeros;
eigen- and singular vectors through gauge-invariant quantities) out."""

from __future__ import annotations

from collections.abc import Callable

import torch

from .inputs import Case

_RANDOM_SEED = 20261124


def checked_function(op, info, case: Case) -> tuple[Callable, tuple] | None:
    """A function of the differentiable inputs (tensors, list items one by one)
    returning the differentiable outputs, and those inputs; None if there are
    none."""
    slots = []  # (argument name, index in list or None)
    inputs = []
    # Nested tensors (strided) go in as their components and come out padded
    # with zeros: gradcheck takes plain tensors.
    nested = {
        name
        for name, v in case.values.items()
        if isinstance(v, torch.Tensor) and v.is_nested
    }
    for name in info.differentiable_inputs:
        value = case.values[name]
        if name in nested:
            for i, v in enumerate(value.unbind()):
                slots.append((name, i))
                inputs.append(v.detach().clone().requires_grad_())
        elif isinstance(value, torch.Tensor) and _floating(value):
            slots.append((name, None))
            inputs.append(value.detach().clone().requires_grad_())
        elif isinstance(value, list):
            for i, v in enumerate(value):
                if isinstance(v, torch.Tensor) and _floating(v):
                    slots.append((name, i))
                    inputs.append(v.detach().clone().requires_grad_())
    wanted = [i for i, n in enumerate(info.outputs) if n in info.differentiable_outputs]
    if not inputs or not wanted:
        return None
    schema = op._schema
    seeded = torch.Tag.nondeterministic_seeded in op.tags

    def call(*tensors):
        values = {
            k: (list(v) if isinstance(v, list) else v) for k, v in case.values.items()
        }
        for name in nested:
            values[name] = list(values[name].unbind())
        for (name, index), t in zip(slots, tensors):
            if name in case.symmetric:
                t = (t + t.mH) * 0.5
            if index is None:
                values[name] = t
            else:
                values[name][index] = t
        for name in nested:
            values[name] = torch.nested.as_nested_tensor(values[name])
        case.with_statistics(values)
        if info.kind == "inplace":
            values["self"] = values["self"].clone()
        args, kwargs = [], {}
        for a in schema.arguments:
            if a.kwarg_only:
                kwargs[a.name] = values[a.name]
            else:
                args.append(values[a.name])
        if seeded:
            # A random op draws anew on every call: seed each call alike, so finite
            # differences see one function (piecewise constant, for bernoulli).
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(_RANDOM_SEED)
                out = op(*args, **kwargs)
        else:
            out = op(*args, **kwargs)
        outputs = tuple(out) if len(schema.returns) > 1 else (out,)
        if nested or any(isinstance(o, torch.Tensor) and o.is_nested for o in outputs):
            call.nested = True
            outputs = tuple(
                (
                    torch.nested.to_padded_tensor(o, 0.0)
                    if isinstance(o, torch.Tensor) and o.is_nested
                    else o
                )
                for o in outputs
            )
        invariants = GAUGE_INVARIANTS.get(info.name)
        if invariants is not None:
            return invariants(outputs)
        return tuple(outputs[i] for i in wanted)

    call.__name__ = info.name
    call.nested = False  # (set once a call sees a nested tensor)
    return call, tuple(inputs)


def _column_outer(X: torch.Tensor, Y: torch.Tensor) -> torch.Tensor:
    """[..., a, b, i] = X[..., a, i] * conj(Y[..., b, i]): per column i, the rank-one
    matrix x_i y_i^H, unchanged when x_i and y_i take the same phase (sign)."""
    return X.unsqueeze(-2) * Y.conj().unsqueeze(-3)


def _svd_invariants(outputs: tuple) -> tuple:
    """S and u_i v_i^H per singular triple (full_matrices' extra, arbitrary,
    columns of U and rows of Vh left out); S alone without compute_uv."""
    U, S, Vh = outputs
    if U.numel() == 0:
        return (S,)
    k = S.shape[-1]
    return S, _column_outer(U[..., :k], Vh[..., :k, :].mH)


def _eig_invariants(outputs: tuple) -> tuple:
    """The eigenvalues and v_i v_i^H per (unit-norm) eigenvector (linalg_eig,
    _linalg_eigh); the eigenvalues alone without eigenvectors."""
    values, vectors = outputs
    if vectors.numel() == 0:
        return (values,)
    return values, _column_outer(vectors, vectors)


# Singular vectors and eigenvectors are defined only up to a phase (a sign when
# real) per column: finite differences follow LAPACK's choice, the kernels native
# forward AD's, and the two differ by a gauge term. As PyTorch's OpInfos do for
# gradcheck, validation checks these kernels through gauge-invariant functions of
# their outputs (kernel name -> outputs -> the tensors checked instead).
GAUGE_INVARIANTS: dict[str, Callable[[tuple], tuple]] = {
    "_linalg_svd": _svd_invariants,
    "linalg_eig": _eig_invariants,
    "_linalg_eigh": _eig_invariants,
}


def _floating(t: torch.Tensor) -> bool:
    return t.is_floating_point() or t.is_complex()
