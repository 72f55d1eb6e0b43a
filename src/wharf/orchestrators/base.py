"""The orchestrator interface and the run loop shared by the local orchestrators.

An orchestrator receives a :class:`RunJob` (the snapshot to run, the run the client recorded,
the services, and the stack's step operator) and returns the run record once the run has
finished (local orchestrators) or has been submitted (remote ones). The client records a
placeholder run, which the orchestrator replaces when it starts the run, unless the
orchestrator starts runs at once in the calling process (``starts_runs_in_process``, the local
ones): then the run is recorded running from the start, in the same write as its snapshot.

Orchestrators that can isolate steps return a step backend (``step_backend``, the launch
interface of ``wharf.execution.backends``); steps that name a step operator are isolated through
the stack's step operator's backend instead. A run
that may isolate steps on a workspace server first obtains a token scoped to the run
(``services.for_run``); its step processes authenticate with that token, never with the
caller's credential.
"""

from __future__ import annotations

import uuid
from abc import ABC
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from wharf.config.spec import PipelineSpec, StepSpec
from wharf.core.enums import ExecutionStatus
from wharf.core.errors import InputError
from wharf.core.ids import new_id
from wharf.execution.attempts import InlineExecutor, IsolatedExecutor
from wharf.execution.backends import StepBackend
from wharf.execution.dag_runner import DagOutcome, DagRunner
from wharf.execution.dynamic import DynamicOutcome, DynamicRunner, SpecFactory
from wharf.execution.heartbeat import HeartbeatScheduler
from wharf.execution.launcher import StepLauncher
from wharf.execution.resources.port import releaser
from wharf.execution.run_heartbeat import RunHeartbeat, orchestrator_process
from wharf.execution.run_lifecycle import start_run
from wharf.execution.run_stop import (
    ForcedOutcome,
    ForcedStop,
    RunStopper,
    TrackedBackend,
    TrackedInline,
)
from wharf.execution.runtime import RuntimePolicy, check_reclaim_tolerance
from wharf.execution.services import RunServices, for_run
from wharf.execution.signals import RunSignals
from wharf.execution.step_like import StepLike
from wharf.execution.step_runner import StepRunner, import_step
from wharf.execution.stop_check import StopCheck
from wharf.step_operators.base import BaseStepOperator
from wharf.store.models import ComponentRecord, PipelineRunRecord, SnapshotRecord


@dataclass(frozen=True)
class RunJob:
    snapshot: SnapshotRecord
    run: PipelineRunRecord
    """The run to execute: a placeholder the orchestrator replaces when it starts the run, or
    a run recorded as started (running, its id from :meth:`BaseOrchestrator.new_run_id`)."""
    services: RunServices
    resolve_step: Callable[[StepSpec], StepLike] | None = None
    """In-process step lookup (steps defined in ``__main__``); None = import by source."""
    pipeline_function: Callable[..., Any] | None = None
    """The body of a dynamic pipeline, run in the orchestration process."""
    step_operator: BaseStepOperator | None = None
    spec_factory: SpecFactory | None = None
    """Builds the spec of a step launched at run time (dynamic pipelines)."""


