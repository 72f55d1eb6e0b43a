"""The ``local_process`` orchestrator: isolated steps run in their own processes on this machine.

Static pipelines run every step isolated; in dynamic pipelines the runtime rules decide
(``wharf.execution.runtime``) and inline steps run in threads of the orchestration process.
Configuration: ``python`` — the interpreter that runs steps (default: this one).
"""

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
from wharf.orchestrators.base import BaseOrchestrator
from wharf.store.models import StepRunRecord

if TYPE_CHECKING:  # the RM's models are only needed for type checking here
    from wharf.resource_manager.contract.models import ResourceRequestInfo


class LocalProcessOrchestrator(BaseOrchestrator):
    flavor = "local_process"
    supports_isolated_steps = True
    isolates_static_steps = True
    supports_resource_pool_allocation = True

    def submit_isolated_step(self, record: StepRunRecord, services: RunServices) -> object:
        python = self.component.configuration.get("python")
        return start_step_process(record, services.child_env, python=python)

    def submit_isolated_step_with_allocation(
        self, record: StepRunRecord, services: RunServices, allocation: ResourceRequestInfo
    ) -> object:
        python = self.component.configuration.get("python")
        return start_step_process(record, allocation_env(services.child_env, allocation), python)

    def wait_for_isolated_step(
        self, handle: object, timeout: float | None = None
    ) -> ProcessResult | None:
        assert isinstance(handle, StepProcess)
        return wait_step_process(handle, timeout)

    def cancel_isolated_step(self, handle: object) -> None:
        assert isinstance(handle, StepProcess)
        kill_step_process(handle)

    def cleanup_isolated_step(
        self, handle: object, record: StepRunRecord, services: RunServices
    ) -> None:
        assert isinstance(handle, StepProcess)
        collect_logs(handle, services.artifact_store, record.logs_uri)
