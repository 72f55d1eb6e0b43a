"""End-to-end fixtures: a fresh Wharf home (SQLite store + artifacts) per test."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from wharf.config.global_config import load_config
from wharf.sdk.workspace import Workspace


class FakeClock:
    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


class FakeSleep:
    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.calls: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)
        self.clock.advance(seconds)

    def wait(self, woken: threading.Event, seconds: float) -> None:
        """``RunServices.wait``: the whole delay on the fake clock, unless woken before it."""
        if not woken.is_set():
            self(seconds)


@pytest.fixture
def wharf_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    monkeypatch.setenv("WHARF_HOME", str(home))
    for var in ("WHARF_STORE_URL", "WHARF_ARTIFACT_ROOT", "WHARF_ACTIVE_STACK"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)
    return home


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def workspace(wharf_home: Path, clock: FakeClock) -> Iterator[Workspace]:
    ws = Workspace.open(load_config())
    ws.clock = clock
    ws.sleep = FakeSleep(clock)
    ws.wait = ws.sleep.wait
    yield ws
    ws.close()
