"""The ``local`` orchestrator: every step runs in a thread of this process."""

from __future__ import annotations

import uuid

from wharf.core.enums import ExecutionStatus
from wharf.execution.dag_runner import DagRunner
from wharf.execution.launcher import StepLauncher
from wharf.execution.run_lifecycle import finish_run, start_run
from wharf.execution.step_runner import StepRunner, import_step
from wharf.orchestrators.base import BaseOrchestrator, RunJob
from wharf.store.models import PipelineRunRecord


class LocalOrchestrator(BaseOrchestrator):
    flavor = "local"

    def run(self, job: RunJob) -> PipelineRunRecord:
        services = job.services
        spec = job.snapshot.spec
        run = start_run(services.store, job.placeholder, f"local-{uuid.uuid4().hex}")
        runner = StepRunner(services, spec.name, run, job.resolve_step or import_step)
        launcher = StepLauncher(services, runner, run.id)
        try:
            outcome = DagRunner(spec, launcher.launch, services.store, run.id).run()
        except BaseException as exc:
            finish_run(
                services.store, run.id, ExecutionStatus.FAILED, f"The orchestrator failed: {exc!r}"
            )
            raise
        status, reason = outcome.final_status()
        return finish_run(services.store, run.id, status, reason)
