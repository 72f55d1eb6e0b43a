"""Entry point of an isolated step's own process: ``python -m wharf.execution.entrypoint ID``.

Owns :func:`run_step_process`: given a step run id (whose record is running), it opens the
store the parent set in the environment (with a token scoped to the step's run when over
REST), loads the step's spec, inputs and code (from the run's code archive when the snapshot
records one: ``wharf.execution.code_fetch``; the step's first beat comes before the fetch,
and a step asked to stop by then fetches nothing), runs the user function in the main thread
with a heartbeat beside it (an interrupt wakes that thread from a blocking system call:
``interrupt.wake_main_thread``), and records how the attempt ended; a store outage as it starts
(shorter than the step's liveness timeout) is waited out (:func:`read_step`). Invariants: the
heartbeat beats until the final status is recorded; exit code 0 when the attempt completed, 1
otherwise (a process that dies without recording anything is recorded by its parent); once its
parent is gone the process stores its own log (through an outage of the artifact store until
its parent watch's grace ends the wait) and deletes its temporary file (``log_capture.OwnLog``);
its ``spawn`` and ``forkserver`` workers execute the user's script as
it does (``wharf.execution.script_workers``).
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from wharf.artifacts.materializers.registry import default_registry
from wharf.config.global_config import load_config
from wharf.config.library_logs import quiet_library_loggers
from wharf.core.enums import ComponentType, ExecutionStatus
from wharf.core.errors import InputError
from wharf.execution import script_workers
from wharf.execution.artifact_outages import step_logs_through_outage
from wharf.execution.attempt_ends import finish_attempt
from wharf.execution.attempts import heartbeat_for, run_user_code
from wharf.execution.code_fetch import archive_resolver
from wharf.execution.components import instantiate_component
from wharf.execution.heartbeat import (
    beat_on_signal,
    liveness_timeout_for,
    startup_allowance_granted,
    stops_with_run,
)
from wharf.execution.interrupt import InterruptibleRegion, StepInterrupted, wake_main_thread
from wharf.execution.log_capture import STEP_LOG_ENV, OwnLog
from wharf.execution.outages import retry_through_outage
from wharf.execution.parent_watch import ParentWatch
from wharf.execution.pinning import allocation_from_env, pin_to_allocation
from wharf.execution.resources.embedded import connect_configured
from wharf.execution.services import RunServices, open_store, utc_now
from wharf.execution.step_region import StepRegion
from wharf.execution.step_runner import StepRunner, import_step
from wharf.execution.stop_deadline import StopDeadline, stop_grace_from_env
from wharf.store.answers import HeartbeatResponse
from wharf.store.models import (
    ArtifactVersionRecord,
    ComponentRecord,
    PipelineRunRecord,
    SnapshotRecord,
    StepRunRecord,
    StepRunUpdate,
)
from wharf.store.ports import Store
from wharf.store.process_identity import own_start_token, this_host

logger = logging.getLogger("wharf.step")


def run_step_process(step_run_id: UUID) -> int:
    """Run the attempt of step run ``step_run_id``; the process's exit code.

    The heartbeat beats once before the user code starts when the engine allowed the attempt
    a startup time (``heartbeat.startup_allowance_granted``). A cancelled step whose user code
    does not return within its stop grace is cut off (``wharf.execution.stop_deadline``); a
    graceful stop of the run interrupts the user code, unless the backend asked the step to
    finish (``FINISH_ON_RUN_STOP_ENV``). A failure to get the code archive fails the step
    with its message."""
    # Never outlive the orchestrator: once it is gone the step is interrupted (and the
    # process exits if it does not end in time), and stores its own log (no one else will).
    region = StepRegion()
    wake_main_thread()  # an interrupt wakes the user code from a blocking call
    script_workers.serve()  # spawn/forkserver workers execute the step's script too
    own_log = OwnLog(os.environ.get(STEP_LOG_ENV))

    def orchestrator_gone(pid: int) -> None:
        own_log.orphan()
        region.interrupt(f"Stopped: the orchestrating process (pid {pid}) ended.")

    watch = ParentWatch(orchestrator_gone, exit_process=own_log.store_then_exit).start()
    try:
        return _run_step(step_run_id, region, own_log)
    finally:
        try:  # through an outage of the store, until the watch's grace ends the wait
            own_log.store_if_orphaned()
        finally:
            watch.stop()


def _run_step(step_run_id: UUID, region: InterruptibleRegion, own_log: OwnLog) -> int:
    config = load_config()
    store = open_store(config)
    try:
        patience = liveness_timeout_for(config.heartbeat_interval)
        start = read_step(store, step_run_id, patience)
        record, run, snapshot = start.record, start.run, start.snapshot
        resources = None
        if not config.server_url:  # over REST the server pairs steps with the RM
            user = store.users.get(run.user_id) if run.user_id else None
            account = user.name if user else "default"
            # its heartbeats renew its request and its end releases it (the launcher waited)
            resources = connect_configured(store, config, user, account)
        spec = record.spec or snapshot.spec.steps[record.name]
        artifact_store = instantiate_component(start.artifact_store)
        services = RunServices(
            store=store,
            artifact_store=artifact_store,
            materializers=default_registry(),
            project_id=run.project_id,
            user_id=run.user_id,
            heartbeat_interval=config.heartbeat_interval,
            resources=resources,
        )
        # once orphaned, its log waits out an outage of the store as the run's would
        own_log.destination(
            artifact_store,
            record.logs_uri,
            record.name,
            step_logs_through_outage(services, own_log.waits),
        )
        # The pid with its host and start token: a force stop signals it only from this
        # machine and only while this process lives (never a reused pid).
        me = StepRunUpdate(pid=os.getpid(), pid_host=this_host(), pid_start=own_start_token())
        retry_through_outage(
            lambda: store.steps.update(record.id, me),
            what=f"record the process of step run {record.id}",
            patience=patience,
            clock=utc_now,
            sleep=time.sleep,
        )
        allocation = allocation_from_env(dict(os.environ))
        if allocation is not None:
            pin_to_allocation(allocation, _gpu_indices())
        deadline = StopDeadline(
            stop_grace_from_env(os.environ),
            lambda reason: finish_attempt(
                services, spec, record, None, StepInterrupted(reason), reason
            ),
        )
        worker = None
        give_back_signal = None
        code = snapshot.spec.code
        if spec.config.enable_heartbeat:
            interval = services.heartbeat_interval
            worker = heartbeat_for(
                services, record, region, interval, stops_with_run=stops_with_run(os.environ)
            )
            worker.add_stop_listener(lambda response: _cut_off_if_cancelled(deadline, response))
            # the orchestrator's signal on a graceful stop: the stop is heard now, not at the
            # next beat (``LocalProcessBackend.beat_now``)
            give_back_signal = beat_on_signal(worker)
            # With a startup allowance (e.g. a pod's), the first beat ends it at once; before
            # a code archive is fetched, it tells of a stop asked meanwhile (no fetch then).
            first = startup_allowance_granted(record, interval) or code is not None
            worker.start(beat_first=first)
        try:
            resolve = (
                import_step
                if code is None
                else archive_resolver(artifact_store, code, config.code_cache, region, services)
            )
            runner = StepRunner(services, snapshot.spec.name, run, resolve)
            outputs, error = run_user_code(runner, spec, record, start.inputs, region, allocation)
            if not deadline.settle():
                return 1  # cut off: its end is recorded (only reached when the exit is faked)
            final, _ = finish_attempt(services, spec, record, outputs, error, region.reason)
        finally:
            if give_back_signal is not None:
                give_back_signal()
            if worker is not None:
                worker.stop()
        return 0 if final.status is ExecutionStatus.COMPLETED else 1
    finally:
        store.close()


@dataclass(frozen=True)
class StepStart:
    """What a step's process reads before it runs the step."""

    record: StepRunRecord
    run: PipelineRunRecord
    snapshot: SnapshotRecord
    artifact_store: ComponentRecord
    """The artifact store component of the snapshot's stack."""
    inputs: dict[str, ArtifactVersionRecord]


