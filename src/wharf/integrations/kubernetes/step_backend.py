"""The Kubernetes step backend: each isolated attempt of a step runs as one Kubernetes Job.

Owns :class:`KubernetesStepBackend`, the launch interface (``wharf.execution.backends``) the
``kubernetes`` orchestrator (in its orchestrator pod) and step operator run steps through. The
outcome rules are ``step_backend_outcome``'s, the adoption check of a Job that exists
already ``step_backend_adopt``'s, the deletes ``step_backend_deletes``'s, the log
following ``step_backend_logs``'s, the credentials ``step_backend_secret``'s, and the record
of a submitted attempt and the settings merges ``step_backend_attempt``'s.

Invariants: a handle names the step run, Job and namespace only (no live object); the backend
keeps one record per submitted attempt until :meth:`~KubernetesStepBackend.cleanup`; an outcome,
once answered, does not change.
"""

from __future__ import annotations

import json
import math
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from uuid import UUID

from kubernetes.client import ApiException

from wharf.config.spec import StepSpec
from wharf.core.errors import InputError
from wharf.execution.backends import AttemptOutcome, StepLaunch
from wharf.execution.heartbeat import FINISH_ON_RUN_STOP_ENV
from wharf.execution.pinning import allocation_env
from wharf.execution.stop_deadline import STOP_GRACE_ENV
from wharf.integrations.kubernetes.allocation import REQUEST_ID_ANNOTATION
from wharf.integrations.kubernetes.clients import KubeClients, cluster_call
from wharf.integrations.kubernetes.labels import (
    STEP_KEY,
    STEP_RUN_ID_KEY,
    label_selector,
    label_value,
    resource_name,
)
from wharf.integrations.kubernetes.manifests import owner_reference, step_job_for
from wharf.integrations.kubernetes.pod_watch import ObjectWatch, job_name_of_pod, name_of
from wharf.integrations.kubernetes.step_backend_adopt import check_adoptable
from wharf.integrations.kubernetes.step_backend_attempt import (
    StepSettings,
    SubmittedAttempt,
    allocated,
    cancel_overdue,
    for_step,
    unreported_end_margin,
)
from wharf.integrations.kubernetes.step_backend_deletes import (
    delete_for_cancel,
    delete_job,
    delete_jobs_of_step_run,
    force_delete_pods,
    pod_ended,
    pod_name,
    pod_started,
)
from wharf.integrations.kubernetes.step_backend_events import CreateRefusals
from wharf.integrations.kubernetes.step_backend_logs import PodLogFollower, collect_pod_logs
from wharf.integrations.kubernetes.step_backend_outcome import attempt_outcome, being_deleted
from wharf.integrations.kubernetes.step_backend_secret import (
    StepEnvSecret,
    create_with_own_secret,
    job_secret_env,
    secret_wait_deadline,
)
from wharf.store.models import StepRunRecord

if TYPE_CHECKING:
    from wharf.execution.backends import Allocation

ENTRYPOINT = ["python", "-m", "wharf.integrations.kubernetes.step_main"]
BACKEND_KEY = "wharf.io/step-backend"
DEFAULT_PREFIX = "wharf"
CONFLICT = 409
STARTUP_REPORT_MARGIN_SECONDS = 30.0
"""How much longer than a step's ``pod_startup_timeout`` the engine's liveness check waits for
its first heartbeat: the backend fails a pod that never started at the timeout itself, saying
why, before the engine would call it a lost heartbeat."""


def job_name_for(settings: StepSettings, record: StepRunRecord) -> str:
    """The Job of an attempt: prefix, step name and the step run id (one Job per attempt)."""
    prefix = settings.job_name_prefix or DEFAULT_PREFIX
    return resource_name(prefix, record.name, record.id.hex[:12])


def job_placement(job: str, namespace: str) -> str:
    """Where an attempt run as Job ``job`` runs, as its progress line says it."""
    return f"as Kubernetes Job {job} (namespace {namespace})"


@dataclass(frozen=True)
class KubernetesHandle:
    step_run_id: UUID
    job_name: str
    namespace: str


