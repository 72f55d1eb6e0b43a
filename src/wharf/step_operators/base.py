"""The step operator interface: ``submit`` a step run, ``wait`` for it, ``cancel`` it."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

from wharf.execution.attempts import ProcessResult
from wharf.execution.services import RunServices
from wharf.store.models import ComponentRecord, StepRunRecord


class BaseStepOperator(ABC):
    flavor: ClassVar[str]

    def __init__(self, component: ComponentRecord) -> None:
        self.component = component

    @abstractmethod
    def submit(self, record: StepRunRecord, services: RunServices) -> object:
        """Start the step run somewhere; return a handle."""

    @abstractmethod
    def wait(self, handle: object, timeout: float | None = None) -> ProcessResult | None:
        """The result once the step's execution ended; None if still running after timeout."""

    @abstractmethod
    def cancel(self, handle: object) -> None:
        """End the step's execution now (it is recorded by whoever waits for it)."""

    @abstractmethod
    def cleanup(self, handle: object, record: StepRunRecord, services: RunServices) -> None:
        """Collect logs and release resources once the step ended."""
