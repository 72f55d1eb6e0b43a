"""A fake clock for the engine's waits: reads return the same instant until a sleep moves it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta


class Clock:
    """``clock()`` is the current instant; ``clock.sleep(s)`` records ``s`` and moves it on."""

    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)
        self.sleeps: list[float] = []

    def __call__(self) -> datetime:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += timedelta(seconds=seconds)
