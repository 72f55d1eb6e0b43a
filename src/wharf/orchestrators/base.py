"""The orchestrator interface: the submit side of a run.

Owns :class:`BaseOrchestrator`: :meth:`~BaseOrchestrator.submit_run` receives a :class:`RunJob`
and returns the run once it finished (local orchestrators, which run ``wharf.execution.run_loop``
in the calling process) or was submitted (remote ones, whose own process calls that loop);
:meth:`~BaseOrchestrator.step_backend` isolates steps; the schedule hooks hand recorded schedules
to a platform that fires runs by itself (``schedules_runs``).

Invariant: steps that name a step operator are isolated through the stack's step operator's
backend, not the orchestrator's.
"""

from __future__ import annotations

import uuid
from abc import ABC
from collections.abc import Mapping
from typing import Any, ClassVar

from wharf.config.spec import PipelineSpec
from wharf.core.ids import new_id
from wharf.execution.backends import StepBackend
from wharf.execution.run_loop import RunJob, StepOperatorLike, run_pipeline
from wharf.execution.runtime import RuntimePolicy
from wharf.execution.services import RunServices
from wharf.store.models import ComponentRecord, PipelineRunRecord, ScheduleRecord, SnapshotRecord

__all__ = ["BaseOrchestrator", "RunJob"]


class BaseOrchestrator(ABC):
    """Base of every orchestrator. The client records a placeholder run, which the run loop
    replaces when it starts the run, unless the orchestrator starts runs at once in the
    calling process (``starts_runs_in_process``, the local ones): then the run is recorded
    running from the start, in the same write as its snapshot. An orchestrator whose platform
    fires runs by itself (``schedules_runs``, e.g. Kubernetes CronJobs) is handed each
    recorded schedule (:meth:`schedule`) instead of a run and told when it is paused, resumed
    or deleted; each fired run is created by the orchestrator's own process. The others keep
    the default no-ops: the client records the schedule and runs the pipeline once, now."""

    flavor: ClassVar[str]
    supports_isolated_steps: ClassVar[bool] = False
    """:meth:`step_backend` returns a backend."""
    isolates_static_steps: ClassVar[bool] = False
    """Run every step of a static pipeline in its own process."""

    @property
    def code_travels(self) -> bool:
        """Its isolated steps run outside this file system: they import the pipeline's code
        from the run's code archive (``wharf.execution.code_archive``)."""
        return False

    def __init__(self, component: ComponentRecord) -> None:
        self.component = component

    @property
    def id(self) -> uuid.UUID:
        return self.component.id

    def step_backend(self) -> StepBackend[Any] | None:
        """Where this orchestrator runs isolated steps (``wharf.execution.backends``); None
        if it cannot isolate steps. A new backend per call: each run gets its own."""
        return None

    def run_step_backend(self, run_metadata: Mapping[str, Any]) -> StepBackend[Any] | None:
        """:meth:`step_backend` for the steps of an existing run, from another process
        (``wharf runs stop --force``); ``run_metadata``: what its submitter recorded (where
        its steps are, e.g. a pipeline's own Kubernetes namespace). Default: step_backend()."""
        return self.step_backend()

    def end_unstarted_run(self, run: PipelineRunRecord, run_metadata: Mapping[str, Any]) -> None:
        """Remove what the platform still holds for ``run``, which a forced stop ended before
        any orchestrating process took it over (``wharf runs stop --force``; a Kubernetes
        orchestrator Job whose pod never started, and its Secret); ``run_metadata`` as for
        :meth:`run_step_backend`. Default: nothing (the local orchestrators hold nothing)."""
        return

    def why_never_starts(
        self, run: PipelineRunRecord, run_metadata: Mapping[str, Any]
    ) -> str | None:
        """Why ``run``, which no orchestrating process has taken over, never will, as its
        platform tells now (a Kubernetes orchestrator pod whose image cannot be pulled), in one
        sentence; None while it may still start. ``run_metadata`` as for
        :meth:`run_step_backend`. Default: None (the local orchestrators start runs at once)."""
        return None

    # ------------------------------------------------------------ running

    starts_runs_in_process: ClassVar[bool] = True
    """:meth:`submit_run` starts the run at once, in the calling process, and returns when it
    finished: the caller may then record the run running from the start, with an id from
    :meth:`new_run_id`, rather than a placeholder that the run loop replaces (one write less)."""

    def new_run_id(self) -> str:
        """A fresh orchestrator run id for a run this orchestrator starts."""
        return f"{self.flavor}-{new_id().hex}"

    def runtime_policy(
        self, spec: PipelineSpec, step_operator: StepOperatorLike | None = None
    ) -> RuntimePolicy:
        """Where this orchestrator runs the steps of ``spec``; raises ``InputError`` for a run
        it must refuse (callers ask before they record the run)."""
        runtimes = RuntimePolicy(
            can_isolate=self.supports_isolated_steps,
            has_isolation=self.supports_isolated_steps or step_operator is not None,
            isolate_all=self.isolates_static_steps and not spec.dynamic,
            step_operator=step_operator.component.name if step_operator is not None else None,
        )
        for step_spec in spec.steps.values():
            runtimes.check(step_spec.name, step_spec.config)
        return runtimes

    def submit_run(self, job: RunJob) -> PipelineRunRecord:
        """Run ``job`` to its end here, in this process (the local orchestrators); a remote
        orchestrator submits it instead and returns the run as submitted."""
        runtimes = self.runtime_policy(job.snapshot.spec, job.step_operator)  # refuse first
        return run_pipeline(job, runtimes, self.step_backend(), self.new_run_id())

    # ------------------------------------------------------------ schedules

    schedules_runs: ClassVar[bool] = False
    """The platform fires scheduled runs by itself: the client records the schedule, hands it
    to :meth:`schedule` and runs nothing now (False: the client runs the pipeline once, now,
    and the schedule is only recorded)."""

    def schedule(
        self, snapshot: SnapshotRecord, schedule: ScheduleRecord, services: RunServices
    ) -> None:
        """Make the platform run ``snapshot`` on ``schedule`` (already recorded; ``services``:
        how the fired runs' processes reach the stores). Idempotent: scheduling an unchanged
        schedule again leaves it as it is. Raises ``InputError`` for a schedule it cannot
        fire (the caller then forgets a schedule it has just recorded)."""
        return  # not an orchestrator that schedules runs

    def set_schedule_active(
        self, schedule: ScheduleRecord, active: bool, snapshot: SnapshotRecord | None = None
    ) -> None:
        """Pause (``active=False``) or resume the platform's schedule ``schedule`` (``snapshot``:
        the schedule's, whose settings may say where the platform keeps it); nothing for an
        orchestrator that does not schedule runs, or a schedule it does not know."""
        return  # not an orchestrator that schedules runs

    def delete_schedule(
        self, schedule: ScheduleRecord, snapshot: SnapshotRecord | None = None
    ) -> None:
        """Delete the platform's schedule ``schedule`` (runs it started stay in the store;
        ``snapshot`` as for :meth:`set_schedule_active`); nothing when it does not exist."""
        return  # not an orchestrator that schedules runs
