"""Ending a step whose launch raised unexpectedly once its step run was recorded.

Owns :func:`end_after_error`, used by the launcher (``wharf.execution.launcher``) when an
error that is neither the step's own (user errors end their attempt in
``wharf.execution.attempts``) nor a stop escapes between the creation of a step run and the
step's end: a bug, or a failing collaborator (backend selection, a backend, the progress
reporter). Invariant: such a step run is never left in flight; it ends failed with a one-line
reason (the error's type and message), unless it ended meanwhile (that end stands), and the
traceback is logged here, once.
"""

from __future__ import annotations

import logging

from wharf.core.enums import ExecutionStatus
from wharf.execution import step_writes
from wharf.execution.services import RunServices
from wharf.execution.step_outcome import StepOutcome
from wharf.store.models import StepRunRecord

logger = logging.getLogger(__name__)


def internal_error_reason(exc: BaseException) -> str:
    """``Internal error: <type>: <first line of its message>``."""
    lines = str(exc).strip().splitlines()
    return f"Internal error: {type(exc).__name__}" + (f": {lines[0]}" if lines else "")


def end_after_error(
    services: RunServices, name: str, record: StepRunRecord, exc: Exception
) -> StepOutcome:
    """End step run ``record`` of step ``name`` failed after ``exc`` escaped its launch; the
    step's outcome (the end recorded meanwhile, if it ended; failed if the store fails too)."""
    reason = internal_error_reason(exc)
    logger.error("Step '%s' could not be run: %s", name, reason, exc_info=exc)
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


__all__ = ["end_after_error", "internal_error_reason"]
