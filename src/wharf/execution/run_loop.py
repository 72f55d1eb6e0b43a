"""The run loop: running one pipeline run's steps in this process, from start to end.

Owns :func:`run_pipeline`, called by every orchestrator that runs a run's steps itself, in the
process that orchestrates the run. It starts a placeholder run, beats for it
(``wharf.execution.run_heartbeat``), installs the stop signals (``wharf.execution.signals``),
runs the steps (``wharf.execution.dag_runner`` or ``wharf.execution.dynamic``) inline or
through step backends, and ends the run. Invariants: a started run always ends (a failure of
the loop itself ends it failed), through a store outage shorter than its liveness timeout; when
it ends, none of its steps is left queued and none of its resource requests pending or held;
a forced stop ends every attempt in flight through the backend that started it; on a workspace
server, once the run started, the loop and its steps use a token scoped to the run
(``services.run_scoped``), never the caller's credential. When the store refuses that
credential while the run runs (its API key revoked, its permission withdrawn: 401 or 403), no
write can succeed: the loop stops the run's steps here without writing and raises
:class:`~wharf.execution.refusal.RunRefusedError` (one line), leaving the run's end to the
server's sweep.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from wharf.config.spec import StepSpec
from wharf.core.enums import ExecutionStatus
from wharf.core.errors import CredentialsRefusedError, InputError
from wharf.execution.attempts import InlineExecutor
from wharf.execution.backends import StepBackend
from wharf.execution.dag_runner import DagOutcome, DagRunner, LaunchFn
from wharf.execution.dynamic import DynamicOutcome, DynamicRunner
from wharf.execution.dynamic_calls import SpecFactory
from wharf.execution.heartbeat import HeartbeatScheduler, liveness_timeout_for
from wharf.execution.interrupt import InterruptibleRegion
from wharf.execution.isolated_attempts import IsolatedExecutor
from wharf.execution.launcher import StepLauncher, StepOutcome
from wharf.execution.outages import refused, retry_through_outage
from wharf.execution.refusal import run_refused
from wharf.execution.resources.port import releaser
from wharf.execution.resources.run_requests import RunRequests, settle
from wharf.execution.run_heartbeat import RunHeartbeat, orchestrator_process
from wharf.execution.run_lifecycle import Resumption, start_run
from wharf.execution.run_stop import (
    ForcedOutcome,
    ForcedStop,
    RunStopper,
    TrackedBackend,
    TrackedInline,
)
from wharf.execution.runtime import RuntimePolicy
from wharf.execution.services import RunServices, holds_run_token, run_scoped
from wharf.execution.signals import RunSignals
from wharf.execution.step_like import StepLike
from wharf.execution.step_runner import StepRunner, import_step
from wharf.execution.stop_check import StopCheck
from wharf.store.models import (
    ArtifactVersionRecord,
    ComponentRecord,
    PipelineRunRecord,
    SnapshotRecord,
    StepRunRecord,
)

logger = logging.getLogger(__name__)


class StepOperatorLike(Protocol):
    """A stack's step operator, as the run loop uses it."""

    component: ComponentRecord

    def step_backend(self) -> StepBackend[Any]: ...


@dataclass(frozen=True)
class RunJob:
    snapshot: SnapshotRecord
    run: PipelineRunRecord
    """The run to execute: a placeholder the loop replaces when it starts the run, or a run
    recorded as started (running)."""
    services: RunServices
    resolve_step: Callable[[StepSpec], StepLike] | None = None
    """In-process step lookup (steps defined in ``__main__``); None = import by source."""
    pipeline_function: Callable[..., Any] | None = None
    """The body of a dynamic pipeline, run in the orchestration process."""
    step_operator: StepOperatorLike | None = None
    spec_factory: SpecFactory | None = None
    """Builds the spec of a step launched at run time (dynamic pipelines)."""


