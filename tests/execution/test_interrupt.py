"""Interrupting a step's user code (:mod:`wharf.execution.interrupt`): delivered inside the region,
kept for a region not yet entered, ignored once it was left."""

from __future__ import annotations

import threading
import time

import pytest

from wharf.execution.interrupt import InterruptibleRegion, StepInterrupted

SAFETY_TIMEOUT = 30.0


def test_an_interrupt_reaches_the_code_inside_the_region() -> None:
    region = InterruptibleRegion()
    inside, outcome = threading.Event(), []

    def user_code() -> None:
        try:
            with region:
                inside.set()
                deadline = time.monotonic() + SAFETY_TIMEOUT
                while time.monotonic() < deadline:
                    time.sleep(0.001)
        except StepInterrupted:
            outcome.append("interrupted")

    thread = threading.Thread(target=user_code)
    thread.start()
    assert inside.wait(SAFETY_TIMEOUT)
    assert region.interrupt("stop") is True
    thread.join(SAFETY_TIMEOUT)
    assert outcome == ["interrupted"] and region.interrupted


def test_an_interrupt_before_the_region_is_entered_keeps_the_code_from_starting() -> None:
    region = InterruptibleRegion()
    assert region.interrupt("a sibling failed (fail-fast)") is True
    ran = []
    with pytest.raises(StepInterrupted, match="fail-fast"), region:
        ran.append(1)
    assert ran == []
    assert region.interrupt("again") is False  # sent once


def test_an_interrupt_after_the_region_was_left_does_nothing() -> None:
    region = InterruptibleRegion()
    with region:
        pass
    assert region.interrupt("too late") is False
    assert not region.interrupted
    with pytest.raises(StepInterrupted), region:  # a retry enters it again ...
        region.interrupt("stop the retry")  # ... and can be interrupted again
        deadline = time.monotonic() + SAFETY_TIMEOUT
        while time.monotonic() < deadline:  # (the asynchronous exception arrives at once)
            pass
    assert region.interrupted and region.reason == "stop the retry"
