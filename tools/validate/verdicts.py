"""What validate says of one check of one kernel."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Verdict:
    # "pass", "fail", "known" (a listed failure), "n/a", "device" (no kernel
    # runs it here)
    status: str
    detail: str = ""  # the failure, or why not applicable


class NotApplicable(str):
    """A check that cannot run on this case, and why."""
