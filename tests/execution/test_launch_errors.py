"""``launch_errors``: the reason and log line of a step whose launch raised. A service that
stayed unreachable through the retries (the Resource Manager down while the step's request is
made) is said in its own words, without a traceback; it read "Internal error:
StoreUnavailableError: ..." with 23 frames of Wharf's stack (the QA pass)."""

from __future__ import annotations

import logging

import pytest

from wharf.core.errors import InputError, StoreUnavailableError
from wharf.execution.launch_errors import launch_error_reason, log_launch_error

DOWN = "The Resource Manager at http://127.0.0.1:1 is unreachable: ConnectError: refused"


@pytest.mark.parametrize(
    ("error", "reason", "traceback"),
    [
        (StoreUnavailableError(DOWN), DOWN, False),
        (InputError("No pool offers 'tpu'.\nmore"), "No pool offers 'tpu'.", False),
        (ValueError("bug\nmore"), "Internal error: ValueError: bug", True),
    ],
)
def test_the_reason_and_the_log_line(
    error: Exception, reason: str, traceback: bool, caplog: pytest.LogCaptureFixture
) -> None:
    assert launch_error_reason(error) == reason
    with caplog.at_level(logging.ERROR, logger="wharf.execution.launch_errors"):
        log_launch_error("train", reason, error)
    (record,) = caplog.records
    assert record.getMessage() == f"Step 'train' could not be run: {reason}"
    assert (record.exc_info is not None) is traceback
