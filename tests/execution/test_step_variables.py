"""A step's ``environment=`` variables in the process environment: set while the step runs,
shared by steps that agree, waited for by a step that conflicts, restored after the last one."""

from __future__ import annotations

import logging
import os
import threading
import time
from contextlib import AbstractContextManager
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from wharf.execution.interrupt import InterruptibleRegion, StepInterrupted
from wharf.execution.step_variables import step_variables

DEADLINE = 10.0


def _poll(condition: Any) -> None:
    deadline = time.monotonic() + DEADLINE
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.01)


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("WV_A", "WV_B"):
        monkeypatch.delenv(name, raising=False)


def test_set_while_the_step_runs_then_restored(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WV_A", "before")
    with step_variables("s", {"WV_A": "1", "WV_B": "2"}, InterruptibleRegion()):
        assert (os.environ["WV_A"], os.environ["WV_B"]) == ("1", "2")
    assert os.environ["WV_A"] == "before"
    assert "WV_B" not in os.environ


def test_steps_that_agree_share_the_values_until_the_last_one_ends() -> None:
    with step_variables("first", {"WV_A": "1"}, InterruptibleRegion()):
        with step_variables("second", {"WV_A": "1", "WV_B": "2"}, InterruptibleRegion()):
            assert (os.environ["WV_A"], os.environ["WV_B"]) == ("1", "2")
        assert os.environ["WV_A"] == "1" and "WV_B" not in os.environ
    assert "WV_A" not in os.environ


def _start_waiter(
    variables: dict[str, str], region: InterruptibleRegion, seen: dict[str, Any]
) -> threading.Thread:
    def wait_then_run() -> None:
        try:
            with step_variables("waiter", variables, region):
                seen["value"] = os.environ.get("WV_A")
        except StepInterrupted as exc:
            seen["interrupted"] = str(exc)

    thread = threading.Thread(target=wait_then_run)
    thread.start()
    return thread


def test_a_conflicting_step_waits_for_the_running_one(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "wharf.execution.step_variables")
    seen: dict[str, Any] = {}
    with step_variables("holder", {"WV_A": "1"}, InterruptibleRegion()):
        thread = _start_waiter({"WV_A": "2"}, InterruptibleRegion(), seen)
        _poll(lambda: "Step 'waiter' waits" in caplog.text)
        assert "WV_A" in caplog.text
        assert os.environ["WV_A"] == "1" and not seen
    thread.join(DEADLINE)
    assert seen == {"value": "2"}
    assert "WV_A" not in os.environ


def test_a_waiting_step_asked_to_stop_ends_without_setting_anything(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "wharf.execution.step_variables")
    seen: dict[str, Any] = {}
    region = InterruptibleRegion()
    with step_variables("holder", {"WV_A": "1"}, InterruptibleRegion()):
        thread = _start_waiter({"WV_A": "2", "WV_B": "x"}, region, seen)
        _poll(lambda: "Step 'waiter' waits" in caplog.text)
        region.interrupt("Stopped on request.")
        thread.join(DEADLINE)
        assert seen == {"interrupted": "Stopped on request."}
        assert os.environ["WV_A"] == "1" and "WV_B" not in os.environ
    assert "WV_A" not in os.environ


NAMES = st.sampled_from(["WV_A", "WV_B"])
VALUES = st.sampled_from(["1", "2"])


class Leases(RuleBasedStateMachine):
    """Steps start (when they conflict with no running step) and end in any order: the process
    environment always shows the running steps' values, else the value from before."""

    def __init__(self) -> None:
        super().__init__()
        self.before = {"WV_A": "before"}
        os.environ["WV_A"] = "before"
        os.environ.pop("WV_B", None)
        self.running: list[tuple[dict[str, str], AbstractContextManager[None]]] = []

    def _value(self, name: str) -> str | None:
        for variables, _ in self.running:
            if name in variables:
                return variables[name]
        return self.before.get(name)

    @rule(variables=st.dictionaries(NAMES, VALUES, max_size=2))
    def start(self, variables: dict[str, str]) -> None:
        conflict = any(
            name in running and running[name] != value
            for running, _ in self.running
            for name, value in variables.items()
        )
        if conflict:
            return  # it would wait (tested above)
        scope = step_variables("step", variables, InterruptibleRegion())
        scope.__enter__()
        self.running.append((variables, scope))

    @precondition(lambda self: self.running)
    @rule(data=st.data())
    def end(self, data: st.DataObject) -> None:
        index = data.draw(st.integers(0, len(self.running) - 1))
        _, scope = self.running.pop(index)
        scope.__exit__(None, None, None)

    @invariant()
    def environment_shows_the_running_steps(self) -> None:
        for name in ("WV_A", "WV_B"):
            assert os.environ.get(name) == self._value(name)

    def teardown(self) -> None:
        while self.running:
            self.running.pop()[1].__exit__(None, None, None)
        assert os.environ.get("WV_A") == "before" and "WV_B" not in os.environ
        os.environ.pop("WV_A", None)


TestLeases = Leases.TestCase
TestLeases.settings = settings(max_examples=60, stateful_step_count=20, deadline=None)
