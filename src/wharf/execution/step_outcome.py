"""How one step of a run ended, as the launcher answers it to the DAG and dynamic runners.

A ``StepOutcome`` is a value: the step's name and final status, the output versions a
successful step hands downstream, its last step run record (None if none was written) and the
reason of its status.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from wharf.core.enums import ExecutionStatus
from wharf.store.models import ArtifactVersionRecord, StepRunRecord


@dataclass(frozen=True)
class StepOutcome:
    name: str
    status: ExecutionStatus
    outputs: dict[str, ArtifactVersionRecord] = field(default_factory=dict)
    step_run: StepRunRecord | None = None
    reason: str | None = None

    @property
    def succeeded(self) -> bool:
        return self.status.is_successful


NAMED_FAILED_STEPS = 20
"""How many failed steps a run's reason names; a sweep's thousands would pass what a MySQL
``TEXT`` column holds (64 KiB) and the run could not end."""


def failed_steps_reason(outcomes: Mapping[str, StepOutcome]) -> str | None:
    """A run's reason when steps failed: ``Step(s) failed: a, b.``, or None if none did. A step
    that failed before its step run was recorded (its launch raised) is named with its reason,
    which nothing else records: ``b (Internal error: ValueError: …)``. At most
    :data:`NAMED_FAILED_STEPS` are named, then ``… and N more (M in all)``."""
    failed = [
        (name, outcome)
        for name, outcome in outcomes.items()
        if outcome.status is ExecutionStatus.FAILED
    ]
    if not failed:
        return None
    named = [
        name if outcome.step_run is not None or not outcome.reason else f"{name} ({outcome.reason})"
        for name, outcome in failed[:NAMED_FAILED_STEPS]
    ]
    left = len(failed) - len(named)
    more = f" and {left} more ({len(failed)} in all)" if left else ""
    return f"Step(s) failed: {', '.join(named)}{more}."
