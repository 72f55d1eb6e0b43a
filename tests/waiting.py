"""Polling a condition until it holds or a deadline passes: the one way tests wait for something
another thread or process does.

A bare sleep is a guess (too short on a loaded machine, wasted time elsewhere); polling with a
deadline returns as soon as the condition holds and turns a hang into a failure. The condition is
always checked at least once, and once more when the deadline has passed.
:func:`wait_until` answers whether the condition held in time (the caller asserts with its own
message); :func:`wait_for` returns the condition's first truthy value or fails with "timed out
waiting for <what>".
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def _poll(condition: Callable[[], T], timeout: float, every: float) -> T:
    """The condition's first truthy value, or its last (falsy) one once ``timeout`` has passed."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        left = deadline - time.monotonic()
        if left <= 0:
            return value
        time.sleep(min(every, left))  # polling a condition, with a deadline


def wait_until(condition: Callable[[], object], timeout: float = 30.0, every: float = 0.05) -> bool:
    """Whether ``condition`` became true before ``timeout`` seconds (checked every ``every`` s)."""
    return bool(_poll(condition, timeout, every))


def wait_for(
    condition: Callable[[], T | None],
    what: str = "the condition",
    timeout: float = 30.0,
    every: float = 0.02,
) -> T:
    """``condition``'s first truthy value; AssertionError("timed out waiting for <what>") after
    ``timeout`` seconds (checked every ``every`` s). A condition typed ``X | None`` gives ``X``."""
    value = _poll(condition, timeout, every)
    if not value:
        raise AssertionError(f"timed out waiting for {what}")
    return value
