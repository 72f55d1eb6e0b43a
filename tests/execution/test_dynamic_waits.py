"""What a dynamic pipeline's submitted step waits for (``wharf.execution.dynamic_waits``): the
steps its ``after=`` names and those whose outputs it takes as inputs. ``step.submit`` (and
``step.map``) returns its future at once, the step starts once they ended, inline and
isolated. Before, the submit itself waited for them in the function's thread, so a function
could not submit a step and its dependants, then gather them.

Real runs: ``gate`` writes its start and end to a log file and, before it ends, waits (up to
:data:`PATIENCE`) for the line the function writes once its submits returned: a submit that
waits for ``gate`` is always seen, in the log, to return after ``gate`` ended."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.execution.test_dynamic_after import (
    _lines,
    _write,
    process_workspace,
    resume,
    steps_of,
    workspace,
)
from wharf import pipeline, step
from wharf.config.spec import InputSpec
from wharf.core.enums import ExecutionStatus
from wharf.sdk.workspace import Workspace

__all__ = ["process_workspace", "workspace"]  # fixtures

PATIENCE = 1.5
"""Seconds ``gate`` waits for the function's line (an isolated step's process starts well
within it)."""
SUBMITTED = "submitted"


@step(enable_cache=False)
def gate(log: str) -> int:
    _write(log, "gate start")
    deadline = time.monotonic() + PATIENCE
    while time.monotonic() < deadline and SUBMITTED not in _lines(log):
        time.sleep(0.02)  # polls for the function's line, up to a deadline
    _write(log, "gate end")
    return 1


@step(enable_cache=False)
def later(log: str, x: int = 0) -> int:
    _write(log, "later start")
    return x + 1


def after_id(log: str, inline: bool) -> int:
    first, then = steps(inline)
    first.submit(log)
    submitted = then.submit(log, after="gate")
    _write(log, SUBMITTED)
    return int(submitted.load())


def after_future(log: str, inline: bool) -> int:
    first, then = steps(inline)
    submitted = then.submit(log, after=first.submit(log))
    _write(log, SUBMITTED)
    return int(submitted.load())


def input_future(log: str, inline: bool) -> int:
    first, then = steps(inline)
    submitted = then.submit(log, x=first.submit(log))
    _write(log, SUBMITTED)
    return int(submitted.load())


def map_of_a_map(log: str, inline: bool) -> int:
    first, then = steps(inline)
    mapped = then.map([log], x=first.map([log]))
    _write(log, SUBMITTED)
    return int(mapped.load()[0])


def steps(inline: bool) -> tuple[Any, Any]:
    if inline:
        return gate, later
    return gate.with_options(runtime="isolated"), later.with_options(runtime="isolated")


CASES = [
    (after_id, "gate", "later", 1),
    (after_future, "gate", "later", 1),
    (input_future, "gate", "later", 2),
    (map_of_a_map, "gate_0", "later_0", 2),
]
IDS = ["after-id", "after-future", "input-future", "map-of-a-map"]


def assert_submitted_at_once(
    ws: Workspace,
    log: str,
    body: Callable[[str, bool], int],
    names: tuple[str, str, int],
    inline: bool,
) -> None:
    first, then, value = names
    got: dict[str, int] = {}

    @pipeline(dynamic=True, raise_on_failure=False)
    def p() -> None:
        got["value"] = body(log, inline)

    run = p.run_in(ws)
    assert run.status is ExecutionStatus.COMPLETED, run.status_reason
    assert got == {"value": value}
    lines = _lines(log)
    assert lines.index(SUBMITTED) < lines.index("gate end") < lines.index("later start"), lines
    found = steps_of(ws, run.id)
    spec = found[then].spec
    assert spec is not None and spec.upstream == (first,)
    if value == 2:  # its input names the output it took
        assert spec.inputs == {"x": InputSpec(step=first, output="output")}
        assert found[then].inputs["x"] == found[first].outputs["output"]
    start, end = found[then].start_time, found[first].end_time
    assert start is not None and end is not None and start >= end
    if not inline:
        assert found[first].pid is not None and found[then].pid is not None


@pytest.mark.parametrize(("body", "first", "then", "value"), CASES, ids=IDS)
def test_a_submit_returns_at_once_and_its_step_starts_once_what_it_waits_for_ended(
    workspace: Workspace,
    tmp_path: Path,
    body: Callable[[str, bool], int],
    first: str,
    then: str,
    value: int,
) -> None:
    log = str(tmp_path / "order.log")
    assert_submitted_at_once(workspace, log, body, (first, then, value), inline=True)


@pytest.mark.parametrize(("body", "first", "then", "value"), CASES[1:3], ids=IDS[1:3])
def test_an_isolated_submit_returns_at_once_too(
    process_workspace: Workspace,
    tmp_path: Path,
    body: Callable[[str, bool], int],
    first: str,
    then: str,
    value: int,
) -> None:
    log = str(tmp_path / "order.log")
    assert_submitted_at_once(process_workspace, log, body, (first, then, value), inline=False)


def test_a_resumed_run_replays_a_submit_taking_a_running_steps_output_as_the_same_call(
    workspace: Workspace, tmp_path: Path
) -> None:
    """Its input's version is known once the step ran, after the call: it is compared with the
    earlier process's when the step is launched (the same: both steps are gone on from)."""
    log = str(tmp_path / "order.log")

    @pipeline(dynamic=True, name="replayed")
    def p() -> None:
        input_future(log, inline=True)

    done = steps_of(workspace, p.run_in(workspace).id)
    Path(log).unlink()
    run = resume(workspace, p, done["gate"], done["later"])
    assert run.status is ExecutionStatus.COMPLETED, run.status_reason
    found = steps_of(workspace, run.id)
    assert {found[n].status for n in ("gate", "later")} == {ExecutionStatus.CACHED}
    assert found["later"].inputs == done["later"].inputs
    assert _lines(log) == [SUBMITTED]
