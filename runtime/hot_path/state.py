"""The C++ hot path's state, as the mode reads it on every op: the extension's
`dispatch`, `make_dual` and `unpack_dual` while the C++ backend is in use (None
otherwise), and `SLOW`, what they answer when they decline an op (the Python
path then runs it). `policy.py` sets them. A leaf: it imports nothing of
dualgen's, so the rule table can call `forget()` without importing the policy.
"""

from __future__ import annotations

SLOW = object()  # the hot path declined: the Python path runs the op

dispatch = None
make_dual = None
unpack_dual = None
extension = None  # the extension bound to the runtime's state, once bound


def forget() -> None:
    """Drop what the hot path knows of each op (a rule changed)."""
    if extension is not None:
        extension.forget_ops()
