"""Allowed status transitions of pipeline runs and step runs, as pure tables.

Every store update goes through :func:`check_run_transition` / :func:`check_step_transition`.
A status may always be "set" to itself (idempotent updates); finished statuses are final.
A step may be created directly in any of :data:`STEP_INITIAL_STATUSES`.
:func:`run_end` is how an engine's wish to end a run meets a concurrent stop.
"""

from __future__ import annotations

from collections.abc import Mapping

from wharf.core.enums import ExecutionStatus as S
from wharf.core.errors import IllegalTransitionError

_FINAL: frozenset[S] = frozenset()

RUN_TRANSITIONS: Mapping[S, frozenset[S]] = {
    S.INITIALIZING: frozenset(
        {S.PROVISIONING, S.QUEUED, S.RUNNING, S.COMPLETED, S.FAILED, S.STOPPING, S.STOPPED}
    ),
    S.PROVISIONING: frozenset({S.QUEUED, S.RUNNING, S.COMPLETED, S.FAILED, S.STOPPING, S.STOPPED}),
    S.QUEUED: frozenset({S.RUNNING, S.COMPLETED, S.FAILED, S.STOPPING, S.STOPPED}),
    S.RUNNING: frozenset({S.COMPLETED, S.FAILED, S.STOPPING, S.STOPPED}),
    S.STOPPING: frozenset({S.STOPPED, S.FAILED}),
    S.COMPLETED: _FINAL,
    S.FAILED: _FINAL,
    S.STOPPED: _FINAL,
    # Runs never take these step-only statuses; listed so the table is total.
    S.CACHED: _FINAL,
    S.SKIPPED: _FINAL,
    S.CANCELLED: _FINAL,
    S.RETRYING: _FINAL,
    S.CANCELLING: _FINAL,
}

RUN_INITIAL_STATUSES: frozenset[S] = frozenset(
    {S.INITIALIZING, S.PROVISIONING, S.QUEUED, S.RUNNING}
)

STEP_TRANSITIONS: Mapping[S, frozenset[S]] = {
    S.INITIALIZING: frozenset(
        {S.QUEUED, S.RUNNING, S.FAILED, S.STOPPING, S.STOPPED, S.CANCELLING, S.CANCELLED}
    ),
    S.PROVISIONING: frozenset(
        {S.QUEUED, S.RUNNING, S.FAILED, S.STOPPING, S.STOPPED, S.CANCELLING, S.CANCELLED}
    ),
    S.QUEUED: frozenset({S.RUNNING, S.FAILED, S.STOPPING, S.STOPPED, S.CANCELLING, S.CANCELLED}),
    S.RUNNING: frozenset(
        {S.COMPLETED, S.FAILED, S.RETRYING, S.STOPPING, S.STOPPED, S.CANCELLING, S.CANCELLED}
    ),
    # A step that was asked to stop or cancel may still finish its work before it notices.
    S.STOPPING: frozenset({S.STOPPED, S.COMPLETED, S.FAILED}),
    S.CANCELLING: frozenset({S.CANCELLED, S.RETRYING, S.COMPLETED, S.FAILED, S.STOPPED}),
    # A retrying attempt has ended: the next attempt is a new step run. A retry that never
    # starts (its run was stopped or lost during the delay) ends the attempt failed or stopped,
    # so a finished run never leaves a step retrying.
    S.RETRYING: frozenset({S.FAILED, S.STOPPED}),
    S.COMPLETED: _FINAL,
    S.FAILED: _FINAL,
    S.CACHED: _FINAL,
    S.SKIPPED: _FINAL,
    S.STOPPED: _FINAL,
    S.CANCELLED: _FINAL,
}

STEP_INITIAL_STATUSES: frozenset[S] = frozenset(
    {S.INITIALIZING, S.QUEUED, S.RUNNING, S.CACHED, S.SKIPPED, S.FAILED, S.STOPPED}
)


def _check(kind: str, table: Mapping[S, frozenset[S]], current: S, new: S) -> None:
    if current == new:
        return
    if new not in table[current]:
        raise IllegalTransitionError(
            f"Illegal {kind} status transition: {current.value} -> {new.value}."
        )


def check_run_transition(current: S, new: S) -> None:
    """Raise :class:`IllegalTransitionError` unless a run may go from ``current`` to ``new``."""
    _check("run", RUN_TRANSITIONS, current, new)


def check_step_transition(current: S, new: S) -> None:
    """Raise :class:`IllegalTransitionError` unless a step may go from ``current`` to ``new``."""
    _check("step", STEP_TRANSITIONS, current, new)


def check_run_initial(status: S) -> None:
    if status not in RUN_INITIAL_STATUSES:
        raise IllegalTransitionError(f"A run cannot be created with status {status.value}.")


def check_step_initial(status: S) -> None:
    if status not in STEP_INITIAL_STATUSES:
        raise IllegalTransitionError(f"A step run cannot be created with status {status.value}.")


ORCHESTRATOR_LOST = "orchestrator lost (last seen "
"""How the reason of a run the lost-run sweep ended begins (``orchestrator lost (last seen
<time>)``; its steps' reasons quote it): they ended when last seen alive, so their durations
are lower bounds (:func:`ended_unseen`)."""


def ended_unseen(reason: str | None) -> bool:
    """Whether a run or step with this ``status_reason`` was ended by the lost-run sweep: its
    process died unseen, some time after its recorded end."""
    return reason is not None and ORCHESTRATOR_LOST in reason


STOPPED_ON_REQUEST = "Stopped on request."
FORCE_STOPPED_ON_REQUEST = "Force-stopped on request."
"""The reason of a run whose stop was forced (``wharf runs stop --force``, a second Ctrl-C)."""


def run_end(
    current: S, wanted: S, reason: str | None, *, forced: bool = False
) -> tuple[S, str | None] | None:
    """The status (and reason) a run in ``current`` ends with when its engine is done and
    would end it ``wanted``; None if it has ended already (a finished run is left as it is).

    A run that was asked to stop meanwhile (``stopping``) ends stopped, unless it failed: a
    stop must never be reported as a success, and a failure is more than a stop. ``forced``:
    the stop was forced (the run's ``stop_forced``), which its reason says.
    """
    if current.is_finished:
        return None
    if current is S.STOPPING and wanted is not S.FAILED:
        return S.STOPPED, FORCE_STOPPED_ON_REQUEST if forced else STOPPED_ON_REQUEST
    return wanted, reason