class KubernetesStepBackend:
    """Runs each attempt as one Job whose pod runs the engine's step process
    (``python -m wharf.integrations.kubernetes.step_main ID NAMESPACE``: it keeps its own log
    when its pod is deleted).

    A Job is built from the backend's settings with the step's own entry layered over them
    (``step_settings``), the attempt's Wharf settings (credentials through a Secret: the
    backend's, owned by its owner, or without an owner the Job's own, which the Job owns) and
    the backend's labels plus the step and its step run id (annotations carry the full
    values). The API's answers are not decoded into models (the watches show the objects).

    Retries: the engine records every attempt and submits a new Job for each retry, so a step
    Job's ``backoffLimit`` is only ``backoff_limit_margin`` (restarts of the pod that the step
    never saw, e.g. a node lost before it started); a retry inside the Job would re-run an
    attempt the entry point already recorded.

    ``labels``/``annotations``: put on every Job and pod (e.g. the run's); ``owner``: an owner
    reference for the Jobs and the shared Secret (the orchestrator Job; without one, each Job
    gets a Secret of its own); ``watch_labels``: the selector of the watches (default:
    ``labels``, e.g. the run's, so that an orchestrator pod restarted for the same run sees the
    Jobs its predecessor started; without labels, this backend's own); ``close_when_idle``:
    :meth:`close` itself whenever its last attempt is cleaned up (for a step operator, whose
    backend nobody closes; the next submit starts again), rather than keeping its watches and
    Secret for the next step; ``finish_on_run_stop``: a graceful stop of the run lets its
    running step pods finish (the orchestrator's) rather than interrupting them at their next
    heartbeat."""

    def __init__(
        self,
        clients: KubeClients,
        settings: StepSettings,
        *,
        image: str,
        labels: Mapping[str, str],
        owner: Mapping[str, Any] | None = None,
        annotations: Mapping[str, str] | None = None,
        watch_labels: Mapping[str, str] | None = None,
        close_when_idle: bool = False,
        finish_on_run_stop: bool = False,
    ) -> None:
        self._clients = clients
        self._finish_on_run_stop = finish_on_run_stop
        self.settings = settings
        self.namespace = settings.namespace
        self.image = image
        self.startup_timeout_seconds: float | None = settings.pod_startup_timeout
        self.id = uuid.uuid4().hex[:12]
        self._labels = {**labels, BACKEND_KEY: self.id}
        self._annotations = dict(annotations or {})
        self._owner = owner
        watched = watch_labels or labels
        self._selector = label_selector(watched) if watched else f"{BACKEND_KEY}={self.id}"
        self._condition = threading.Condition()
        self._waiters: dict[str, set[threading.Event]] = {}  # job name -> its pollers' events
        self._pods, self._jobs, self._refusals = self._new_watches()
        core = clients.core
        prefix = settings.job_name_prefix or DEFAULT_PREFIX
        self._secret = StepEnvSecret(
            core,
            self.namespace,
            resource_name(prefix, "step-env", self.id),
            labels=self._labels,
            owner_references=[owner_reference(owner)] if owner is not None else None,
        )
        self._close_when_idle = close_when_idle
        self._lock = threading.Lock()  # starting and stopping the watches
        self._attempts: dict[KubernetesHandle, SubmittedAttempt] = {}  # under _condition
        self._by_job: dict[str, SubmittedAttempt] = {}  # the same attempts by Job name
        self._submitting = 0  # under _condition
        self._watching = False

    # -- the launch interface ------------------------------------------------------------------

    def submit(self, attempt: StepLaunch, allocation: Allocation | None) -> KubernetesHandle:
        """Create the attempt's Job. A Job that exists already for the same step run (same
        name, same step run id label) is adopted instead: a restarted orchestrator pod
        resubmitting a running step run does not start it twice."""
        with self._condition:
            self._submitting += 1  # not idle: its Secret must stay
        try:
            return self._submit(attempt, allocation)
        finally:
            with self._condition:
                self._submitting -= 1

    def _submit(self, attempt: StepLaunch, allocation: Allocation | None) -> KubernetesHandle:
        record = attempt.record
        self._ensure_watching()
        environment = dict(attempt.environment)
        settings = for_step(self.settings, attempt.spec)  # the step's own settings layered
        annotations = {**self._annotations, STEP_KEY: record.name, STEP_RUN_ID_KEY: str(record.id)}
        if allocation is not None:
            environment = allocation_env(environment, allocation)
            settings = allocated(settings, allocation)  # target settings, resources
            annotations[REQUEST_ID_ANNOTATION] = str(allocation.id)
        environment[STOP_GRACE_ENV] = str(settings.pod_stop_grace_period)  # a cancel's cut-off
        if self._finish_on_run_stop:
            environment[FINISH_ON_RUN_STOP_ENV] = "1"
        name = job_name_for(self.settings, record)
        with cluster_call(f"create the Job {name} of step {record.name} in {self.namespace}"):
            backoff_limit = self._create_job(attempt, settings, name, environment, annotations)
        handle = KubernetesHandle(record.id, name, self.namespace)
        with self._condition:
            self._attempts[handle] = self._by_job[name] = SubmittedAttempt(
                name,
                attempt.logs,
                record.logs_uri,
                step_name=record.name,
                logs_through_outage=attempt.logs_through_outage,
                backoff_limit=backoff_limit,
                waiting_reasons=tuple(settings.fail_on_container_waiting_reasons),
                startup_timeout=settings.pod_startup_timeout,
                startup_deadline=time.monotonic() + settings.pod_startup_timeout,
            )
        return handle

    def startup_timeout_for(self, spec: StepSpec) -> float | None:
        """The engine's allowance until the first heartbeat of an attempt of ``spec``: its own
        ``pod_startup_timeout`` (the step's settings layered) plus a margin in which this
        backend reports a pod that never started (``wharf.execution.backends``)."""
        try:
            timeout = for_step(self.settings, spec).pod_startup_timeout
        except InputError:  # the submit refuses the settings, naming them
            timeout = self.settings.pod_startup_timeout
        return timeout + STARTUP_REPORT_MARGIN_SECONDS

    def _create_job(
        self,
        attempt: StepLaunch,
        settings: StepSettings,
        name: str,
        environment: dict[str, str],
        annotations: dict[str, str],
    ) -> int:
        """Create the attempt's Job, or adopt it if it is there (the shared Secret's entries
        first; a Secret of its own after it); its ``backoffLimit``."""
        record = attempt.record
        if self._owner is None:  # nothing would collect a shared Secret: one per Job
            plain, secret_env, values = job_secret_env(name, environment)
        else:
            (plain, secret_env), values = self._secret.split(environment), {}
        labels = {
            **self._labels,
            STEP_KEY: label_value(record.name),
            STEP_RUN_ID_KEY: str(record.id),
        }
        manifest = step_job_for(
            settings,
            name=name,
            image=self.image,
            command=[*ENTRYPOINT, str(record.id), self.namespace],
            env=plain,
            secret_env=secret_env,
            labels=labels,
            annotations=annotations,
            max_retries=None,  # the engine retries: each attempt is a Job of its own
            owner=self._owner,
        )
        create: Any = self._clients.batch.create_namespaced_job  # a plain dict as the body

        def create_or_adopt() -> dict[str, Any]:
            try:  # the answer decoded only for the uid that owns the Job's own Secret
                data = create(self.namespace, manifest, _preload_content=False).data
            except ApiException as exc:
                if exc.status != CONFLICT:
                    raise
                return check_adoptable(self._clients.batch, self.namespace, name, record)
            return dict(json.loads(data)) if values else {}

        if values:  # the Job, then its Secret owned by it; a deadline bounds the wait for it
            own = settings.active_deadline_seconds
            waiting = secret_wait_deadline(settings.pod_startup_timeout, own)
            if waiting is not None:
                manifest["spec"]["activeDeadlineSeconds"] = waiting
            create_with_own_secret(
                self._clients,
                self.namespace,
                name,
                values,
                labels,
                create_or_adopt,
                awaiting_deadline=waiting is not None,
                own_deadline=own,
            )
        else:
            create_or_adopt()
        return int(manifest["spec"]["backoffLimit"])

    def poll(
        self, handles: Sequence[KubernetesHandle], timeout: float = 0.0
    ) -> Mapping[KubernetesHandle, AttemptOutcome]:
        """The outcomes known of ``handles``, waiting up to ``timeout``. Answered from the two
        shared watches (pods by Job, and Jobs), never one request per step; a poll wakes only
        on changes of its own attempts' Jobs and pods."""
        deadline = time.monotonic() + timeout
        wake = threading.Event()  # set on a change of one of these Jobs (or of any)
        names = {handle.job_name for handle in handles}
        with self._condition:
            for name in names:
                self._waiters.setdefault(name, set()).add(wake)
        try:
            while True:
                wake.clear()
                with self._condition:
                    self._check_watchable()
                    done = {}
                    for handle in handles:
                        outcome = self._outcome_of(handle)
                        if outcome is not None:
                            done[handle] = outcome
                    starts = [self._attempts[h].startup_deadline for h in handles]
                now = time.monotonic()
                left = deadline - now
                if done or left <= 0:
                    return done
                wake.wait(min([left, *(s - now for s in starts if s > now)]))
        finally:
            with self._condition:
                for name in names:
                    waiting = self._waiters.get(name)
                    if waiting is not None:
                        waiting.discard(wake)
                        if not waiting:
                            del self._waiters[name]

    def cancel(self, handle: KubernetesHandle, grace_seconds: float = 0.0) -> None:
        """Delete the Job in the foreground and its running pods with ``grace_seconds`` (at
        least one second), following their logs to their end. Pods that outlive the grace by
        ``UNREPORTED_END_MARGIN_SECONDS`` (:func:`unreported_end_margin`) sit on a node that no
        longer reports (lost): the attempt is then cancelled all the same and they are
        force-deleted at cleanup, their logs taken as followed so far."""
        with self._condition:
            attempt = self._attempts.get(handle)
            if attempt is None or attempt.outcome is not None:
                return  # cleaned up, or it ended: nothing to stop
            attempt.cancelled = True
            pods = [p for p in self._pods.objects(handle.job_name) if not pod_ended(p)]
            self._follow_logs(attempt, pods)
        # A pod deleted with grace 0 vanishes from the API before its process is stopped.
        grace = max(1, math.ceil(grace_seconds))
        with self._condition:
            attempt.cancel_deadline = time.monotonic() + grace + unreported_end_margin()
        batch, core = self._clients.batch, self._clients.core
        delete_for_cancel(batch, core, handle.job_name, handle.namespace, pods, grace)

    def cleanup(self, handle: KubernetesHandle) -> None:
        """Copy the pods' logs to the artifact store at the step's ``logs_uri`` (none for a
        silent step, as for an inline one) and delete the Job."""
        with self._condition:
            attempt = self._attempts.pop(handle)
            self._by_job.pop(handle.job_name, None)
            pods = self._pods.objects(handle.job_name)
            if attempt.logs_uri:  # e.g. a Job deleted from outside, its pod not stopped yet
                self._follow_logs(attempt, [p for p in pods if not pod_ended(p)])
        try:
            if attempt.logs_uri:
                names = [pod_name(p) for p in pods]
                core, lost = self._clients.core, cancel_overdue(attempt)
                text = collect_pod_logs(core, handle.namespace, names, attempt.followed, lost)
                if text:  # a silent step costs no file, as an inline one
                    attempt.store_log(text)
        finally:
            delete_job(self._clients.batch, handle.job_name, handle.namespace, "Background")
            if cancel_overdue(attempt):  # on a lost node: only a forced delete removes them
                stuck = self._pods.objects(handle.job_name)
                force_delete_pods(self._clients.core, handle.namespace, stuck)
            for watch in (self._pods, self._jobs, self._refusals.watch):
                watch.forget(handle.job_name)
            if self._close_when_idle:
                with self._condition:
                    idle = not self._attempts and not self._submitting
                if idle:
                    self.close()

    def stop_recorded(self, step: StepRunRecord) -> bool:
        """Delete the Jobs labelled with ``step``'s step run id."""
        return delete_jobs_of_step_run(self._clients.batch, self.namespace, step.id)

    # -- the rest ------------------------------------------------------------------------------

    def placement(self, spec: StepSpec, record: StepRunRecord) -> str:
        """Where the attempt of ``record`` runs, for its progress line
        (``wharf.execution.backends.DescribesPlacement``)."""
        return job_placement(job_name_for(self.settings, record), self.namespace)

    def close(self) -> None:
        """Stop watching and delete the Secret (the Jobs are the attempts' to clean up). A
        later submit starts again."""
        with self._lock:
            for watch in (self._pods, self._jobs, self._refusals.watch):
                watch.close()
            self._watching = False
        self._secret.delete()

    @property
    def watches(self) -> tuple[ObjectWatch, ObjectWatch]:
        """The (pods, jobs) watches, for those who count their requests."""
        return self._pods, self._jobs

    def _changed(self, job_name: str | None) -> None:
        """Under ``_condition`` (from a watch): decide the outcome of the attempt of
        ``job_name`` (None: of all) as soon as it is known, and wake its polls."""
        changed = self._by_job.values() if job_name is None else [self._by_job.get(job_name)]
        for attempt in changed:
            if attempt is not None:
                self._decide(attempt)
                deleting = [p for p in self._pods.objects(attempt.job_name) if being_deleted(p)]
                self._follow_logs(attempt, deleting)
        if job_name is None:
            for waiting in self._waiters.values():
                for wake in waiting:
                    wake.set()
        else:
            for wake in self._waiters.get(job_name, ()):
                wake.set()

    def _follow_logs(self, attempt: SubmittedAttempt, pods: Sequence[Mapping[str, Any]]) -> None:
        """Under ``_condition``: follow the logs of those of ``pods`` that have one and are not
        followed yet, so that they outlive the pods' deletion (by a cancel, or from outside:
        ``wharf runs stop --force``, an eviction, ``kubectl delete``)."""
        for pod in pods:
            name = pod_name(pod)
            if pod_started(pod) and name not in attempt.followed:
                follower = PodLogFollower(self._clients.core, self.namespace, name)
                attempt.followed[name] = follower.start()

    def _check_watchable(self) -> None:
        for watch in (self._pods, self._jobs):
            if watch.refused is not None:
                raise InputError(
                    f"Cannot watch the {watch.what} in namespace {self.namespace}: "
                    f"{watch.refused}. The identity Wharf uses here (the orchestrator pod's "
                    "service account, or your kubeconfig's user) needs list and watch on pods "
                    "and jobs."
                )

    def _ensure_watching(self) -> None:
        with self._lock:
            if not self._watching:
                if self._pods.closed:  # closed before: new watches, listing afresh
                    self._pods, self._jobs, self._refusals = self._new_watches()
                for watch in (self._pods, self._jobs, self._refusals.watch):
                    watch.start()
                self._watching = True

    def _new_watches(self) -> tuple[ObjectWatch, ObjectWatch, CreateRefusals]:
        """The (pods, Jobs) watches of this backend's selector and the Jobs' FailedCreate
        Events (not started)."""
        core, batch, ns = self._clients.core, self._clients.batch, self.namespace
        shared: dict[str, Any] = {"condition": self._condition, "on_change": self._changed}
        list_pods, list_jobs = core.list_namespaced_pod, batch.list_namespaced_job
        pods = ObjectWatch(
            list_pods, ns, self._selector, job_name_of_pod, what="step pods", **shared
        )
        jobs = ObjectWatch(list_jobs, ns, self._selector, name_of, what="step jobs", **shared)
        return pods, jobs, CreateRefusals(core, ns, **shared)

    def _outcome_of(self, handle: KubernetesHandle) -> AttemptOutcome | None:
        """Under ``_condition``: the attempt's outcome once it is known."""
        attempt = self._attempts.get(handle)
        if attempt is None:
            raise KeyError(f"{handle} was not submitted here or is cleaned up")
        return self._decide(attempt)

    def _decide(self, attempt: SubmittedAttempt) -> AttemptOutcome | None:
        """Under ``_condition``: decide the attempt's outcome from what the watches show now,
        once; then it is kept (a Job deleted after it ended, e.g. by its TTL, changes
        nothing)."""
        if attempt.outcome is None and self._pods.synced and self._jobs.synced:
            jobs = self._jobs.objects(attempt.job_name)
            job = jobs[-1] if jobs else None
            attempt.outcome = attempt_outcome(
                job,
                self._jobs.deleted(attempt.job_name),
                self._pods.objects(attempt.job_name),
                backoff_limit=attempt.backoff_limit,
                waiting_reasons=attempt.waiting_reasons,
                cancelled=attempt.cancelled,
                cancel_overdue=cancel_overdue(attempt),
                awaited_secret=None if self._owner else attempt.job_name,  # its own Secret
                create_refused=self._refusals.refusal(job),
                startup_timeout_passed=(
                    attempt.startup_timeout
                    if time.monotonic() >= attempt.startup_deadline
                    else None
                ),
            )
        return attempt.outcome
