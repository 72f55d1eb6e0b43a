"""How one step of a run ended, as the launcher answers it to the DAG and dynamic runners.

A ``StepOutcome`` is a value: the step's name and final status, the output versions a
successful step hands downstream, its last step run record (None if none was written) and the
reason of its status.
"""

from __future__ import annotations

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
