"""The ``local_process`` step operator: runs a step in its own process on this machine."""

from __future__ import annotations

from typing import TYPE_CHECKING

from wharf.execution.attempts import ProcessResult
from wharf.execution.pinning import allocation_env
from wharf.execution.services import RunServices
from wharf.execution.subprocesses import (
    StepProcess,
    collect_logs,
    kill_step_process,
    start_step_process,
    wait_step_process,
)
from wharf.step_operators.base import BaseStepOperator
from wharf.store.models import StepRunRecord

if TYPE_CHECKING:  # the RM's models are only needed for type checking here
    from wharf.resource_manager.contract.models import ResourceRequestInfo


class LocalProcessStepOperator(BaseStepOperator):
    flavor = "local_process"
    supports_resource_pool_allocation = True

    def submit(self, record: StepRunRecord, services: RunServices) -> object:
        return start_step_process(record, services.child_env)

    def submit_with_allocation(
        self, record: StepRunRecord, services: RunServices, allocation: ResourceRequestInfo
    ) -> object:
        return start_step_process(record, allocation_env(services.child_env, allocation))

    def wait(self, handle: object, timeout: float | None = None) -> ProcessResult | None:
        assert isinstance(handle, StepProcess)
        return wait_step_process(handle, timeout)

    def cancel(self, handle: object) -> None:
        assert isinstance(handle, StepProcess)
        kill_step_process(handle)

    def cleanup(self, handle: object, record: StepRunRecord, services: RunServices) -> None:
        assert isinstance(handle, StepProcess)
        collect_logs(handle, services.artifact_store, record.logs_uri)
