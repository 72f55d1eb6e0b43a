"""Steps shared by the end-to-end tests (importable, so runs can resolve them by source)."""

from __future__ import annotations

import threading
from typing import Annotated

from wharf import step

EVENTS: list[str] = []
RELEASE = threading.Event()
FLAKY_COUNTS: dict[str, int] = {}


@step(enable_cache=False)
def merge(a: int = 0, b: int = 0, c: int = 0, label: str = "", fail: bool = False) -> int:
    EVENTS.append(label)
    if fail:
        raise RuntimeError(f"boom in {label}")
    return a + b + c + 1


@step(enable_cache=False)
def wait_for_release(label: str = "") -> int:
    """Runs until released or interrupted; records its cleanup."""
    try:
        while not RELEASE.wait(0.005):
            pass
        return 1
    finally:
        EVENTS.append(f"cleanup:{label}")


@step(enable_cache=False)
def release_then_fail() -> None:
    RELEASE.set()
    raise RuntimeError("failing after releasing the slow step")


@step(enable_cache=False)
def flaky(key: str, failures: int) -> int:
    FLAKY_COUNTS[key] = FLAKY_COUNTS.get(key, 0) + 1
    if FLAKY_COUNTS[key] <= failures:
        raise ValueError(f"attempt {FLAKY_COUNTS[key]} failed")
    return FLAKY_COUNTS[key]


@step
def produce(value: int = 1) -> int:
    return value


@step
def double(x: int) -> int:
    return 2 * x


@step
def two_outputs(x: int) -> tuple[Annotated[int, "low"], Annotated[int, "high"]]:
    return x - 1, x + 1