class BaseOrchestrator(ABC):
    flavor: ClassVar[str]
    supports_isolated_steps: ClassVar[bool] = False
    """:meth:`step_backend` returns a backend."""
    isolates_static_steps: ClassVar[bool] = False
    """Run every step of a static pipeline in its own process."""

    def __init__(self, component: ComponentRecord) -> None:
        self.component = component

    @property
    def id(self) -> uuid.UUID:
        return self.component.id

    def step_backend(self) -> StepBackend[Any] | None:
        """Where this orchestrator runs isolated steps (``wharf.execution.backends``); None
        if it cannot isolate steps. A new backend per call: each run gets its own."""
        return None

    # ------------------------------------------------------------ running

    starts_runs_in_process: ClassVar[bool] = True
    """:meth:`run` starts the run at once, in the calling process, and returns when it
    finished: the caller may then record the run running from the start, with an id from
    :meth:`new_run_id`, rather than a placeholder that :meth:`run` replaces (one write less)."""

    def new_run_id(self) -> str:
        """A fresh orchestrator run id for a run this orchestrator starts."""
        return f"{self.flavor}-{new_id().hex}"

    def runtime_policy(
        self, spec: PipelineSpec, step_operator: BaseStepOperator | None = None
    ) -> RuntimePolicy:
        """Where this orchestrator runs the steps of ``spec``; raises ``InputError`` for a run
        it must refuse (callers ask before they record the run)."""
        runtimes = RuntimePolicy(
            can_isolate=self.supports_isolated_steps,
            has_isolation=self.supports_isolated_steps or step_operator is not None,
            isolate_all=self.isolates_static_steps and not spec.dynamic,
        )
        for step_spec in spec.steps.values():
            runtime = runtimes.choose(step_spec.name, step_spec.config).runtime
            check_reclaim_tolerance(step_spec.name, step_spec.config, runtime)
        return runtimes

    def run(self, job: RunJob) -> PipelineRunRecord:
        services = job.services
        run = job.run
        if run.is_placeholder:
            self.runtime_policy(job.snapshot.spec, job.step_operator)  # refuse before starting
            process = orchestrator_process(services.heartbeat_interval)
            run = start_run(services.store, run, self.new_run_id(), process)
        heartbeats = HeartbeatScheduler()
        # The run's liveness record: a run whose process dies is swept (wharf.store.lost_runs).
        release = releaser(services.resources)
        liveness = RunHeartbeat.start(
            services.store, run.id, services.heartbeat_interval, release=release
        )
        services.progress.run_started(run, job.snapshot.spec.name)
        stopper = RunStopper(services.store, run.id, release=release)
        signals = RunSignals(stopper, run.name).install()  # Ctrl-C, SIGTERM: stop this run
        outcome: DagOutcome | DynamicOutcome | ForcedOutcome
        try:
            # A started run must end whatever happens from here: a refusal fails it too.
            runtimes = self.runtime_policy(job.snapshot.spec, job.step_operator)
            if runtimes.has_isolation:
                services = for_run(services, run.id)
            outcome = self._run_steps(job, services, run, runtimes, heartbeats, stopper)
        except ForcedStop:
            outcome = stopper.force()  # a second Ctrl-C: kill isolated steps, end every step
            if not signals.forced:  # a run nested in the one being forced: it ends too
                services.store.runs.finish(run.id, *outcome.final_status())
                raise
        except BaseException as exc:
            ended = services.store.runs.finish(
                run.id, ExecutionStatus.FAILED, f"The orchestrator failed: {exc!r}"
            )
            services.progress.run_finished(ended)  # the summary line
            raise
        finally:
            signals.restore()
            heartbeats.close()
            liveness.close()
        status, reason = outcome.final_status()
        ended = services.store.runs.finish(run.id, status, reason)
        services.progress.run_finished(ended)  # the summary line
        signals.raise_if_signalled(ended.status.value)  # after a Ctrl-C: KeyboardInterrupt
        return ended

    def _run_steps(
        self,
        job: RunJob,
        services: RunServices,
        run: PipelineRunRecord,
        runtimes: RuntimePolicy,
        heartbeats: HeartbeatScheduler,
        stopper: RunStopper,
    ) -> DagOutcome | DynamicOutcome:
        spec = job.snapshot.spec
        runner = StepRunner(services, spec.name, run, job.resolve_step or import_step)
        inline = TrackedInline(
            InlineExecutor(services, runner, services.heartbeat_interval, heartbeats), stopper
        )
        isolated = None
        if runtimes.has_isolation:
            backend_for = self._backends(job, stopper)
            isolated = IsolatedExecutor(services, backend_for)
        launcher = StepLauncher(
            services,
            run.id,
            spec.name,
            inline=inline,
            isolated=isolated,
            record_specs=spec.dynamic or isolated is not None,
            runtimes=runtimes,
        )
        if spec.dynamic:
            if job.pipeline_function is None or job.spec_factory is None:
                raise InputError(f"Dynamic pipeline '{spec.name}' has no function to run.")
            return DynamicRunner(
                spec, launcher, services, run, job.pipeline_function, job.spec_factory
            ).run()
        stop = StopCheck(services.store, run.id)
        # ``runs.finish`` decides the run's end from the status it reads itself (a stop that no
        # step saw included), so the runner need not read it at the end.
        dag = DagRunner(spec, launcher.launch, services.store, run.id, stop, read_stop_at_end=False)
        return dag.run()

    def _backends(self, job: RunJob, stopper: RunStopper) -> Callable[[StepSpec], StepBackend[Any]]:
        """Which backend runs an isolated step: the step operator's if the step names it, else
        this orchestrator's (one backend each per run, its attempts tracked by ``stopper``)."""
        own = self.step_backend()
        mine = TrackedBackend(own, stopper) if own is not None else None
        operator = job.step_operator
        theirs = TrackedBackend(operator.step_backend(), stopper) if operator is not None else None

        def backend_for(spec: StepSpec) -> StepBackend[Any]:
            wanted = spec.config.step_operator
            if wanted is None:
                if mine is None:
                    raise InputError(f"The {self.flavor} orchestrator cannot isolate steps.")
                return mine
            if operator is None or theirs is None or operator.component.name != wanted:
                raise InputError(
                    f"Step '{spec.name}' asks for step operator '{wanted}', "
                    "which is not in the active stack."
                )
            return theirs

        return backend_for
