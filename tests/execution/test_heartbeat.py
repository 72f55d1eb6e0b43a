"""The heartbeat worker, driven without real sleeps."""

from __future__ import annotations

import logging
import os
import signal
import uuid

import pytest

from tests.waiting import wait_until
from wharf.core.enums import ExecutionStatus as S
from wharf.core.errors import CredentialsRefusedError, PermissionDeniedError
from wharf.execution.heartbeat import (
    BEAT_NOW_SIGNAL,
    FINISH_ON_RUN_STOP_ENV,
    HeartbeatWorker,
    beat_on_signal,
    liveness_timeout_for,
    stops_with_run,
)
from wharf.store.answers import HeartbeatResponse

STEP = uuid.uuid4()


def response(status: S = S.RUNNING, run_status: S = S.RUNNING) -> HeartbeatResponse:
    return HeartbeatResponse(step_run_id=STEP, status=status, run_status=run_status)


class Script:
    """Answers heartbeats from a list: a response, or an exception to raise."""

    def __init__(self, answers):
        self.answers = list(answers)
        self.timeouts: list[float] = []

    def __call__(self, liveness_timeout: float) -> HeartbeatResponse:
        self.timeouts.append(liveness_timeout)
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer


def run_beats(worker: HeartbeatWorker, count: int) -> list[float]:
    """Run the worker's loop for ``count`` beats with a fake wait; return the waits that
    preceded them (the worker waits one interval before each beat)."""
    waits: list[float] = []

    def fake_wait(seconds: float) -> bool:
        waits.append(seconds)
        return len(waits) > count

    worker.wait = fake_wait  # type: ignore[method-assign]
    worker.run()
    return waits


def test_beats_every_interval_with_liveness_timeout():
    script = Script([response()])
    stops = []
    worker = HeartbeatWorker("s", script, stops.append, interval=2.0)
    waits = run_beats(worker, 3)
    assert waits[:3] == [2.0, 2.0, 2.0]
    assert script.timeouts == [liveness_timeout_for(2.0)] * 3
    assert worker.stats.beats == 3 and stops == []


def test_stop_signal_interrupts_once_and_keeps_beating():
    script = Script([response(), response(run_status=S.STOPPING), response(run_status=S.STOPPING)])
    stops = []
    worker = HeartbeatWorker("s", script, stops.append, interval=1.0)
    run_beats(worker, 4)
    assert len(stops) == 1 and stops[0].run_status is S.STOPPING
    assert worker.stats.beats == 4  # still beating while the step shuts down


