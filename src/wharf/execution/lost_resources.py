"""How a step and its run say that the step lost its resources.

Owns :data:`RESOURCES_LOST` and :func:`lost_resources`. A running step whose lease expired
(its renewals did not reach the Resource Manager in time) is cancelled with a reason holding
:data:`RESOURCES_LOST`; a run that ends with such a step failed for that reason, never
"Stopped on request." (nobody asked for a stop).
"""

from __future__ import annotations

from collections.abc import Iterable

from wharf.core.enums import ExecutionStatus

RESOURCES_LOST = "resources lost: lease expired while the Resource Manager was unavailable"
_ENDED = (ExecutionStatus.CANCELLED, ExecutionStatus.STOPPED)


def lost_resources(steps: Iterable[tuple[str, ExecutionStatus, str | None]]) -> str | None:
    """The run's reason when some of ``steps`` (name, status, reason) ended because they lost
    their resources, else None."""
    names = [
        name
        for name, status, reason in steps
        if status in _ENDED and reason is not None and RESOURCES_LOST in reason
    ]
    if not names:
        return None
    return f"Step(s) {', '.join(names)}: {RESOURCES_LOST}."