def run_pipeline(
    job: RunJob,
    runtimes: RuntimePolicy,
    backend: StepBackend[Any] | None,
    orchestrator_run_id: str,
    resumed: Resumption | None = None,
) -> PipelineRunRecord:
    """Run ``job``'s run to its end in this process; the run as it ended. ``runtimes``: where
    its steps run; ``backend``: the orchestrator's step backend for isolated steps (None: it
    cannot isolate); ``orchestrator_run_id``: the id a placeholder run is started with.
    ``resumed``: the run is running already, started with ``orchestrator_run_id`` by an
    earlier process that died; these are its steps (the caller took over the run's liveness
    record first, and lists as adoptable only attempts that ``backend`` takes over when
    submitted again). A resumed run goes on from what that process recorded: its finished
    steps are not run again, its attempts in flight are taken over through the backend; a
    dynamic pipeline's function is run again from its start (see
    :class:`~wharf.execution.launcher.ReplayDivergedError`), and an earlier attempt not gone
    on from is ended through the backend that started it, never left running."""
    services = job.services
    run = job.run
    if resumed is not None and (
        run.is_placeholder or run.orchestrator_run_id != orchestrator_run_id
    ):
        raise InputError(
            f"Run {run.name} was not started by orchestrator run {orchestrator_run_id}: "
            "it cannot be resumed here."
        )
    if run.is_placeholder:
        process = orchestrator_process(services.heartbeat_interval)
        run = start_run(services.store, run, orchestrator_run_id, process)
    try:
        services, own_store = run_scoped(services, run.id)  # from here on, the run's own token
    except BaseException as exc:
        ended = _finish(services, run, ExecutionStatus.FAILED, f"The orchestrator failed: {exc!r}")
        services.progress.run_finished(ended)
        raise
    try:
        return _orchestrate(job, services, run, runtimes, backend, resumed)
    finally:
        if own_store is not None:
            own_store.close()


def _orchestrate(
    job: RunJob,
    services: RunServices,
    run: PipelineRunRecord,
    runtimes: RuntimePolicy,
    backend: StepBackend[Any] | None,
    resumed: Resumption | None,
) -> PipelineRunRecord:
    """:func:`run_pipeline` once its run is started: beat for it, run its steps, end it."""
    heartbeats = HeartbeatScheduler()
    # The run's liveness record: a run whose process dies is swept (wharf.store.lost_runs).
    release = releaser(services.resources)
    stopper = RunStopper(services.store, run.id, release=release)
    liveness = RunHeartbeat.start(  # a forced stop ends the run's attempts through their backends
        services.store,
        run.id,
        services.heartbeat_interval,
        release=release,
        on_forced=stopper.forced_elsewhere,
        on_stopping=lambda: stopper.stop(recorded=True),  # `wharf runs stop` from elsewhere
        on_refused=stopper.refuse,  # its API key revoked: nothing can be written any more
        sweeps=not holds_run_token(services, run.id),  # the server sweeps, refusing its token
    )
    services.progress.run_started(run, job.snapshot.spec.name)
    signals = RunSignals(stopper, run.name).install()  # Ctrl-C, SIGTERM: stop this run
    requests = RunRequests()
    outcome: DagOutcome | DynamicOutcome | ForcedOutcome
    forced_end = _ForcedEnd(services, run, stopper, requests)
    try:
        # `wharf runs stop --force` raises ForcedStop here; a thread it cannot wake (blocked
        # off the main thread) has the run ended without it, a second later (forced_end.run)
        with stopper.orchestrating(unwoken=forced_end.run):
            outcome = _run_steps(
                job,
                services,
                run,
                runtimes,
                backend,
                heartbeats,
                stopper,
                requests,
                resumed,
                # a second Ctrl-C, or a forced stop from elsewhere, that user code may swallow
                forced=lambda: signals.forced or stopper.stopped_waiting,
            )
    except ForcedStop:
        outcome = forced_end.steps()  # a second Ctrl-C: end isolated attempts, every step
        if not (signals.forced or stopper.stopped_waiting):  # a run nested in one forced
            settle(services, requests, outcome.final_status()[0])
            _finish(services, run, *outcome.final_status())
            raise
    except BaseException as exc:
        refusal = stopper.refusal or (exc if refused(exc) else None)
        if refusal is not None:  # no write can succeed: neither settling nor ending the run
            stopper.refuse(refusal)
            raise run_refused(run.name, refusal) from None
        failure = f"The orchestrator failed: {exc!r}"
        _end_steps_in_flight(services, run, stopper, failure)
        settle(services, requests, ExecutionStatus.FAILED)
        ended = _finish(services, run, ExecutionStatus.FAILED, failure)
        services.progress.run_finished(ended)  # the summary line
        raise
    finally:
        signals.restore()
        heartbeats.close()
        liveness.close()
    if stopper.refusal is not None:  # a beat was refused: no write can succeed
        raise run_refused(run.name, stopper.refusal)
    if isinstance(outcome, ForcedOutcome) or forced_end.started:
        ended = forced_end.run()  # ended once, here or by the forced stop's thread
    else:
        status, reason = outcome.final_status()
        try:
            settle(services, requests, status)
            ended = _finish(services, run, status, reason)
        except CredentialsRefusedError as exc:
            raise run_refused(run.name, exc) from None
        services.progress.run_finished(ended)  # the summary line
    signals.raise_if_signalled(ended.status.value)  # after a Ctrl-C: KeyboardInterrupt
    return ended


