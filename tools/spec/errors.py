"""The one error type for mistakes in a spec, and a collector for reporting them all."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, order=True)
class Location:
    """A line in a spec file, 1-based, as editors count."""

    path: str
    line: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}"


class SpecError(Exception):
    """A user mistake in the spec. Our own bugs stay AssertionError."""

    def __init__(self, message: str, location: Location, entry: str | None = None):
        super().__init__(message)
        self.message = message
        self.location = location
        self.entry = entry

    def __str__(self) -> str:
        where = f"{self.entry}: " if self.entry else ""
        return f"{self.location}: error: {where}{self.message}"


@dataclass
class ErrorSink:
    """Collects every SpecError of a run so that all are reported, not just the first."""

    errors: list[SpecError] = field(default_factory=list)

    def add(self, error: SpecError) -> None:
        self.errors.append(error)

    def report(
        self, message: str, location: Location, entry: str | None = None
    ) -> None:
        self.errors.append(SpecError(message, location, entry))

    def __bool__(self) -> bool:
        return bool(self.errors)

    def sorted(self) -> list[SpecError]:
        return sorted(self.errors, key=lambda e: (e.location, str(e)))


class SpecErrors(Exception):
    """Raised at the end of a stage when the sink holds errors."""

    def __init__(self, errors: list[SpecError]):
        super().__init__(f"{len(errors)} error(s)")
        self.errors = errors


class SpecUnreadable(Exception):
    """The spec file itself could not be read."""
