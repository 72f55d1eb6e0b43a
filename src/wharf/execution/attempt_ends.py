"""Recording how an attempt of a step ended: :func:`finish_attempt`, with the words of an
error (:func:`describe_exception`) and whether a failed attempt is retried
(:func:`attempts_left`).

Invariant: an attempt ends in exactly one of completed (outputs linked, in the same store call
as its status), retrying (it failed or was reclaimed, and the step has attempts left while its
run is not stopping), failed, stopped or cancelled; :func:`finish_attempt` is the single place
that decides and records this. A write repeated through an outage after its answer was lost is
refused (the step has ended), and what was recorded is read and stands.
"""

from __future__ import annotations

from collections.abc import Mapping

from wharf.config.spec import StepSpec
from wharf.core.enums import ExecutionStatus
from wharf.core.errors import IllegalTransitionError, WharfError
from wharf.execution import step_writes
from wharf.execution.caching import expiry_for
from wharf.execution.interrupt import StepInterrupted
from wharf.execution.services import RunServices
from wharf.store.models import (
    ArtifactVersionCreate,
    ArtifactVersionRecord,
    StepRunRecord,
    StepRunUpdate,
)

FORCE_STOPPED_STEP = "Force-stopped on request."
"""How a step a forced stop ended reads, whoever records it (``RunStopper.force``, or the
waiter of an isolated attempt the force killed). A forced stop ends its steps at once, with no
grace to run out, so the reason says only that."""


REASON_CHARACTERS = 10_000
"""The most of an error's message a status reason keeps (the store takes at most
``MAX_TEXT_LENGTH`` characters; callers may add their own words before it)."""


def describe_exception(exc: BaseException) -> str:
    """The words of ``exc`` as a step's status reason: storable on every database (a NUL
    character, which the store refuses, is written ``\\x00``, and a lone surrogate, which no
    UTF-8 text holds, ``\\udcff``; a message longer than :data:`REASON_CHARACTERS` is cut,
    saying how much was left out). An exception whose ``str()`` fails reads as Python's
    traceback shows it."""
    try:
        text = str(exc)
    except Exception:
        text = "<exception str() failed>"
    text = text.replace("\x00", "\\x00").encode("utf-8", "backslashreplace").decode()
    if len(text) > REASON_CHARACTERS:
        left_out = len(text) - REASON_CHARACTERS
        text = f"{text[:REASON_CHARACTERS]}... ({left_out} more characters)"
    if isinstance(exc, WharfError):
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def attempts_left(spec: StepSpec, attempt: int) -> bool:
    retry = spec.config.retry
    return retry is not None and attempt < 1 + retry.max_retries


def finish_attempt(
    services: RunServices,
    spec: StepSpec,
    record: StepRunRecord,
    outputs: Mapping[str, ArtifactVersionCreate] | None,
    error: BaseException | None,
    stop_reason: str | None = None,
) -> tuple[StepRunRecord, dict[str, ArtifactVersionRecord]]:
    """Record the end of an attempt: its saved ``outputs`` on success, else ``error``. Returns
    the step run as recorded and, if it completed, its output versions.

    The end is one of completed, retrying (it failed and the step has attempts left), failed,
    stopped (it or its run was asked to stop) or cancelled (interrupted after a cancel, e.g. a
    resource reclaim)."""
    store = services.store
    if error is None:
        # ``expires_after`` counts from the result's making, not from the step's start.
        expires = expiry_for(services, spec)
        completed = StepRunUpdate(status=ExecutionStatus.COMPLETED, cache_expires_at=expires)
        try:
            final, versions = step_writes.through_outage(
                services,
                lambda: step_writes.finish(services, record.id, completed, outputs or {}),
                f"record the result of step {record.name}",
            )
        except IllegalTransitionError:
            # Someone else finished it first (e.g. the lost-heartbeat sweep); theirs stands.
            return store.steps.get(record.id), {}
        services.versions.remember(versions.values())
        return final, versions
    if isinstance(error, StepInterrupted):
        current = step_writes.through_outage(
            services, lambda: store.steps.get(record.id), f"read step {record.name}"
        )
        cancelled = current.status in (ExecutionStatus.CANCELLING, ExecutionStatus.CANCELLED)
        reason = (current.status_reason if cancelled else None) or stop_reason
        if (
            cancelled
            and attempts_left(spec, record.attempt)
            and not _run_stopping(services, record)
        ):
            # a reclaim, not a stop: the next attempt asks for resources afresh
            status = ExecutionStatus.RETRYING
        else:
            status = ExecutionStatus.CANCELLED if cancelled else ExecutionStatus.STOPPED
        update = StepRunUpdate(status=status, status_reason=reason or "Stopped on request.")
    else:
        reason = describe_exception(error)
        retry = attempts_left(spec, record.attempt) and not _run_stopping(services, record)
        update = StepRunUpdate(
            status=ExecutionStatus.RETRYING if retry else ExecutionStatus.FAILED,
            status_reason=reason,
        )
    try:
        ended = step_writes.through_outage(
            services,
            lambda: step_writes.update(services, record.id, update),
            f"record the end of step {record.name}",
        )
        return ended, {}
    except IllegalTransitionError:
        return store.steps.get(record.id), {}


def _run_stopping(services: RunServices, record: StepRunRecord) -> bool:
    status = step_writes.through_outage(
        services,
        lambda: services.store.runs.get_status(record.run_id),
        f"read the status of run {record.run_id}",
    )
    return status in (ExecutionStatus.STOPPING, ExecutionStatus.STOPPED)