class _ForcedEnd:
    """The end of a run whose stop was forced, made once: by the orchestrating thread once it
    stops waiting for the run's steps, or by another thread when a forced stop asked elsewhere
    cannot wake it (:meth:`RunStopper.orchestrating`; that thread may never wake, e.g. blocked
    off the main thread until a stuck step returns). Either ends the steps in flight stopped,
    tells the progress of them, settles the run's requests and ends the run stopped."""

    def __init__(
        self,
        services: RunServices,
        run: PipelineRunRecord,
        stopper: RunStopper,
        requests: RunRequests,
    ) -> None:
        self._services, self._run, self._stopper, self._requests = (
            services,
            run,
            stopper,
            requests,
        )
        self._lock = threading.RLock()
        self._outcome: ForcedOutcome | None = None
        self._ended: PipelineRunRecord | None = None

    @property
    def started(self) -> bool:
        """Whether the steps were ended (the run is being, or was, ended here)."""
        with self._lock:
            return self._outcome is not None

    def steps(self) -> ForcedOutcome:
        """End every attempt and step in flight (``RunStopper.force``), once; the steps it
        ended are told to the progress (no waiter tells of them: the summary would miss them)."""
        with self._lock:
            if self._outcome is None:
                self._outcome = self._stopper.force()
                for step in self._outcome.steps:
                    self._services.progress.step_ended(
                        self._run.id,
                        step.name,
                        step.status,
                        step.status_reason,
                        step.start_time,
                        step.end_time,
                    )
            return self._outcome

    def run(self) -> PipelineRunRecord:
        """End the steps (:meth:`steps`), then the run, once, with its summary line; the run as
        it ended."""
        with self._lock:
            if self._ended is None:
                status, reason = self.steps().final_status()
                try:
                    settle(self._services, self._requests, status)
                    ended = _finish(self._services, self._run, status, reason)
                except CredentialsRefusedError as exc:
                    raise run_refused(self._run.name, exc) from None
                self._services.progress.run_finished(ended)  # the summary line
                self._ended = ended
            return self._ended


def _end_steps_in_flight(
    services: RunServices, run: PipelineRunRecord, stopper: RunStopper, reason: str
) -> None:
    """After an internal error of the loop: end the isolated attempts in flight through
    their backends, and record every step still in flight (or waiting to retry) failed with
    the run's ``reason``, told to the progress as no waiter will. Best effort: the run still
    ends failed if this fails (logged)."""
    try:
        stopper.end_attempts()
        steps = stopper.end_unfinished_steps(ExecutionStatus.FAILED, reason)
        for step in steps:
            services.progress.step_ended(
                run.id, step.name, step.status, step.status_reason, step.start_time, step.end_time
            )
    except Exception as exc:
        logger.warning("Could not end the steps in flight of run %s: %s", run.name, exc)


def _finish(
    services: RunServices, run: PipelineRunRecord, status: ExecutionStatus, reason: str | None
) -> PipelineRunRecord:
    """End the run, through a store outage shorter than the run's liveness timeout (ending a
    run is safe to repeat: a finished run comes back unchanged)."""
    return retry_through_outage(
        lambda: services.store.runs.finish(run.id, status, reason),
        what=f"end run {run.name}",
        patience=liveness_timeout_for(services.heartbeat_interval),
        clock=services.clock,
        sleep=services.sleep,
    )