def read_step(
    store: Store,
    step_run_id: UUID,
    patience: float,
    *,
    clock: Callable[[], datetime] = utc_now,
    sleep: Callable[[float], object] = time.sleep,
) -> StepStart:
    """The step run, its run, snapshot, artifact store and input artifact versions, read
    through a store outage of up to ``patience`` seconds: the process (a pod's) may start while
    the workspace server is briefly down, and the engine waits for it as long (the reads are
    safe to repeat; any other error is raised at once)."""

    def read() -> StepStart:
        record = store.steps.get(step_run_id)
        run = store.runs.get(record.run_id)
        snapshot = store.snapshots.get(run.snapshot_id)
        if snapshot.stack_id is None:
            raise InputError(f"Snapshot {snapshot.id} records no stack to run on.")
        stack = store.stacks.get_stack(snapshot.stack_id)
        component = store.stacks.get_component(stack.components[ComponentType.ARTIFACT_STORE])
        inputs = {name: store.artifacts.get_version(v) for name, v in record.inputs.items()}
        return StepStart(record, run, snapshot, component, inputs)

    return retry_through_outage(
        read, what=f"read step run {step_run_id}", patience=patience, clock=clock, sleep=sleep
    )


def _cut_off_if_cancelled(deadline: StopDeadline, response: HeartbeatResponse) -> None:
    """Start the grace of a cancelled step (a reclaim) or of one ended failed while it ran
    (judged lost); not of a run's graceful stop, whose steps may take their time, and which
    ``wharf runs stop --force`` ends."""
    cut = (ExecutionStatus.CANCELLING, ExecutionStatus.CANCELLED, ExecutionStatus.FAILED)
    if response.status in cut:
        deadline.arm(f"step {response.status.value}, run {response.run_status.value}")


def _gpu_indices() -> list[int]:
    from wharf.resource_manager.embedded.machine import nvidia_gpus

    return [gpu.index for gpu in nvidia_gpus()]


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    quiet_library_loggers()  # the step's log holds what it printed, not each HTTP request
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m wharf.execution.entrypoint STEP_RUN_ID", file=sys.stderr)
        return 2
    try:
        return run_step_process(UUID(args[0]))
    except Exception as exc:  # recorded by the parent as "exited before reporting"
        logger.error("The step process failed before running the step: %s", exc)
        return 3


if __name__ == "__main__":
    sys.exit(main())
