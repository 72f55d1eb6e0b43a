"""The ``kubernetes`` orchestrator: a run's steps run as Kubernetes Jobs, orchestrated by a pod.

Owns :class:`KubernetesOrchestrator`: submitting a run (``submit_run``), refusing what it cannot
run (``runtime_policy``, ``check_artifact_store``) and scheduling runs as CronJobs.

Invariants: the pods reach the run's store only through the run's ``child_env`` (never the
caller's own key), every credential only through a Secret the pods refer to (``secretKeyRef``);
the artifact store must be reachable from the pods (a local one only with
``mounts_artifact_store``); the Secret of a run that is not scheduled is deleted when the run
ended (by the orchestrator pod, and by a synchronous submitter once the Job finished); once the
orchestrator Job's create was sent, an interrupted submitter keeps the run for the Job's pod,
as does one whose create failed without saying whether the Job was made, when the Job cannot be
read back (``orchestrator_submit``).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, TextIO

from kubernetes.client import ApiException
from urllib3.exceptions import HTTPError

from wharf.artifacts.store import ArtifactStore
from wharf.config.spec import PipelineSpec
from wharf.core.enums import ExecutionStatus, MetadataResourceType
from wharf.core.errors import InputError, WharfError
from wharf.execution.run_loop import RunJob, StepOperatorLike
from wharf.execution.runtime import RuntimePolicy
from wharf.execution.services import RunServices, for_run
from wharf.integrations.kubernetes.clients import KubeClients, api_error, kube_clients
from wharf.integrations.kubernetes.orchestrator_dynamic import (
    SCRIPT_KEY,
    defined_in_script,
    known_steps,
    main_script,
)
from wharf.integrations.kubernetes.orchestrator_follow import follow_job, unstartable_job
from wharf.integrations.kubernetes.orchestrator_interrupts import CtrlCDeferred, ctrl_c_ignored
from wharf.integrations.kubernetes.orchestrator_launch import (
    OrchestratorArgs,
    orchestrator_job_name,
    pod_environment,
    token_secret_name,
)
from wharf.integrations.kubernetes.orchestrator_submit import (
    JobMayExistError,
    SubmittedJob,
    create_orchestrator_job,
    delete_job,
    delete_token_secret,
    kept_for_its_job,
)
from wharf.integrations.kubernetes.schedule_credentials import schedule_child_env
from wharf.integrations.kubernetes.schedules import (
    apply_cron_job,
    check_schedulable,
    delete_cron_jobs,
    schedule_cron_job,
    suspend_cron_jobs,
)
from wharf.integrations.kubernetes.settings import KubernetesOrchestratorSettings
from wharf.integrations.kubernetes.step_backend import KubernetesStepBackend
from wharf.integrations.kubernetes.step_settings import (
    check_orchestrated_steps,
    pipeline_settings,
)
from wharf.orchestrators.base import BaseOrchestrator
from wharf.store.models import ComponentRecord, PipelineRunRecord, ScheduleRecord, SnapshotRecord

FLAVOR = "kubernetes"
logger = logging.getLogger(__name__)

NAMESPACE_KEY = "kubernetes_namespace"
JOB_KEY = "kubernetes_orchestrator_job"
JOB_UID_KEY = "kubernetes_orchestrator_job_uid"  # once created: a missing Job was deleted
CONTEXT_KEY = "kubernetes_context"
"""Run metadata keys: where the run's orchestrator Job is (the namespace and, when the run's
settings name one, the kubeconfig context actually used, pipeline-level settings included)."""


class KubernetesOrchestrator(BaseOrchestrator):
    """Runs a pipeline's run in an orchestrator Job whose pod runs ``orchestrator_main``.

    Dynamic pipelines run as static ones do: the pod runs the pipeline's function
    (``orchestrator_dynamic``) and every step runs in a Job of its own (``runtime_policy``
    isolates all steps); the submitter records the path of a script that defines one (the pod
    loads it from the code archive), and a scheduled one must be defined in a module.

    Scheduling: a cron schedule becomes a CronJob whose job template is the orchestrator Job of
    a manual run, without a run (``schedules``); pausing, resuming and deleting the schedule
    suspend, resume and delete it. Other schedules are refused by ``runtime_policy``.

    Configuration: the component's ``-c`` values, parsed by
    ``KubernetesOrchestratorSettings.from_component``. The pods reach the store with a workspace
    server's URL and a token scoped to the run (``services.for_run``), else an SQL store's URL,
    which works only where the pods can open that database.
    """

    flavor = FLAVOR
    supports_isolated_steps = True
    isolates_static_steps = True
    starts_runs_in_process = False
    schedules_runs = True

    def __init__(self, component: ComponentRecord) -> None:
        super().__init__(component)
        try:
            self.settings = KubernetesOrchestratorSettings.from_component(component.configuration)
        except InputError as exc:
            raise InputError(f"Orchestrator '{component.name}': {exc}") from None

    @classmethod
    def check_configuration(cls, configuration: Mapping[str, Any]) -> None:
        """Refuse at registration what no run could use (an unknown key, a value of the wrong
        type, an invalid namespace...): the parsing a run does. The kubeconfig and its context
        are not read: they are the submitting user's (another machine, or set up later) and
        are checked when a run, stop or schedule needs them."""
        KubernetesOrchestratorSettings.from_component(configuration)

    @property
    def code_travels(self) -> bool:
        return True

    def step_backend(self) -> KubernetesStepBackend:
        """The step Jobs of this orchestrator seen from outside a run: through it
        ``wharf runs stop --force`` deletes a step's Jobs (``stop_recorded``). The orchestrator
        pod runs steps through a backend of its own, whose Jobs its own Job owns."""
        return self.run_step_backend({})

    def run_step_backend(self, run_metadata: Mapping[str, Any]) -> KubernetesStepBackend:
        """:meth:`step_backend` where the run's metadata says its Jobs are (the namespace and
        context its submitter recorded, a pipeline's own included)."""
        settings = self.settings.merged(recorded_place(run_metadata))
        clients = kube_clients(context=settings.context, kubeconfig=settings.kubeconfig)
        return KubernetesStepBackend(clients, settings, image=settings.image or "", labels={})

    def end_unstarted_run(self, run: PipelineRunRecord, run_metadata: Mapping[str, Any]) -> None:
        """Delete the orchestrator Job of a run a forced stop ended before its pod took it
        over (its pods go with it) and the run's Secret, where its metadata says they are;
        one error line, naming what is left, if the cluster refuses or cannot be reached."""
        name = run_metadata.get(JOB_KEY)
        if not name:
            return  # never submitted
        settings = self.settings.merged(recorded_place(run_metadata))
        namespace = settings.namespace
        try:
            clients = kube_clients(context=settings.context, kubeconfig=settings.kubeconfig)
            try:
                delete_job(clients, namespace, str(name))
                delete_token_secret(clients, namespace, token_secret_name(run.id))
            finally:
                clients.close()
        except WharfError as exc:
            raise WharfError(
                f"Run '{run.name}' is {run.status.value}, but its orchestrator Job "
                f"{namespace}/{name} is left: {exc} (delete it with `kubectl -n {namespace} "
                f"delete job {name}`)"
            ) from None

    def why_never_starts(
        self, run: PipelineRunRecord, run_metadata: Mapping[str, Any]
    ) -> str | None:
        """Why the run's orchestrator Job, where its metadata says it is, will never start the
        run (its pod waits for one of ``fail_on_container_waiting_reasons``, e.g. an image that
        cannot be pulled, or the Job failed), worded as a synchronous submitter words it; None
        while it may still (or the run has no Job yet)."""
        name = run_metadata.get(JOB_KEY)
        if not name:
            return None
        settings = self.settings.merged(recorded_place(run_metadata))
        clients = kube_clients(context=settings.context, kubeconfig=settings.kubeconfig)
        try:
            reasons = self.settings.fail_on_container_waiting_reasons
            uid = str(run_metadata.get(JOB_UID_KEY) or "") or None  # created: see JOB_UID_KEY
            where = unstartable_job(clients, settings.namespace, str(name), reasons, uid)
        finally:
            clients.close()
        return None if where is None else did_not_start(where, run.name)

    # ------------------------------------------------------------------ refusing

    def runtime_policy(
        self, spec: PipelineSpec, step_operator: StepOperatorLike | None = None
    ) -> RuntimePolicy:
        if spec.config.schedule is not None:
            check_schedulable(spec.name, spec.config.schedule)
            if spec.dynamic and defined_in_script(spec):
                raise InputError(
                    f"Dynamic pipeline '{spec.name}' is defined in the script that runs it: "
                    "a schedule's runs cannot load it on Kubernetes; define the pipeline in a "
                    "module the script imports."
                )
        try:
            run_settings = self.run_settings(spec)
        except InputError:
            pass  # the SDK's settings check names it
        else:  # and the steps a dynamic pipeline's function names, as this process has them
            check_orchestrated_steps(run_settings, spec, step_operator, known_steps(spec))
        runtimes = super().runtime_policy(spec, step_operator)
        # A dynamic pipeline's steps run in pods of their own too (its pod runs its function).
        return replace(runtimes, isolate_all=True)

    def check_artifact_store(self, artifact_store: ArtifactStore) -> None:
        """Refuse an artifact store the pods cannot reach: a local one, unless the component
        says the cluster mounts it at the same path (``mounts_artifact_store``)."""
        if self.settings.mounts_artifact_store or not is_local_path(artifact_store.path):
            return
        raise InputError(
            f"Orchestrator '{self.component.name}' runs steps in Kubernetes pods, which cannot "
            f"read the local artifact store at {artifact_store.path}: use a remote artifact "
            "store (e.g. 'wharf component register remote --type artifact_store --flavor "
            "fsspec -c path=s3://BUCKET/PREFIX'), or register the orchestrator with "
            "-c mounts_artifact_store=true if every pod mounts that path."
        )

    # ------------------------------------------------------------------ submitting

    def image(self) -> str:
        image = self.settings.image
        if not image:
            raise InputError(
                f"Orchestrator '{self.component.name}' has no image: register it with "
                "-c image=REGISTRY/IMAGE:TAG (an image with Wharf and the pipeline's "
                "dependencies installed)."
            )
        return image

    def run_settings(self, spec: PipelineSpec) -> KubernetesOrchestratorSettings:
        """The settings of a run of ``spec``: the component's with the pipeline's
        ``orchestrator.kubernetes`` settings layered over them (``step_settings``)."""
        return pipeline_settings(self.settings, spec)

    def orchestrator_args(self, job: RunJob) -> OrchestratorArgs:
        """The command line of the run's orchestrator pod (its settings: the run's, so the
        pod's step Jobs start from the pipeline-level settings too)."""
        run = job.run
        settings = self.run_settings(job.snapshot.spec)
        return OrchestratorArgs(
            snapshot_id=job.snapshot.id,
            run_id=run.id,
            namespace=settings.namespace,
            job_name=orchestrator_job_name(
                settings.job_name_prefix, job.snapshot.spec.name, run.id
            ),
            settings_json=settings.model_dump_json(exclude_defaults=True),
            token_secret=None,
        )

    def submit_run(self, job: RunJob, out: TextIO | None = None) -> PipelineRunRecord:
        """Submit ``job``'s run as an orchestrator Job; the run as the store has it once the
        Job finished (``synchronous``) or at once. ``out``: where the pod's log and the hints
        go (default: standard output).

        Refuses first what it cannot run (``runtime_policy``, then the artifact store, which
        ``runtime_policy`` does not see; the client then deletes its placeholder run, as after
        any failure before the orchestrator took over). Then creates the run's Secret and the
        orchestrator Job for the placeholder run, recording the Job's name, namespace and
        context in the run's metadata, and either follows the Job to its end, streaming its
        pod's log, or returns at once, printing how to follow it.

        Ctrl-C from the Job's create on never makes the run one that failed to start (the client
        would delete it while the Job's pod is about to run it): a first Ctrl-C during the
        create waits for the cluster's answer, then the call returns the run, which goes on in
        the cluster, as a Ctrl-C while following does; a second one stops waiting and the call
        returns the run, kept since its Job may exist, saying how to check and stop it."""
        out = sys.stdout if out is None else out
        self.runtime_policy(job.snapshot.spec, job.step_operator)  # refuse first
        self.check_artifact_store(job.services.artifact_store)
        settings = self.run_settings(job.snapshot.spec)
        image = settings.image or self.image()
        environment = pod_environment(for_run(job.services, job.run.id).child_env)
        args = self.orchestrator_args(job)
        if environment.token is not None:
            args = OrchestratorArgs(**{**vars(args), "token_secret": token_secret_name(job.run.id)})
        clients = kube_clients(context=settings.context, kubeconfig=settings.kubeconfig)
        state = _Submission()
        try:
            # Recorded first: a run whose Job exists always says where it is.
            recorded: dict[str, Any] = {NAMESPACE_KEY: args.namespace, JOB_KEY: args.job_name}
            if settings.context is not None:
                recorded[CONTEXT_KEY] = settings.context
            script = main_script(job.snapshot.spec)
            if script is not None:  # the pod loads a dynamic pipeline from it
                recorded[SCRIPT_KEY] = script
            job.services.store.run_metadata.add(
                MetadataResourceType.PIPELINE_RUN, job.run.id, recorded
            )
            # From the create on, a Ctrl-C never gives the run back as one that failed to
            # start (its placeholder would be deleted while the Job's pod is about to run it).
            state.creating = True
            creating = (
                f"the cluster to create the orchestrator Job {args.namespace}/{args.job_name}"
            )
            with CtrlCDeferred(creating) as ctrl_c:
                state.submitted = create_orchestrator_job(
                    clients, settings, job, args, image=image, environment=environment
                )
            _record_uid(job, state.submitted)
            if not settings.synchronous:
                with ctrl_c_ignored():  # it is said how to follow it: the run goes on
                    state.handed_over = True
                    _print_follow_hints(out, job.run, state.submitted)
                    return job.services.store.runs.get(job.run.id)
            if ctrl_c.pressed:
                raise KeyboardInterrupt
            return self._follow(clients, job, state.submitted, out, state)
        except KeyboardInterrupt:
            if not state.creating or state.handed_over:
                raise  # nothing in the cluster yet, or said already
            with ctrl_c_ignored():
                return _interrupted_submission(job, args, state.submitted, out)
        except JobMayExistError as exc:  # its create's answer was lost and the Job cannot be read
            out.write(f"\n{exc}\n")
            return job.services.store.runs.get(job.run.id)
        finally:
            clients.close()

    def _follow(
        self,
        clients: KubeClients,
        job: RunJob,
        submitted: SubmittedJob,
        out: TextIO,
        state: _Submission,
    ) -> PipelineRunRecord:
        store = job.services.store
        try:
            state.handed_over = True  # a Ctrl-C from here on stops following
            end = follow_job(
                clients,
                submitted.namespace,
                submitted.name,
                out,
                interval=self.settings.job_monitoring_interval,
                fail_on_waiting_reasons=self.settings.fail_on_container_waiting_reasons,
            )
        except (KeyboardInterrupt, ApiException, HTTPError) as exc:
            # The run goes on in the cluster whatever happens to this process's view of it. A
            # second Ctrl-C while this is said must not escape: the caller would take the
            # run for one that failed to start (a traceback, and the running run failed).
            with ctrl_c_ignored():
                why = "" if isinstance(exc, KeyboardInterrupt) else f" ({_lost_job(exc)})"
                out.write(
                    f"\nStopped following run {job.run.name}{why}; it goes on in the cluster "
                    f"(stop it with `wharf runs stop {job.run.name}`).\n"
                )
                _print_follow_hints(out, job.run, submitted)
                return store.runs.get(job.run.id)
        if end.stuck:  # it would never start: take it away
            delete_job(clients, submitted.namespace, submitted.name)
        if submitted.token_secret is not None:
            delete_token_secret(clients, submitted.namespace, submitted.token_secret)
        run = store.runs.get(job.run.id)
        if end.succeeded or run.status.is_finished:
            return run
        where = f"The orchestrator Job {submitted.namespace}/{submitted.name} {end.detail}"
        if run.is_placeholder:  # the pod never started the run: nothing ran
            raise WharfError(did_not_start(where, run.name))
        return store.runs.finish(run.id, ExecutionStatus.FAILED, f"{where}.")

    # ------------------------------------------------------------------ schedules

    def schedule(
        self, snapshot: SnapshotRecord, schedule: ScheduleRecord, services: RunServices
    ) -> None:
        """Create (or replace, unchanged) the schedule's CronJob (``schedules``); each run it
        fires is created by its orchestrator pod."""
        self.check_artifact_store(services.artifact_store)
        # On a workspace server the fired pods hold a token of the schedule, not the user's.
        environment = pod_environment(
            schedule_child_env(services.store, schedule, services.child_env)
        )
        settings = self.run_settings(snapshot.spec)
        manifest = schedule_cron_job(
            settings,
            snapshot,
            schedule,
            image=settings.image or self.image(),
            environment=environment,
        )
        clients = kube_clients(context=settings.context, kubeconfig=settings.kubeconfig)
        try:
            apply_cron_job(clients, manifest)
        finally:
            clients.close()

    def set_schedule_active(
        self, schedule: ScheduleRecord, active: bool, snapshot: SnapshotRecord | None = None
    ) -> None:
        """Resume (``active``) or suspend the schedule's CronJob (where its snapshot's
        settings put it, a pipeline-level namespace or context included); a schedule whose
        CronJob is gone (deleted outside Wharf) is an error saying how to schedule it again:
        nothing would fire it, whatever its record says."""
        settings = self.settings if snapshot is None else self.run_settings(snapshot.spec)
        clients = kube_clients(context=settings.context, kubeconfig=settings.kubeconfig)
        try:
            changed = suspend_cron_jobs(clients, settings.namespace, schedule.id, not active)
        finally:
            clients.close()
        if not changed:
            raise WharfError(
                f"Schedule '{schedule.name}' has no CronJob in namespace {settings.namespace} "
                "(deleted outside Wharf?): nothing fires it. Delete it with `wharf schedule "
                f"delete {schedule.name}` and call the pipeline again to schedule it anew."
            )

    def delete_schedule(
        self, schedule: ScheduleRecord, snapshot: SnapshotRecord | None = None
    ) -> None:
        """Delete the schedule's CronJob (its Jobs go with it) and its Secret, where its
        snapshot's settings put them."""
        settings = self.settings if snapshot is None else self.run_settings(snapshot.spec)
        clients = kube_clients(context=settings.context, kubeconfig=settings.kubeconfig)
        try:
            delete_cron_jobs(clients, settings.namespace, schedule.id)
        finally:
            clients.close()


