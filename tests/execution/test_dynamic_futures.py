"""The handles a dynamic pipeline's function gets back from its step calls."""

from __future__ import annotations

import threading
import time
import uuid
from concurrent.futures import Future
from datetime import UTC, datetime
from typing import Any

import pytest

from wharf.execution.dynamic_futures import (
    MapResultsFuture,
    OutputArtifact,
    StepFuture,
    StepOutputs,
    settle,
)
from wharf.execution.interrupt import InterruptibleRegion
from wharf.execution.run_stop import ForcedStop
from wharf.store.models import ArtifactVersionRecord


def version() -> ArtifactVersionRecord:
    return ArtifactVersionRecord(
        id=uuid.uuid4(),
        artifact_id=uuid.uuid4(),
        project_id=uuid.uuid4(),
        name="p::score::output",
        version=1,
        uri="/a/score",
        data_type="builtins:float",
        materializer="m",
        content_hash=None,
        producer_step_run_id=None,
        artifact_store_id=None,
        created=datetime(2026, 1, 1, tzinfo=UTC),
    )


def test_an_output_handle_cannot_decide_a_condition() -> None:
    output = OutputArtifact("score", "output", version(), lambda _: 0.0)
    with pytest.raises(TypeError, match=r"Output 'output' of step 'score' .*\.load\(\)"):
        bool(output)
    assert output.load() == 0.0  # the value, false here, is what a condition should read


def test_a_submitted_step_cannot_decide_a_condition() -> None:
    """``if score.submit(...):`` was always true, whatever the step returns."""
    done: Future[StepOutputs] = Future()
    done.set_result(OutputArtifact("score", "output", version(), lambda _: 0.0))
    submitted = StepFuture("score", done)
    with pytest.raises(TypeError, match=r"Step 'score' was submitted: .*\.load\(\)"):
        bool(submitted)
    assert submitted.load() == 0.0


@pytest.mark.parametrize("compare", [lambda h: h == 0.0, lambda h: h != 0.0, lambda h: h > 0.5])
def test_a_handle_compared_with_a_value_raises_naming_load(compare: Any) -> None:
    """``score(...) == 0.0`` was silently False (``!=`` True) whatever the step returned."""
    output = OutputArtifact("score", "output", version(), lambda _: 0.0)
    done: Future[StepOutputs] = Future()
    done.set_result(output)
    submitted = StepFuture("score", done)
    mapped = MapResultsFuture([submitted])
    with pytest.raises(TypeError, match=r"Output 'output' of step 'score' .*compare its \.load"):
        compare(output)
    with pytest.raises(TypeError, match=r"Step 'score' was submitted: .*compare its \.load"):
        compare(submitted)
    with pytest.raises(TypeError, match=r"step\.map\(\.\.\.\) \(steps score\.\.\.\) .*\.load"):
        compare(mapped)
    assert compare(output.load()) == compare(0.0)  # the value is what a comparison reads


def test_handles_still_equal_only_themselves_and_hash() -> None:
    first = OutputArtifact("score", "output", version(), lambda _: 0.0)
    second = OutputArtifact("score", "output", version(), lambda _: 0.0)
    assert first == first and first != second
    assert len({first, second, first}) == 2
    assert first in [second, first]
    mapped = MapResultsFuture([])
    assert mapped == mapped and len(mapped) == 0


BOUND = 20.0
"""Seconds a thread below waits at most for what the test expects of it."""


@pytest.mark.parametrize("how", ["wait", "result", "load", "map"])
def test_a_wait_off_the_main_thread_raises_an_interrupt_sent_to_it_promptly(how: str) -> None:
    """A thread other than the main one, blocked in a wait for a step that never ends: an
    exception sent to it (a forced stop's, ``InterruptibleRegion``) is raised within a short
    wait. Before, the wait was one unbounded lock wait, which no exception sent to a thread
    that no signal wakes interrupts: it was raised once the step returned, i.e. never here."""
    never: Future[StepOutputs] = Future()
    handle = StepFuture("stuck", never)
    region = InterruptibleRegion(raises=ForcedStop)
    waits = {
        "wait": handle.wait,
        "result": handle.result,
        "load": handle.load,
        "map": MapResultsFuture([handle]).result,
    }
    entered, raised = threading.Event(), threading.Event()

    def orchestrate() -> None:
        try:
            with region:
                entered.set()
                waits[how]()
        except ForcedStop:
            raised.set()

    thread = threading.Thread(target=orchestrate, daemon=True)  # left blocked if it fails
    thread.start()
    assert entered.wait(BOUND)
    assert region.interrupt("forced")
    assert raised.wait(BOUND), f"{how}() was not interrupted"
    assert not never.done()


def test_a_wait_calls_between_after_each_short_wait_and_stops_when_it_raises() -> None:
    """The runner's check between the short waits: a forced stop that the function swallowed
    is raised again in its next wait for a step, which no longer blocks until the step ends."""
    never: Future[StepOutputs] = Future()
    checks: list[int] = []

    def between() -> None:
        checks.append(1)
        if len(checks) == 2:
            raise ForcedStop()

    with pytest.raises(ForcedStop):
        StepFuture("stuck", never, between=between).wait()
    assert len(checks) == 2


def test_a_timed_wait_still_ends_at_its_timeout() -> None:
    never: Future[StepOutputs] = Future()
    handle = StepFuture("stuck", never)
    started = time.monotonic()
    handle.wait(timeout=0.3)
    with pytest.raises(TimeoutError):
        handle.result(timeout=0.3)
    assert 0.6 <= time.monotonic() - started < BOUND
    cancelled: Future[StepOutputs] = Future()
    cancelled.cancel()
    StepFuture("cancelled", cancelled).wait()  # nothing to wait for
    assert settle(cancelled)
