"""The message of :class:`~wharf.sdk.run_failure.RunFailedError` when many steps failed, or
with long reasons: it stays readable and says what it left out (before, it listed up to 1,000
steps, each reason whole, and silently dropped the rest)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from wharf import RunFailedError, pipeline, step
from wharf.config.global_config import load_config
from wharf.sdk.run_failure import LISTED_STEPS, REASON_CHARACTERS
from wharf.sdk.workspace import Workspace


@pytest.fixture
def workspace(tmp_path: Path) -> Iterator[Workspace]:
    ws = Workspace.open(load_config({}, home=tmp_path / "home"))
    yield ws
    ws.close()


@step(enable_cache=False)
def fails(x: int) -> int:
    raise ValueError(f"bad {x}")


@step(enable_cache=False)
def fails_at_length() -> int:
    raise ValueError("x" * 5000)


def test_many_failed_steps_are_listed_up_to_a_bound_saying_how_many_are_left_out(
    workspace: Workspace,
) -> None:
    count = LISTED_STEPS + 5

    @pipeline(dynamic=True, execution_mode="continue_on_failure")
    def sweep() -> None:
        fails.map(list(range(count))).wait()

    with pytest.raises(RunFailedError) as failed:
        sweep.run_in(workspace)
    error = failed.value
    lines = str(error).splitlines()
    listed = [line for line in lines if line.startswith("  step '")]
    assert len(listed) == LISTED_STEPS
    assert listed[0] == "  step 'fails_0': ValueError: bad 0"
    assert "  ... and 5 more failed steps (25 in all)" in lines
    assert lines[-1] == (
        f"  (see `wharf runs show {error.run.id}`; each step's output and traceback: "
        f"`wharf runs logs {error.run.id}`)"
    )
    assert error.failed_steps == count and len(error.step_reasons) == count


def test_a_long_reason_is_cut_in_the_message_and_kept_whole_in_step_reasons(
    workspace: Workspace,
) -> None:
    @pipeline
    def p() -> None:
        fails_at_length()

    with pytest.raises(RunFailedError) as failed:
        p.run_in(workspace)
    error = failed.value
    (line,) = [line for line in str(error).splitlines() if line.startswith("  step '")]
    assert line.endswith(f"... ({5000 + len('ValueError: ') - REASON_CHARACTERS} more characters)")
    assert len(line) < REASON_CHARACTERS + 100
    assert error.step_reasons["fails_at_length"] == "ValueError: " + "x" * 5000
    assert len(str(error)) < 2 * REASON_CHARACTERS + 300


def test_a_count_beyond_the_reasons_read_is_said_too(workspace: Workspace) -> None:
    """The store hands at most one page (1,000) of failed steps: the rest are counted."""

    @pipeline(dynamic=True, raise_on_failure=False)
    def one() -> None:
        fails(1)

    run = one.run_in(workspace)
    error = RunFailedError(run, {f"s_{i}": "failed" for i in range(1000)}, failed_steps=1500)
    assert "  ... and 1480 more failed steps (1500 in all)" in str(error).splitlines()
    assert len(str(error)) < 5000


def test_a_run_failed_outside_any_step_points_at_runs_show_alone(workspace: Workspace) -> None:
    """Only a failed step has a traceback in `wharf runs logs` (an isolated step's is nowhere
    else); a body that raised is chained here, so the message sends only to `runs show`."""

    @pipeline(dynamic=True)
    def body_fails() -> None:
        raise ValueError("bad body")

    with pytest.raises(RunFailedError) as failed:
        body_fails.run_in(workspace)
    assert str(failed.value).splitlines()[-1] == f"  (see `wharf runs show {failed.value.run.id}`)"