def _run_steps(
    job: RunJob,
    services: RunServices,
    run: PipelineRunRecord,
    runtimes: RuntimePolicy,
    backend: StepBackend[Any] | None,
    heartbeats: HeartbeatScheduler,
    stopper: RunStopper,
    requests: RunRequests,
    resumed: Resumption | None = None,
    forced: Callable[[], bool] | None = None,
) -> DagOutcome | DynamicOutcome:
    """``forced``: whether the run's stop was forced (a dynamic pipeline's runner raises it
    again where user code swallowed the ``ForcedStop``)."""
    spec = job.snapshot.spec
    runner = StepRunner(services, spec.name, run, job.resolve_step or import_step)
    inline = TrackedInline(
        InlineExecutor(services, runner, services.heartbeat_interval, heartbeats), stopper
    )
    isolated = None
    stop_recorded = None
    if runtimes.has_isolation:
        backend_for = _backends(job, backend, stopper)
        isolated = IsolatedExecutor(services, backend_for, stops=stopper)
        stop_recorded = _stopper_of_recorded(backend_for)
    launcher = StepLauncher(
        services,
        run.id,
        spec.name,
        inline=inline,
        isolated=isolated,
        record_specs=spec.dynamic or isolated is not None,
        runtimes=runtimes,
        requests=requests,
        stops=stopper,
        resumed=resumed,
        check_replay=spec.dynamic and resumed is not None,
        stop_recorded=stop_recorded,
    )
    if spec.dynamic:
        if job.pipeline_function is None or job.spec_factory is None:
            raise InputError(f"Dynamic pipeline '{spec.name}' has no function to run.")
        return DynamicRunner(
            spec,
            launcher,
            services,
            run,
            job.pipeline_function,
            job.spec_factory,
            forced=forced,  # user code may swallow the ForcedStop
        ).run()
    launch = _stopping_when_refused(launcher.launch, stopper)
    stop = StopCheck(
        services.store,
        run.id,
        patience=liveness_timeout_for(services.heartbeat_interval),
        clock=services.clock,
        sleep=services.sleep,
    )
    # ``runs.finish`` decides the run's end from the status it reads itself (a stop that no
    # step saw included), so the runner need not read it at the end.
    done: dict[str, StepOutcome] = {}
    in_flight: list[str] = []
    if resumed is not None:
        done = _finished_steps(services, job.snapshot, resumed.steps)
        in_flight = [name for name in resumed.steps if name not in done]
    dag = DagRunner(
        spec,
        launch,
        services.store,
        run.id,
        stop,
        read_stop_at_end=False,
        done=done,
        in_flight=in_flight,
        look_ahead=launcher.decisions,
    )
    return dag.run()


def _stopping_when_refused(launch: LaunchFn, stopper: RunStopper) -> LaunchFn:
    """``launch``, stopping the run here (``stopper.refuse``: every other step too) as soon as
    the launch of a step is refused the run's credential."""

    def launch_or_stop(
        spec: StepSpec, inputs: Mapping[str, ArtifactVersionRecord], region: InterruptibleRegion
    ) -> StepOutcome:
        try:
            return launch(spec, inputs, region)
        except Exception as exc:
            if refused(exc):
                stopper.refuse(exc)
            raise

    return launch_or_stop


def _finished_steps(
    services: RunServices, snapshot: SnapshotRecord, steps: Mapping[str, StepRunRecord]
) -> dict[str, StepOutcome]:
    """The outcomes of the finished ``steps`` of a resumed run; outputs read only for those
    that a step still to run takes as input."""
    finished = {name: r for name, r in steps.items() if r.status.is_finished}
    wanted = {
        i.step
        for name, spec in snapshot.spec.steps.items()
        if name not in finished
        for i in spec.inputs.values()
    }
    outcomes = {}
    for name, record in finished.items():
        outputs = {}
        if record.status.is_successful and name in wanted:
            outputs = services.versions.outputs_of(services.store, record)
        outcomes[name] = StepOutcome(
            name, record.status, outputs, record, reason=record.status_reason
        )
    return outcomes


def _stopper_of_recorded(
    backend_for: Callable[[StepSpec], StepBackend[Any]],
) -> Callable[[StepRunRecord], bool]:
    """Ends the attempt of a step run an earlier process started, through the kind of backend
    that runs its step (from the spec it recorded); whether one was ended."""

    def stop(record: StepRunRecord) -> bool:
        return record.spec is not None and backend_for(record.spec).stop_recorded(record)

    return stop


def _backends(
    job: RunJob, backend: StepBackend[Any] | None, stopper: RunStopper
) -> Callable[[StepSpec], StepBackend[Any]]:
    """Which backend runs an isolated step: the step operator's if the step names it, else the
    orchestrator's (one backend each per run, its attempts tracked by ``stopper``)."""
    own = TrackedBackend(backend, stopper) if backend is not None else None
    operator = job.step_operator
    theirs = TrackedBackend(operator.step_backend(), stopper) if operator is not None else None

    def backend_for(spec: StepSpec) -> StepBackend[Any]:
        wanted = spec.config.step_operator
        if wanted is None:
            if own is None:
                raise InputError(f"The orchestrator of step '{spec.name}' cannot isolate steps.")
            return own
        if operator is None or theirs is None or operator.component.name != wanted:
            raise InputError(
                f"Step '{spec.name}' asks for step operator '{wanted}', "
                "which is not in the active stack."
            )
        return theirs

    return backend_for
