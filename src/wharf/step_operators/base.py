"""The step operator interface: ``submit`` a step run, ``wait`` for it, ``cancel`` it."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, ClassVar

from wharf.execution.attempts import ProcessResult
from wharf.execution.services import RunServices
from wharf.store.models import ComponentRecord, StepRunRecord

if TYPE_CHECKING:  # the RM's models are only needed for type checking here
    from wharf.resource_manager.contract.models import ResourceRequestInfo


class BaseStepOperator(ABC):
    flavor: ClassVar[str]
    supports_resource_pool_allocation: ClassVar[bool] = False
    """Takes a step's Resource Manager allocation into account when it runs the step."""

    def __init__(self, component: ComponentRecord) -> None:
        self.component = component

    @abstractmethod
    def submit(self, record: StepRunRecord, services: RunServices) -> object:
        """Start the step run somewhere; return a handle."""

    def submit_with_allocation(
        self, record: StepRunRecord, services: RunServices, allocation: ResourceRequestInfo
    ) -> object:
        """Like :meth:`submit`, honouring the allocation; operators that do not opt in get the
        plain call."""
        return self.submit(record, services)

    @abstractmethod
    def wait(self, handle: object, timeout: float | None = None) -> ProcessResult | None:
        """The result once the step's execution ended; None if still running after timeout."""

    @abstractmethod
    def cancel(self, handle: object) -> None:
        """End the step's execution now (it is recorded by whoever waits for it)."""

    @abstractmethod
    def cleanup(self, handle: object, record: StepRunRecord, services: RunServices) -> None:
        """Collect logs and release resources once the step ended."""