def recorded_place(run_metadata: Mapping[str, Any]) -> dict[str, str]:
    """The settings (namespace, context) a run's metadata recorded for its Jobs."""
    keys = {NAMESPACE_KEY: "namespace", CONTEXT_KEY: "context"}
    return {
        setting: str(run_metadata[key]) for key, setting in keys.items() if run_metadata.get(key)
    }


def did_not_start(where: str, run_name: str) -> str:
    """Why a run whose orchestrator Job is in trouble (``where``: a sentence naming the Job)
    never started."""
    return f"{where}; run {run_name} did not start (nothing ran)."


def is_local_path(path: str) -> bool:
    """Whether an artifact store path names this machine's file system."""
    scheme, separator, _ = path.partition("://")
    return not separator or scheme in ("file", "local")


@dataclass
class _Submission:
    """How far ``submit_run`` got: the orchestrator Job's create was sent (``creating``), the
    cluster answered it (``submitted``), the user was told how to follow the run or its Job is
    followed (``handed_over``)."""

    creating: bool = False
    submitted: SubmittedJob | None = None
    handed_over: bool = False


def _interrupted_submission(
    job: RunJob, args: OrchestratorArgs, submitted: SubmittedJob | None, out: TextIO
) -> PipelineRunRecord:
    """Ctrl-C once the orchestrator Job's create was sent, before the Job was followed: the run
    as the store has it, kept for the Job's pod, having said how to follow and stop it."""
    name = job.run.name
    if submitted is None:  # a second Ctrl-C cut the create short: the Job may exist
        ns, job_name = args.namespace, args.job_name
        what = f"Interrupted while creating the orchestrator Job {ns}/{job_name} of run {name}"
        out.write(f"\n{kept_for_its_job(what, ns, job_name, name)}\n")
    else:
        out.write(
            f"\nStopped following run {name} before it started; it goes on in the cluster "
            f"(stop it with `wharf runs stop {name}`).\n"
        )
        _print_follow_hints(out, job.run, submitted)
    out.flush()
    return job.services.store.runs.get(job.run.id)


def _record_uid(job: RunJob, submitted: SubmittedJob) -> None:
    """Record the Job's uid (:data:`JOB_UID_KEY`); a failure is logged (the run is its pod's)."""
    if not submitted.uid:
        return
    try:
        job.services.store.run_metadata.add(
            MetadataResourceType.PIPELINE_RUN, job.run.id, {JOB_UID_KEY: submitted.uid}
        )
    except WharfError as exc:
        logger.warning("Could not record the uid of orchestrator Job %s: %s", submitted.name, exc)


def _lost_job(exc: ApiException | HTTPError) -> str:
    """Why following the Job stopped, in one line (an API refusal carries headers and body)."""
    if isinstance(exc, ApiException):
        return str(api_error(exc, "follow the orchestrator Job"))
    return "lost the Job: " + " ".join(str(exc).split())


def _print_follow_hints(out: TextIO, run: PipelineRunRecord, submitted: SubmittedJob) -> None:
    out.write(
        f"Submitted run {run.name} as Kubernetes Job {submitted.namespace}/{submitted.name}. "
        f"Follow it with `wharf runs logs {run.name} --follow` or "
        f"`kubectl -n {submitted.namespace} logs -f job/{submitted.name}`.\n"
    )
    out.flush()
