"""The torch internals dualgen relies on, each found by looking it up, never by
torch's version number.

`INTERNALS` (torch_internals.py) lists every private name, private module, signature detail and
monkeypatched class attribute the runtime uses, with the dualgen features that
need it. Each feature's entry point calls `require(feature)` (cached: one set
lookup after the first call), which raises `UnsupportedTorch`, naming torch's
version and what is missing, when the installed torch lacks one of them, rather
than letting the feature compute a wrong tangent or fail somewhere deep inside.
`check_import()` does the same, at `import dualgen`, for the internals the
eagerly imported modules look up as they import. `missing()` lists every absent
one (`dualgen --version` reports it).

Probes import nothing torch does not already import, except the private torch
modules a feature imports anyway (looked up lazily, on the feature's first use).
"""

from __future__ import annotations

import torch

from .torch_internals import INTERNALS, Internal


class UnsupportedTorch(RuntimeError):
    """The installed torch lacks an internal a dualgen feature needs."""


# What each feature is called in messages.
FEATURES = {
    "dual_level": "dualgen.forward_ad.dual_level",
    "custom_function": "dualgen's support of custom autograd.Functions",
    "gradcheck": "dualgen.gradcheck",
    "fx": "dualgen.fx",
    "func": "dualgen.func",
    "functional": "dualgen.functional",
    "collectives": "dualgen's forward AD through torch.distributed collectives",
    "dtensor": "dualgen's DTensor tangents",
    "nested": "dualgen's tangents of jagged nested tensors (torch.nested)",
    "taylor": "dualgen.jet and dualgen.operators (Taylor mode)",
}

# The features of the modules `import dualgen` imports (`check_import`).
EAGER = ("dual_level", "custom_function", "gradcheck")


# --------------------------------------------------------------------------------------
# lookups (cached: probes run once per process)

_FOUND: dict[str, bool] = {}
_REQUIRED: set[str] = set()  # features found complete


def present(internal: Internal) -> bool:
    found = _FOUND.get(internal.name)
    if found is None:
        try:
            found = bool(internal.probe())
        except (AttributeError, ImportError, RuntimeError, TypeError, ValueError):
            # a probe that fails finds nothing
            found = False
        _FOUND[internal.name] = found
    return found


def missing(feature: str | None = None) -> list[Internal]:
    """The internals the installed torch lacks (those `feature` needs)."""
    return [
        i
        for i in INTERNALS
        if (feature is None or feature in i.features) and not present(i)
    ]


def _message(what: str, absent: list[Internal]) -> str:
    names = ", ".join(i.name for i in absent)
    return (
        f"{what} needs {names}, which torch {torch.__version__} lacks "
        f"(dualgen finds torch's internals by feature; see docs/runtime.md, "
        f"'Torch internals')"
    )


def require(*features: str) -> None:
    """Raise UnsupportedTorch if the installed torch lacks an internal one of
    `features` needs (those with a fallback aside). Cheap after the first call."""
    for feature in features:
        if feature in _REQUIRED:
            continue
        if feature not in FEATURES:
            raise KeyError(f"unknown dualgen feature {feature!r}")
        absent = [i for i in missing(feature) if i.fallback is None]
        if absent:
            raise UnsupportedTorch(_message(FEATURES[feature], absent))
        _REQUIRED.add(feature)


def check_import() -> None:
    """At `import dualgen`: the internals its modules look up as they import."""
    absent = [
        i
        for i in INTERNALS
        if i.at_import
        and i.fallback is None
        and any(f in EAGER for f in i.features)
        and not present(i)
    ]
    if absent:
        raise UnsupportedTorch(_message("dualgen", absent))


def report_line() -> str:
    """`dualgen --version`'s line about them."""
    absent = missing()
    if not absent:
        return "torch internals: all found"
    return "torch internals missing: " + ", ".join(
        f"{i.name} ({', '.join(i.features)})" for i in absent
    )


def _forget() -> None:
    """Probe again from now on (tests)."""
    _FOUND.clear()
    _REQUIRED.clear()
