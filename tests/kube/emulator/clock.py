"""Time for the emulator: a ``Clock`` protocol, the wall clock, and a test-driven ``FakeClock``.

Every timestamp the emulator writes comes from its injected clock, so tests move time explicitly
(``FakeClock.advance_to``) instead of sleeping. Times are timezone-aware UTC; ``rfc3339`` renders
them at second precision, as a real API server does.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    """Source of the current time (timezone-aware, UTC)."""

    def now(self) -> datetime: ...


class SystemClock:
    """The wall clock."""

    def now(self) -> datetime:
        return datetime.now(UTC)


class FakeClock:
    """A clock that only moves when told to; never backwards."""

    def __init__(self, start: datetime) -> None:
        if start.tzinfo is None:
            raise ValueError("FakeClock needs a timezone-aware start time")
        self._now = start.astimezone(UTC)
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def advance_to(self, t: datetime) -> None:
        if t.tzinfo is None:
            raise ValueError("advance_to needs a timezone-aware time")
        with self._lock:
            if t < self._now:
                raise ValueError(f"FakeClock cannot go backwards: {t} < {self._now}")
            self._now = t.astimezone(UTC)


def rfc3339(t: datetime) -> str:
    """``2026-12-04T16:00:00Z``: UTC, second precision."""
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_rfc3339(s: str) -> datetime:
    """Inverse of ``rfc3339`` (also accepts fractional seconds and offsets)."""
    return datetime.fromisoformat(s.replace("Z", "+00:00")).astimezone(UTC)
