"""Entry point of a run's orchestrator pod (``python -m`` this module; :func:`main`).

:func:`run_orchestrator` runs the run with the engine's run loop
(``wharf.execution.run_loop.run_pipeline``) and the Kubernetes step backend, its services built
as the local orchestrators build them (``BaseOrchestrator``); a run fired by a schedule's
CronJob is created by the pod itself (:func:`scheduled_run`).

Invariants: every step that is not cached runs as its own Job, owned by this pod's Job (deleting
the run's Job collects them); a run is resumed only by a pod of the Job that started it, so no
step runs twice; the run's token Secret is deleted only once the run ended.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar
from uuid import UUID, uuid5

from wharf.artifacts.materializers.registry import default_registry
from wharf.config.global_config import API_KEY_ENV, SERVER_URL_ENV, WharfConfig, load_config
from wharf.config.library_logs import quiet_library_loggers
from wharf.core.enums import ComponentType, ExecutionStatus, MetadataResourceType
from wharf.core.errors import EntityExistsError, EntityNotFoundError, InputError, WharfError
from wharf.core.names import run_name
from wharf.execution.components import instantiate_component
from wharf.execution.heartbeat import liveness_timeout_for
from wharf.execution.outages import retry_through_outage
from wharf.execution.progress import LogListener, ProgressReporter
from wharf.execution.progress_logging import configure_logging
from wharf.execution.run_lifecycle import Resumption
from wharf.execution.run_loop import RunJob, run_pipeline
from wharf.execution.services import RunServices, open_store, utc_now
from wharf.integrations.kubernetes.clients import KubeClients, kube_clients
from wharf.integrations.kubernetes.labels import run_labels
from wharf.integrations.kubernetes.manifests import ORCHESTRATOR_MODULE, owner_reference
from wharf.integrations.kubernetes.orchestrator import KubernetesOrchestrator
from wharf.integrations.kubernetes.orchestrator_deadline import (
    DeadlineSignal,
    OrchestratorDeadlineExceeded,
)
from wharf.integrations.kubernetes.orchestrator_dynamic import SCRIPT_KEY, DynamicBody
from wharf.integrations.kubernetes.orchestrator_follow import read_job
from wharf.integrations.kubernetes.orchestrator_launch import (
    FAILED_BEFORE_THE_RUN,
    RUN_ENDED_UNCOMPLETED,
    OrchestratorArgs,
    parse_orchestrator_args,
)
from wharf.integrations.kubernetes.orchestrator_resources import step_resources
from wharf.integrations.kubernetes.orchestrator_resume import (
    collect_left_jobs,
    delete_predecessor_secrets,
    take_over,
)
from wharf.integrations.kubernetes.orchestrator_submit import delete_token_secret
from wharf.integrations.kubernetes.orchestrator_terminated import (
    OrchestratorTerminated,
    TerminationSignal,
    end_terminated_run,
)
from wharf.integrations.kubernetes.owned_secret import own_secret
from wharf.integrations.kubernetes.schedule_credentials import (
    fire_scheduled_run,
    holds_schedule_token,
)
from wharf.integrations.kubernetes.schedules import split_schedule_id
from wharf.integrations.kubernetes.settings import KubernetesOrchestratorSettings
from wharf.integrations.kubernetes.step_backend import KubernetesStepBackend
from wharf.integrations.kubernetes.step_backend_secret import STORE_URL_ENV
from wharf.store.models import PipelineRunRecord, RunCreate, RunFilter, SnapshotRecord
from wharf.store.ports import Store
from wharf.store.schedule_window import in_window

logger = logging.getLogger("wharf.kubernetes.orchestrator")

T = TypeVar("T")

_RUN_IDS = UUID("0b6f4d52-8f3e-4c1a-9a57-3d2e6c1b7f90")
"""Namespace of :func:`job_run_uuid`: fixed for ever (a pod in flight must find its run)."""

POD_KEY = "kubernetes_orchestrator_pod"
ORCHESTRATOR_RUN_ID_KEY = "orchestrator_run_id"
SCHEDULE_ID_KEY = "schedule_id"
SCHEDULE_NAME_KEY = "schedule_name"
CRON_JOB_KEY = "kubernetes_cronjob"
"""Run metadata keys written by the pod (the submitter writes the Job's name and namespace;
a scheduled run's pod records its schedule and CronJob: runs have no schedule field)."""
STEP_POD_ENV = frozenset(
    {
        STORE_URL_ENV,
        SERVER_URL_ENV,
        API_KEY_ENV,
        "WHARF_PROJECT",
        "WHARF_HEARTBEAT_INTERVAL",
        "WHARF_RESOURCE_MANAGER",
        "WHARF_LOCAL_STEP_SLOTS",
        "WHARF_LOGGING_VERBOSITY",
        "WHARF_LOGGING_FORMAT",
    }
)
"""The Wharf settings of this pod that its step pods get (what a step's entry point reads:
the store and its credential, the project, heartbeats, the Resource Manager, the log format);
no other variable of this pod reaches them (e.g. the image's ``WHARF_HOME``, or anything the
pod settings' ``env`` sets)."""


def step_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """What a step pod needs to reach the run's stores: this pod's Wharf settings named in
    :data:`STEP_POD_ENV` (its run token included, which the run loop replaces by one of its
    own where the store issues them)."""
    return {key: value for key, value in environ.items() if key in STEP_POD_ENV}


def run_orchestrator(
    args: OrchestratorArgs,
    environ: Mapping[str, str] | None = None,
    schedule_id: UUID | None = None,
) -> int:
    """Run the run of ``args`` to its end; the exit code (0: completed). ``schedule_id``: the
    schedule that fired this pod (then ``args`` names no run: the pod creates it).

    The store is opened from the environment (as a step's process does:
    ``wharf.execution.services.open_store``). The run loop decides caching right before each
    step's launch and starts the placeholder run with this Job's orchestrator run id
    (``kubernetes-<Job uid>``, the same for every pod of the Job). A pod that finds its run
    running with that id (an earlier pod of the Job died mid-run) resumes it
    (``orchestrator_resume``): finished steps are not run again, step Jobs still running
    are adopted, the other step Jobs' logs are kept and those Jobs deleted; a dynamic
    pipeline's function runs again (``wharf.execution.dynamic``). A run started with another
    orchestrator run id (or whose pod cannot find its own Job) is ended failed; a run that
    ended already is left as it is. A graceful stop (``wharf runs stop``)
    starts no further step and lets the running step pods finish. The token Secret is left to
    the next pod of the Job when this one fails before the run ended (the Job owns it). A
    SIGTERM before the run loop (which takes it as a graceful stop) ends the run failed, naming
    what sent it (``orchestrator_terminated``)."""
    environ = os.environ if environ is None else environ
    settings = KubernetesOrchestratorSettings.model_validate_json(args.settings_json)
    config = load_config(environ)
    configure_logging(config.logging_verbosity, config.logging_format)
    # A SIGTERM before the run loop takes the signal over ends the run, saying so.
    with TerminationSignal(args.run_id) as terminated:
        store = open_store(config)
        try:
            clients = kube_clients(ride_out_outages=True)  # in-cluster (the bed: KUBECONFIG)
            try:
                try:
                    if schedule_id is not None and holds_schedule_token(environ):  # a server's
                        own = own_job_of_pod(clients, args.namespace, environ.get("HOSTNAME", ""))
                        patience = liveness_timeout_for(config.heartbeat_interval)
                        fired = fire_scheduled_run(
                            store, args, environ, schedule_id, own, job_run_id(own), patience
                        )
                        if fired is None:
                            return 0
                        store, args, environ = fired.store, fired.args, fired.environ
                        terminated.run_id = args.run_id
                    return _orchestrate(
                        args, settings, config, store, clients, environ, schedule_id, terminated
                    )
                except OrchestratorTerminated:  # the run ended failed, if it had one yet
                    pod = environ.get("HOSTNAME", "")
                    run = end_terminated_run(store, clients, args.namespace, pod, terminated.run_id)
                    return FAILED_BEFORE_THE_RUN if run is None else _exit_code(run)
            finally:
                # Only once the run ended: a pod that failed before may be followed by another
                # of the Job, which needs the token (the Job owns the Secret in any case).
                ended = args.run_id is not None and _has_ended(store, args.run_id)
                if args.token_secret is not None and ended:
                    delete_token_secret(clients, args.namespace, args.token_secret)
                clients.close()
        finally:
            store.close()


def _orchestrate(
    args: OrchestratorArgs,
    settings: KubernetesOrchestratorSettings,
    config: WharfConfig,
    store: Store,
    clients: KubeClients,
    environ: Mapping[str, str],
    schedule_id: UUID | None,
    terminated: TerminationSignal,
) -> int:
    snapshot = store.snapshots.get(args.snapshot_id)
    own_job: dict[str, Any] | None = None
    if args.run_id is not None:
        run = store.runs.get(args.run_id)
    else:  # fired by a schedule: the run is this pod's to create (one per Job)
        own_job = own_job_of_pod(clients, args.namespace, environ.get("HOSTNAME", ""))
        patience = liveness_timeout_for(config.heartbeat_interval)
        fired = scheduled_run(store, snapshot, schedule_id, own_job, patience)
        if fired is None:
            return 0
        run = fired
        terminated.run_id = run.id
    if run.status.is_finished:  # a pod of a Job whose run already ended (a retry)
        logger.info("Run %s already ended %s.", run.name, run.status.value)
        return _exit_code(run)
    if own_job is None:
        own_job = read_job(clients, args.namespace, args.job_name)
    if not run.is_placeholder:  # an earlier pod of the Job started it, then died
        started_here = own_job is not None and run.orchestrator_run_id == job_run_id(own_job)
        if own_job is None or not started_here:
            reason = (
                "The orchestrator pod was restarted mid-run and cannot resume this run "
                f"({_why_not_resumable(run, own_job)}), so it ends here rather "
                "than run its steps twice."
            )
            logger.error("Run %s: %s", run.name, reason)
            return _exit_code(store.runs.finish(run.id, ExecutionStatus.FAILED, reason))
    if own_job is None:
        raise InputError(f"This pod's Job {args.namespace}/{args.job_name} does not exist.")
    try:  # at the Job's active deadline, from here on: the run fails
        with DeadlineSignal(own_job):
            return _run_in_pod(
                args, settings, config, store, clients, environ, snapshot, run, own_job
            )
    except OrchestratorDeadlineExceeded as exc:  # in the run loop: it ended the run already
        logger.error("Run %s: %s", run.name, exc)
        return _exit_code(store.runs.finish(run.id, ExecutionStatus.FAILED, str(exc)))


def _run_in_pod(
    args: OrchestratorArgs,
    settings: KubernetesOrchestratorSettings,
    config: WharfConfig,
    store: Store,
    clients: KubeClients,
    environ: Mapping[str, str],
    snapshot: SnapshotRecord,
    run: PipelineRunRecord,
    own_job: dict[str, Any],
) -> int:
    """Run ``run`` (resumed if an earlier pod of ``own_job`` started it) in this pod."""
    resumed: Resumption | None = None
    if not run.is_placeholder:
        resumed = take_over(store, clients, args.namespace, run, config.heartbeat_interval)
    if snapshot.stack_id is None:
        raise InputError(f"Snapshot {snapshot.id} records no stack to run on.")
    stack = store.stacks.get_stack(snapshot.stack_id)

    def component(type: ComponentType) -> Any:
        return instantiate_component(store.stacks.get_component(stack.components[type]))

    orchestrator = component(ComponentType.ORCHESTRATOR)
    if not isinstance(orchestrator, KubernetesOrchestrator):
        raise InputError(f"Stack '{stack.name}' does not run on the kubernetes orchestrator.")
    step_operator = None
    if ComponentType.STEP_OPERATOR in stack.components:
        step_operator = component(ComponentType.STEP_OPERATOR)
    if args.token_secret is not None:
        _own_run_secret(clients, args.namespace, args.token_secret, own_job)
    orchestrator_run_id = job_run_id(own_job)
    store.run_metadata.add(
        MetadataResourceType.PIPELINE_RUN,
        run.id,
        {POD_KEY: environ.get("HOSTNAME", ""), ORCHESTRATOR_RUN_ID_KEY: orchestrator_run_id},
    )
    services = RunServices(
        store=store,
        artifact_store=component(ComponentType.ARTIFACT_STORE),
        materializers=default_registry(),
        project_id=run.project_id,
        user_id=run.user_id,
        heartbeat_interval=config.heartbeat_interval,
        child_env=step_environment(environ),
        progress=ProgressReporter([LogListener()]),
        resources=step_resources(store, config, run),
    )
    left_logs = None
    if resumed is not None:  # the step Jobs it does not adopt: their logs kept, then deleted
        left_logs = collect_left_jobs(clients, args.namespace, services, run.id, resumed)
    runtimes = orchestrator.runtime_policy(snapshot.spec, step_operator)
    backend = KubernetesStepBackend(
        clients,
        settings,
        image=orchestrator.image(),
        labels=run_labels(snapshot.spec.name, str(run.id), run.name),
        owner=owner_reference(own_job),
        finish_on_run_stop=True,  # a graceful stop: running step pods finish
    )
    body = None
    if snapshot.spec.dynamic:  # this pod runs the pipeline's function; its steps run in pods
        script = _recorded_script(store, run)
        body = DynamicBody(snapshot.spec, services.artifact_store, config.code_cache, script)
    job = RunJob(
        with_parallelism(snapshot, settings),
        run,
        services,
        pipeline_function=body,
        step_operator=step_operator,
        spec_factory=body.step_spec if body is not None else None,
    )
    try:  # at the Job's active deadline the run loop fails the run, cancelling its step Jobs
        return _exit_code(run_pipeline(job, runtimes, backend, orchestrator_run_id, resumed))
    finally:
        backend.close()
        if resumed is not None:
            delete_predecessor_secrets(clients, args.namespace, run.id, backend.id)
        if left_logs is not None:  # those logs still waiting for the artifact store
            left_logs.close()


def _why_not_resumable(run: PipelineRunRecord, own_job: Mapping[str, Any] | None) -> str:
    if own_job is None:
        return "this pod's Job does not exist"
    return f"it was started by {run.orchestrator_run_id}, not by this pod's Job"


def _recorded_script(store: Store, run: PipelineRunRecord) -> str | None:
    """The submitter's script recorded for the run's dynamic pipeline, if any."""
    records = store.run_metadata.list(MetadataResourceType.PIPELINE_RUN, run.id)
    scripts = [str(m.value) for m in records if m.key == SCRIPT_KEY]
    return scripts[-1] if scripts else None


def with_parallelism(
    snapshot: SnapshotRecord, settings: KubernetesOrchestratorSettings
) -> SnapshotRecord:
    """``snapshot`` whose pipeline runs at most the orchestrator's ``max_parallelism`` steps at
    once, when that is set and lower than the pipeline's own."""
    limit = settings.max_parallelism
    config = snapshot.spec.config
    if limit is None or (config.max_parallelism is not None and config.max_parallelism <= limit):
        return snapshot
    spec = snapshot.spec.model_copy(
        update={"config": config.model_copy(update={"max_parallelism": limit})}
    )
    return snapshot.model_copy(update={"spec": spec})


def job_run_id(job: Mapping[str, Any]) -> str:
    """The orchestrator run id of the run of a Job: the same for every pod of the Job."""
    return f"kubernetes-{job['metadata']['uid']}"


def _own_run_secret(
    clients: KubeClients, namespace: str, secret: str, own_job: Mapping[str, Any]
) -> None:
    """Let this pod's Job own the run's Secret. The submitter did, unless its create of the Job
    lost its answer and the Job could not be read back (the run was kept for the Job, its
    Secret owned by nothing): the Secret must still go with the Job, e.g. when the Job fails
    before its pods end the run or is deleted by hand. A failure is logged: the run goes on."""
    try:
        own_secret(clients, namespace, secret, own_job, what="the run's Secret")
    except WharfError as exc:
        logger.warning("The run's Secret may outlive its Job: %s", exc)


def own_job_of_pod(clients: KubeClients, namespace: str, pod_name: str) -> dict[str, Any]:
    """The Job of the pod ``pod_name`` (this one: ``HOSTNAME``), from its controller
    reference: a Job a CronJob created has a name nobody could pass on the command line."""
    if not pod_name:
        raise InputError("HOSTNAME is not set: this pod cannot find its own Job.")
    response: Any = clients.core.read_namespaced_pod(pod_name, namespace, _preload_content=False)
    pod = json.loads(response.data)
    owners = [
        ref
        for ref in pod["metadata"].get("ownerReferences") or []
        if ref.get("kind") == "Job" and ref.get("controller")
    ]
    job = read_job(clients, namespace, owners[0]["name"]) if owners else None
    if job is None:
        raise InputError(f"Pod {namespace}/{pod_name} belongs to no Job.")
    return job


def scheduled_run(
    store: Store,
    snapshot: SnapshotRecord,
    schedule_id: UUID | None,
    own_job: Mapping[str, Any],
    patience: float,
) -> PipelineRunRecord | None:
    """The run of a scheduled Job: the one an earlier pod of the Job created, else a new
    placeholder with the Job's orchestrator run id (so a concurrent firing's run loop never
    takes it), recorded with its schedule in the run's metadata before any step. None when
    the schedule is gone or paused in the store (a CronJob the cluster kept) or the time is
    outside its start and end times: nothing runs.

    Every store call is repeated through an outage of up to ``patience`` seconds, and the run
    is created under an id chosen from the Job's (:func:`job_run_uuid`), as the SDK creates
    its runs: a repeat whose first answer was lost gets the run written, and another pod of
    the Job (a restart, or two at once) finds that run, never a second one."""

    def repeated(call: Callable[[], T], what: str) -> T:
        return retry_through_outage(
            call, what=what, patience=patience, clock=utc_now, sleep=time.sleep
        )

    schedule = None
    if schedule_id is not None:
        try:
            schedule = repeated(lambda: store.schedules.get(schedule_id), "read the schedule")
        except EntityNotFoundError:
            logger.warning("Schedule %s no longer exists: this firing runs nothing.", schedule_id)
            return None
        if not schedule.active:
            logger.warning("Schedule %s is paused: this firing runs nothing.", schedule.name)
            return None
        if not in_window(schedule, utc_now()):
            logger.warning(
                "Schedule %s fires only between its start and end times: this firing runs nothing.",
                schedule.name,
            )
            return None
    run_id = job_run_id(own_job)
    wanted = RunFilter(snapshot_id=snapshot.id, orchestrator_run_id=run_id)
    create = RunCreate(
        id=job_run_uuid(snapshot.id, run_id),
        project_id=snapshot.project_id,
        pipeline_id=snapshot.pipeline_id,
        snapshot_id=snapshot.id,
        name=run_name(snapshot.spec.name, utc_now()),  # one name for every repeat
        orchestrator_run_id=run_id,
    )

    def get_or_create() -> PipelineRunRecord:
        found = store.runs.list(wanted).items
        if found:
            return found[0]
        try:
            return store.runs.create(create)
        except EntityExistsError:  # another pod of the Job created it (under another name)
            return store.runs.list(wanted).items[0]

    run = repeated(get_or_create, f"create the run of Job {own_job['metadata']['name']}")
    cron_jobs = [
        ref["name"]
        for ref in own_job["metadata"].get("ownerReferences") or []
        if ref.get("kind") == "CronJob"
    ]
    recorded: dict[str, Any] = {}
    if schedule is not None:
        recorded |= {SCHEDULE_ID_KEY: str(schedule.id), SCHEDULE_NAME_KEY: schedule.name}
    if cron_jobs:
        recorded[CRON_JOB_KEY] = cron_jobs[0]
    if recorded:
        repeated(
            lambda: store.run_metadata.add(MetadataResourceType.PIPELINE_RUN, run.id, recorded),
            f"record the schedule of run {run.name}",
        )
    return run


def job_run_uuid(snapshot_id: UUID, orchestrator_run_id: str) -> UUID:
    """The id a scheduled Job's pod chooses for its run: the same for every pod of the Job
    (``orchestrator_run_id`` holds the Job's uid), another for every other Job."""
    return uuid5(_RUN_IDS, f"{snapshot_id}:{orchestrator_run_id}")


def _has_ended(store: Store, run_id: UUID) -> bool:
    try:
        return store.runs.get(run_id).status.is_finished
    except Exception:  # the store is unreachable: keep the Secret (its Job collects it)
        logger.warning("Cannot read run %s: its token Secret is kept.", run_id, exc_info=True)
        return False


def _exit_code(run: PipelineRunRecord) -> int:
    return 0 if run.status is ExecutionStatus.COMPLETED else RUN_ENDED_UNCOMPLETED


def main(argv: Sequence[str] | None = None) -> int:
    """The pod's command line. Exit code: 0 when the run completed (or a schedule fired that
    runs nothing), 1 when it ended otherwise (the Job then fails without starting another
    pod), 3 when the pod failed before running the run (the Job may retry), 2 for a malformed
    command line."""
    # Wharf's own log format (``run_orchestrator`` sets it up), as a local run prints it.
    quiet_library_loggers()
    try:
        schedule_id, rest = split_schedule_id(sys.argv[1:] if argv is None else argv)
    except ValueError as exc:
        print(f"{ORCHESTRATOR_MODULE}: error: {exc}", file=sys.stderr)
        return 2
    args = parse_orchestrator_args(rest)
    try:
        return run_orchestrator(args, schedule_id=schedule_id)
    except OrchestratorTerminated:  # before it had a store: nothing could be ended
        logger.error("The orchestrator pod got SIGTERM before it opened its store.")
        return FAILED_BEFORE_THE_RUN
    except Exception as exc:  # a run it started is ended by the run loop itself
        configure_logging(None, "text")  # when it failed before setting up its log
        logger.exception("The orchestrator failed: %s", exc)
        return FAILED_BEFORE_THE_RUN


if __name__ == "__main__":
    sys.exit(main())
