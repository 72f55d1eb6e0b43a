"""Ending a step whose launch raised unexpectedly, and the reason such an error gives.

Owns :func:`end_after_error`, used by the launcher (``wharf.execution.launcher``) when an
error that is neither the step's own (user errors end their attempt in
``wharf.execution.attempts``) nor a stop escapes between the creation of a step run and the
step's end: a bug, or a failing collaborator (backend selection, a backend, the progress
reporter). Invariant: such a step run is never left in flight; it ends failed with a one-line
reason (:func:`launch_error_reason`: the error's type and message, or the message of a
refused input or of a service that stayed unreachable), unless it ended meanwhile (that end
stands), and the error is logged here, once (with its traceback unless it was expected).
The DAG runner gives a step whose launch raised before its step run was recorded the same
reason and log line.
"""

from __future__ import annotations

import logging

from wharf.core.enums import ExecutionStatus
from wharf.core.errors import InputError
from wharf.execution import step_writes
from wharf.execution.outages import transient
from wharf.execution.services import RunServices
from wharf.execution.step_outcome import StepOutcome
from wharf.store.models import StepRunRecord

logger = logging.getLogger(__name__)


def _expected(exc: BaseException) -> bool:
    """A refusal of the step's own input (an :class:`InputError`, such as resources the
    Resource Manager cannot be asked for), or a service that stayed unreachable through the
    retries (:func:`~wharf.execution.outages.transient`: the store or the Resource Manager
    down): its message says it all; nothing of Wharf's own is wrong."""
    return isinstance(exc, InputError) or transient(exc)


def launch_error_reason(exc: BaseException) -> str:
    """An expected error's first line (:func:`_expected`); anything else: ``Internal error:
    <type>: <first line of its message>``."""
    lines = str(exc).strip().splitlines()
    if _expected(exc) and lines:
        return lines[0]
    return f"Internal error: {type(exc).__name__}" + (f": {lines[0]}" if lines else "")


def log_launch_error(name: str, reason: str, exc: BaseException) -> None:
    """Log why step ``name`` could not be run: with the traceback unless the error was
    expected (:func:`_expected`: its one line says it all)."""
    traceback = None if _expected(exc) else exc
    logger.error("Step '%s' could not be run: %s", name, reason, exc_info=traceback)


def end_after_error(
    services: RunServices, name: str, record: StepRunRecord, exc: Exception
) -> StepOutcome:
    """End step run ``record`` of step ``name`` failed after ``exc`` escaped its launch; the
    step's outcome (the end recorded meanwhile, if it ended; failed if the store fails too)."""
    reason = launch_error_reason(exc)
    log_launch_error(name, reason, exc)
    try:
        final = step_writes.end(services, record.id, ExecutionStatus.FAILED, reason)
        outputs = {}
        if final.status.is_successful:
            outputs = services.versions.outputs_of(services.store, final)
    except Exception as failure:  # the run's end settles what is left
        logger.warning("Could not end step run %s: %s", record.id, failure)
        return StepOutcome(name, ExecutionStatus.FAILED, step_run=record, reason=reason)
    if not final.status.is_finished:
        return StepOutcome(name, ExecutionStatus.FAILED, step_run=final, reason=reason)
    return StepOutcome(name, final.status, outputs, final, reason=final.status_reason)


__all__ = ["end_after_error", "launch_error_reason", "log_launch_error"]
