"""A dynamic step given another step's future as an input (``wharf.execution.dynamic_waits``),
called, inline and isolated: a future of a step that failed starts no step and names that step
(the run's reason, as in a static pipeline).

Before, a plain call given a failed step's future raised that step's own error (the run's
reason, in place of ``Step(s) failed: …``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.execution.test_dynamic_after import (
    TAKES_ITS_OUTPUT,
    assert_not_started,
    process_workspace,
    steps_for,
    workspace,
)
from wharf.sdk.workspace import Workspace

__all__ = ["process_workspace", "workspace"]  # fixtures


def called_with_its_output(log: str, isolated: bool = False) -> None:
    failing, _, then = steps_for(isolated)
    then(log, failing.submit(log))


@pytest.mark.parametrize("mode", ["stop_on_failure", "continue_on_failure"])
def test_a_call_taking_a_failed_steps_output_does_not_start_and_names_it(
    workspace: Workspace, tmp_path: Path, mode: str
) -> None:
    log = str(tmp_path / "order.log")
    body = lambda: called_with_its_output(log)  # noqa: E731
    assert_not_started(workspace, log, body, mode, TAKES_ITS_OUTPUT, "breaks")


def test_an_isolated_call_taking_a_failed_steps_output_does_not_start(
    process_workspace: Workspace, tmp_path: Path
) -> None:
    log = str(tmp_path / "order.log")
    body = lambda: called_with_its_output(log, isolated=True)  # noqa: E731
    assert_not_started(
        process_workspace, log, body, "continue_on_failure", TAKES_ITS_OUTPUT, "breaks"
    )