def test_the_stop_is_told_in_a_line_that_begins_with_a_capital(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """It shows among the progress lines (``Step 'slow' stopped in ...``), worded alike."""
    script = Script([response(run_status=S.STOPPING)])
    worker = HeartbeatWorker("step 'slow'", script, lambda _: None, interval=1.0)
    with caplog.at_level(logging.INFO, logger="wharf.execution.heartbeat"):
        run_beats(worker, 1)
    (told,) = [r.getMessage() for r in caplog.records if "asked to stop" in r.getMessage()]
    assert told == "Step 'slow' was asked to stop (step running, run stopping); interrupting it."


def test_a_step_whose_end_is_recorded_is_not_told_asked_to_stop(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A beat while the ended step's log is stored read its own end (failed) as a stop, and
    said "Step 'b' was asked to stop (step failed, run running)" after its failure."""
    stops = []
    script = Script([response(status=S.FAILED)])
    worker = HeartbeatWorker("step 'b'", script, stops.append, interval=1.0)
    worker.attempt_ended = True
    with caplog.at_level(logging.INFO, logger="wharf.execution.heartbeat"):
        run_beats(worker, 2)
    assert not [r for r in caplog.records if "asked to stop" in r.getMessage()]
    assert len(stops) == 1  # still interrupted: a wait to store its log ends at a stop


def test_cancelling_step_is_a_stop_signal():
    for status in (S.CANCELLING, S.CANCELLED, S.STOPPING, S.STOPPED):
        stops = []
        worker = HeartbeatWorker("s", Script([response(status=status)]), stops.append, 1.0)
        run_beats(worker, 1)
        assert len(stops) == 1


def test_a_worker_that_lets_its_step_finish_ignores_the_runs_stop_but_not_the_steps():
    run_stops = [response(run_status=S.STOPPING), response(run_status=S.STOPPED)]
    cancel = response(status=S.CANCELLING, run_status=S.STOPPING)
    stops = []
    worker = HeartbeatWorker(
        "s", Script([*run_stops, cancel]), stops.append, interval=1.0, stops_with_run=False
    )
    run_beats(worker, 2)
    assert stops == [] and worker.stats.run_stop_seen
    run_beats(worker, 1)
    assert stops == [cancel]


def test_a_step_ended_failed_by_someone_else_stops_even_when_it_finishes_on_a_run_stop():
    """The lost-run sweep ends a run and its steps failed when the run's orchestrating process
    is gone: a step process still beating is then orphaned, and must stop on its own."""
    for stops_with in (True, False):
        failed = response(status=S.FAILED, run_status=S.FAILED)
        stops = []
        worker = HeartbeatWorker(
            "s", Script([response(), failed]), stops.append, 1.0, stops_with_run=stops_with
        )
        run_beats(worker, 2)
        assert stops == [failed]


def test_whether_a_step_process_stops_with_its_run_comes_from_its_environment():
    assert stops_with_run({})
    assert stops_with_run({FINISH_ON_RUN_STOP_ENV: "0"})
    assert not stops_with_run({FINISH_ON_RUN_STOP_ENV: "1"})


def test_transient_errors_are_retried_sooner_and_recover():
    script = Script([ConnectionError("down"), ConnectionError("down"), response(), response()])
    worker = HeartbeatWorker("s", script, lambda r: None, interval=8.0)
    waits = run_beats(worker, 4)
    assert waits == [8.0, 2.0, 4.0, 8.0, 8.0]
    assert worker.stats.failures == 2 and worker.stats.beats == 2


def test_backoff_is_capped_at_the_interval():
    worker = HeartbeatWorker("s", Script([OSError("x")]), lambda r: None, interval=8.0)
    waits = run_beats(worker, 6)
    assert waits == [8.0, 2.0, 4.0, 8.0, 8.0, 8.0, 8.0]


def test_an_outage_shorter_than_the_liveness_timeout_is_survived():
    """Beats keep coming at least once per interval, so a store that is back within
    the liveness timeout gets a beat before the step's deadline."""
    interval = 15.0
    worker = HeartbeatWorker("s", Script([OSError("x")]), lambda r: None, interval=interval)
    waits = run_beats(worker, 5)
    assert max(waits) <= interval < liveness_timeout_for(interval) - 2 * interval


def test_a_refused_credential_is_the_last_beat(caplog: pytest.LogCaptureFixture) -> None:
    """A revoked key stays revoked: the worker tells ``on_refused`` once (which interrupts the
    step), logs no warning, and beats no more, in its own loop as in a scheduler."""
    refusal = CredentialsRefusedError("The API key behind this token has been revoked.")
    script = Script([response(), refusal, response()])
    refusals: list[CredentialsRefusedError] = []
    worker = HeartbeatWorker("s", script, lambda r: None, 1.0, on_refused=refusals.append)
    with caplog.at_level(logging.WARNING):
        waits = run_beats(worker, 5)
    assert refusals == [refusal] and worker.stats.refused
    assert len(script.timeouts) == 2 and len(waits) == 2  # the loop ended with the refusal
    assert worker.beat_once() is None and len(script.timeouts) == 2
    assert caplog.records == []


def test_a_scheduler_drops_a_worker_refused_its_credential():
    from wharf.execution.heartbeat import HeartbeatScheduler

    refusals: list[CredentialsRefusedError] = []
    refusal = PermissionDeniedError("Members only.")
    script = Script([refusal])
    worker = HeartbeatWorker("s", script, lambda r: None, 0.01, on_refused=refusals.append)
    scheduler = HeartbeatScheduler()
    scheduler.add(worker)
    assert wait_until(lambda: refusals)
    scheduler.close()
    assert refusals == [refusal] and len(script.timeouts) == 1


def test_start_and_stop_thread():
    worker = HeartbeatWorker("s", Script([response()]), lambda r: None, interval=3600)
    worker.start()
    worker.stop()
    assert worker.stats.beats == 0  # stopped before its first interval passed


def test_beat_now_beats_before_the_interval_and_hears_a_stop():
    stops: list[HeartbeatResponse] = []
    answer = response(run_status=S.STOPPING)
    worker = HeartbeatWorker("s", Script([answer]), stops.append, interval=3600)
    worker.start()
    try:
        worker.beat_now()
        assert wait_until(lambda: stops, timeout=10)  # not in an hour
        assert stops == [answer] and worker.stats.beats == 1
    finally:
        worker.stop()


def test_the_beat_now_signal_makes_the_worker_beat_and_is_given_back():
    worker = HeartbeatWorker("s", Script([response()]), lambda r: None, interval=3600)
    give_back = beat_on_signal(worker)
    assert give_back is not None
    worker.start()
    try:
        os.kill(os.getpid(), BEAT_NOW_SIGNAL)  # as the orchestrator sends it
        assert wait_until(lambda: worker.stats.beats == 1, timeout=10)
    finally:
        worker.stop()
        give_back()
    assert signal.getsignal(BEAT_NOW_SIGNAL) is signal.SIG_DFL


def test_scheduler_drives_many_workers_from_one_thread():
    import threading
    import time

    from wharf.execution.heartbeat import HeartbeatScheduler

    scheduler = HeartbeatScheduler()
    kept = HeartbeatWorker("kept", Script([response()]), lambda r: None, interval=0.01)
    dropped = HeartbeatWorker("dropped", Script([response()]), lambda r: None, interval=0.01)
    before = threading.active_count()
    scheduler.add(kept)
    scheduler.add(dropped)
    scheduler.remove(dropped)
    deadline = time.monotonic() + 5
    while kept.stats.beats < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert threading.active_count() <= before + 1
    scheduler.close()
    assert kept.stats.beats >= 3 and dropped.stats.beats == 0


def test_a_step_due_sooner_wakes_the_scheduler_and_one_due_later_does_not():
    import time

    from wharf.execution.heartbeat import HeartbeatScheduler

    scheduler = HeartbeatScheduler()
    wakes = 0
    real_notify = scheduler._cond.notify

    def notify(n: int = 1) -> None:
        nonlocal wakes
        wakes += 1
        real_notify(n)

    scheduler._cond.notify = notify  # type: ignore[method-assign]
    slow = HeartbeatWorker("slow", Script([response()]), lambda r: None, interval=3600)
    scheduler.add(slow)  # the thread may not sleep yet: it looks at the schedule first
    deadline = time.monotonic() + 5
    while scheduler._sleeps_until != scheduler._due[slow] and time.monotonic() < deadline:
        time.sleep(0.001)
    before = wakes
    for i in range(20):  # a burst of steps due later: nobody wakes the thread
        scheduler.add(HeartbeatWorker(f"later{i}", Script([response()]), lambda r: None, 7200))
    assert wakes == before
    fast = HeartbeatWorker("fast", Script([response()]), lambda r: None, interval=0.01)
    scheduler.add(fast)  # due before the thread's next look: it is woken
    assert wakes == before + 1
    while fast.stats.beats < 1 and time.monotonic() < deadline:
        time.sleep(0.005)
    scheduler.close()
    assert fast.stats.beats >= 1 and slow.stats.beats == 0
