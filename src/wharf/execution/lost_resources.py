"""How a step and its run say that the step lost its resources.

Owns :data:`RESOURCES_LOST`, :func:`lease_lost`, :func:`lost_resources`, :func:`reclaimed`,
:func:`reclaimed_resources` and :func:`stopped_steps`. A running step whose lease expired (its
renewals did not reach the Resource Manager in time) is cancelled with a reason holding
:data:`RESOURCES_LOST` and what kept them from it (:func:`lease_lost`); a run that ends with such a
step failed for that reason. A step whose request the Resource Manager reclaimed (preempted) is
cancelled with a reason holding :data:`RESOURCES_RECLAIMED`; a run whose only stopped steps are
such steps ends stopped for that reason. Neither says "Stopped on request." (nobody asked for a
stop); nor does a run whose steps ended stopped for another reason (a request released by hand): it
names them.
"""

from __future__ import annotations

from collections.abc import Iterable
from uuid import UUID

from wharf.core.enums import ExecutionStatus
from wharf.core.transitions import STOPPED_ON_REQUEST

RESOURCES_LOST = "resources lost: its lease expired"
RM_UNREACHABLE = "while the Resource Manager was unreachable"
"""Why a lease expired when renewals of it failed to reach the Resource Manager."""
RESOURCES_RECLAIMED = "was reclaimed by the Resource Manager"
_ENDED = (ExecutionStatus.CANCELLED, ExecutionStatus.STOPPED)


def lease_lost(cause: str) -> str:
    """Why a step is cancelled when its lease expired, ``cause`` saying what kept renewals from
    the Resource Manager (:data:`RM_UNREACHABLE`, or the step's heartbeats missing)."""
    return f"{RESOURCES_LOST} {cause}"


def reclaimed(request_id: UUID, why: str | None) -> str:
    """Why a step is cancelled when its request ``request_id`` is preempted (the RM's ``why``)."""
    because = f" ({why.rstrip('.')})" if why else ""
    return f"its resource request {request_id} {RESOURCES_RECLAIMED}{because}"


def reclaimed_resources(steps: Iterable[tuple[str, ExecutionStatus, str | None]]) -> str | None:
    """The run's reason when the steps of ``steps`` (name, status, reason) that ended stopped
    or cancelled all did so because their requests were reclaimed, else None."""
    ended = [(name, reason or "") for name, status, reason in steps if status in _ENDED]
    if not ended or any(RESOURCES_RECLAIMED not in reason for _, reason in ended):
        return None
    names = ", ".join(name for name, _ in ended)
    return f"Step(s) {names} cancelled: their resources were reclaimed by the Resource Manager."


def lost_resources(steps: Iterable[tuple[str, ExecutionStatus, str | None]]) -> str | None:
    """The run's reason when some of ``steps`` (name, status, reason) ended because they lost
    their resources, else None."""
    lost = [
        (name, reason[reason.index(RESOURCES_LOST) :].rstrip("."))
        for name, status, reason in steps
        if status in _ENDED and reason is not None and RESOURCES_LOST in reason
    ]
    if not lost:
        return None
    causes = {why for _, why in lost}
    why = causes.pop() if len(causes) == 1 else RESOURCES_LOST
    return f"Step(s) {', '.join(name for name, _ in lost)}: {why}."


def stopped_steps(steps: Iterable[tuple[str, ExecutionStatus, str | None]]) -> str | None:
    """The run's reason when steps of ``steps`` (name, status, reason) ended stopped or
    cancelled though nobody asked the run to stop (a request released by hand): each step
    with the first line of its reason; None if none did."""
    ended = [(name, status, (reason or "").strip()) for name, status, reason in steps]
    ended = [(name, status, why) for name, status, why in ended if status in _ENDED]
    if not ended:
        return None
    if any(why.startswith(STOPPED_ON_REQUEST) for _, _, why in ended):
        return STOPPED_ON_REQUEST  # a stop asked elsewhere, which its steps heard first
    return (
        "; ".join(
            f"Step '{name}' {status.value}"
            + (f": {why.splitlines()[0].rstrip('.')}" if why else "")
            for name, status, why in ended
        )
        + "."
    )
