"""The orchestrator interface.

An orchestrator receives a :class:`RunJob` (the snapshot to run, the placeholder run the client
created, and the services) and returns the run record once the run has finished (for local
orchestrators) or has been submitted (remote ones).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from wharf.config.spec import StepSpec
from wharf.execution.services import RunServices
from wharf.execution.step_like import StepLike
from wharf.store.models import ComponentRecord, PipelineRunRecord, SnapshotRecord


@dataclass(frozen=True)
class RunJob:
    snapshot: SnapshotRecord
    placeholder: PipelineRunRecord
    services: RunServices
    resolve_step: Callable[[StepSpec], StepLike] | None = None
    """In-process step lookup (steps defined in ``__main__``); None = import by source."""


class BaseOrchestrator(ABC):
    flavor: ClassVar[str]
    supports_isolated_steps: ClassVar[bool] = False

    def __init__(self, component: ComponentRecord) -> None:
        self.component = component

    @property
    def id(self) -> object:
        return self.component.id

    @abstractmethod
    def run(self, job: RunJob) -> PipelineRunRecord:
        """Run (or submit) the snapshot; return the run record."""
