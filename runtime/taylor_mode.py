"""`dualgen.jet`: Taylor mode on a function as it runs (`taylor.jet`); where its
code writes a series into a tensor it made plainly (`torch.empty` filled in place,
inside composites such as circular padding), the same function through its
functional graph (`fx.jet`), where no tensor is written in place."""

from __future__ import annotations

from .taylor import api
from .taylor.arithmetic import WritesIntoPlainTensor


def jet(fun, primals, series):
    """(fun(*primals), derivatives of fun along the curve, as `series` gives them):
    see dualgen.taylor.api.jet for the conventions."""
    try:
        return api.jet(fun, primals, series)
    except WritesIntoPlainTensor:
        from .fx.jet import jet as program_of  # loads torch.fx only where needed

        primals, series = tuple(primals), tuple(series)
        order = len(series[0]) if series else 0
        program = program_of(fun, primals, order)
        return program(*primals, [_materialised(s, x) for s, x in zip(series, primals)])


def _materialised(terms, like):
    import torch

    return [torch.zeros_like(like) if t is None else t for t in terms]


jet.__doc__ = api.jet.__doc__
