"""The cut-off of a cancelled step that does not stop: real threads and short graces, an exit
that records instead of ending the test's process. The cut-off of a real step process:
``tests/e2e/test_reclaim_cutoff.py`` (local) and
``tests/integrations/kubernetes/test_reclaim_cutoff.py`` (a step pod)."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.waiting import wait_until
from wharf.core.errors import InputError
from wharf.execution.stop_deadline import (
    BACKSTOP_SECONDS,
    DEFAULT_STOP_GRACE_SECONDS,
    EXIT_CODE,
    MAX_STOP_GRACE_SECONDS,
    STOP_GRACE_ENV,
    StopDeadline,
    stop_grace_from_env,
)

PATIENCE = 30.0  # seconds a condition may take on a loaded machine


class Ends:
    """What a deadline did: the reasons it recorded an end with, the exit codes it asked for."""

    def __init__(self) -> None:
        self.given_up: list[str] = []
        self.exits: list[int] = []
        self.lock = threading.Lock()

    def give_up(self, reason: str) -> None:
        with self.lock:
            self.given_up.append(reason)

    def exit(self, code: int) -> None:
        with self.lock:
            self.exits.append(code)

    def deadline(self, grace: float) -> StopDeadline:
        return StopDeadline(grace, self.give_up, exit_process=self.exit, backstop=False)


def test_a_step_that_ignores_the_cancel_is_recorded_ended_and_exits_after_its_grace() -> None:
    ends = Ends()
    deadline = ends.deadline(0.2)
    deadline.arm("step cancelling, run running")
    deadline.arm("again")  # a later beat: the grace is not restarted
    assert wait_until(lambda: bool(ends.exits), PATIENCE)
    assert ends.given_up == ["step cancelling, run running"]
    assert ends.exits == [EXIT_CODE]
    assert deadline.cut_off
    assert not deadline.settle()  # the user code returned too late: its end is not recorded


def test_a_step_whose_code_returns_within_the_grace_ends_by_itself() -> None:
    ends = Ends()
    deadline = ends.deadline(3600)
    deadline.arm("step cancelling, run running")
    assert deadline.settle()
    assert not deadline.cut_off
    assert (ends.given_up, ends.exits) == ([], [])


def test_no_cut_off_without_a_cancel_nor_after_the_code_returned() -> None:
    ends = Ends()
    never_armed = ends.deadline(0.0)
    assert never_armed.settle()
    settled_first = ends.deadline(0.0)
    assert settled_first.settle()
    settled_first.arm("a cancel after the user code returned")  # it publishes its outputs
    assert not settled_first.cut_off
    assert (ends.given_up, ends.exits) == ([], [])


def test_the_end_is_recorded_once_even_if_recording_fails() -> None:
    exits: list[int] = []

    def failing(reason: str) -> None:
        raise ConnectionError("store unreachable")

    deadline = StopDeadline(0.0, failing, exit_process=exits.append, backstop=False)
    deadline.arm("step cancelling, run running")
    assert wait_until(
        lambda: exits == [EXIT_CODE], PATIENCE
    )  # exits anyway: the engine records it lost


def test_the_grace_comes_from_the_environment() -> None:
    assert stop_grace_from_env({}) == DEFAULT_STOP_GRACE_SECONDS == 30
    assert stop_grace_from_env({STOP_GRACE_ENV: "5"}) == 5
    assert stop_grace_from_env({STOP_GRACE_ENV: " "}) == DEFAULT_STOP_GRACE_SECONDS
    for bad in ("-1", "soon", "nan", "inf"):
        with pytest.raises(InputError, match=STOP_GRACE_ENV):
            stop_grace_from_env({STOP_GRACE_ENV: bad})


def test_a_grace_longer_than_the_waits_can_time_is_the_longest_they_can() -> None:
    """``pod_stop_grace_period`` takes any int64: 1e15 seconds overflowed the timed waits."""
    assert stop_grace_from_env({STOP_GRACE_ENV: "1000000000000000"}) == MAX_STOP_GRACE_SECONDS
    assert MAX_STOP_GRACE_SECONDS + BACKSTOP_SECONDS < threading.TIMEOUT_MAX
    exits: list[int] = []
    deadline = StopDeadline(1e15, lambda reason: None, exit_process=exits.append)
    deadline.arm("step cancelling, run running")  # the backstop too: it took 1e15 + 5
    assert deadline.settle() and exits == []


HOLDS_THE_GIL = """
import pathlib
import sys

from wharf.execution.stop_deadline import StopDeadline

recorded = pathlib.Path(sys.argv[1])
deadline = StopDeadline(2.0, lambda reason: recorded.write_text(reason))
deadline.arm("step cancelling, run running")
sum(range(10**13))  # native code that never lets another Python thread run
"""


def test_native_code_holding_the_gil_is_ended_by_the_backstop(tmp_path: Path) -> None:
    """A real process: its deadline's thread cannot run, so nothing is recorded (the engine
    records the attempt lost); the C-level backstop still ends the process, with its stacks."""
    recorded = tmp_path / "recorded"
    done = subprocess.run(
        [sys.executable, "-c", HOLDS_THE_GIL, str(recorded)],
        capture_output=True,
        text=True,
        timeout=60 + BACKSTOP_SECONDS,
        check=False,
    )
    assert done.returncode == EXIT_CODE, done.stderr
    assert "Timeout" in done.stderr and "<string>" in done.stderr  # where the code was stuck
    assert not recorded.exists()
