"""The Job controller (batch/v1) of the emulator, modelled on a 1.2x kube-controller-manager.

``JobController.sync(job, now)`` reconciles one Job from the store's current state: it creates
pods from ``spec.template`` (``generateName: <job>-``, template labels/annotations, a controller
ownerReference), accounts each pod's end exactly once (Succeeded, Failed, or removed while
running), applies ``podFailurePolicy`` (FailJob / Ignore / Count, first matching rule wins),
``backoffLimit`` (the job fails when ``failed > backoffLimit``, or for restartPolicy OnFailure
when its active pods' container restarts reach it), ``activeDeadlineSeconds``,
``spec.suspend`` and ``completions``/``parallelism``, and writes ``status`` only when it
changes. ``expire(job, now)`` is the TTL-after-finished controller (Foreground deletion).

Replacement pods after a counted failure wait ``backoff_seconds * 2**(n-1)`` (capped at 60x)
after the n-th failure since the last success: a real controller uses 10 s; the emulator
defaults to 0 (replace at once) so tests never wait; with a positive value and a FakeClock the
replacement is created by the tick at or after that time, with the SystemClock in real time.

Invariants: a pod's end is counted once (``_Tracking.counted`` per job uid, kept in memory for
the emulator's lifetime); pods deleted by the controller itself are marked counted before the
delete, so their DELETED event changes nothing; a finished Job never gets new pods.

Events (when given a recorder): SuccessfulCreate/SuccessfulDelete per pod, Completed,
BackoffLimitExceeded/DeadlineExceeded/PodFailurePolicy (Warning), Suspended/Resumed, and
FailedCreate (Warning, ``Error creating: <the API's refusal>``) when a pod cannot be created (e.g.
its service account is missing: ``admission``); the create is retried at every sync, and the
event recorded once per Job and refusal (a real recorder aggregates repeats into one Event).

Not modelled: Indexed completion mode and backoffLimitPerIndex, the pods' job-tracking
finalizer and ``status.uncountedTerminatedPods`` bookkeeping (always ``{}``), ``status.terminating``,
and the wait for pods to terminate before ``Failed`` follows ``FailureTarget`` (both are
written together).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING, Any

from tests.kube.emulator.clock import rfc3339
from tests.kube.emulator.controllers_common import (
    condition_true,
    controller_reference,
    is_controlled_by,
    is_deleting,
    job_finish_time,
    job_finished,
    log,
    meta,
    new_condition,
    pod_phase,
    pod_terminal,
    timestamp,
    tolerate_missing,
    uid_of,
)
from tests.kube.emulator.controllers_events import NORMAL, WARNING, EventRecorder
from tests.kube.emulator.controllers_pod_failure import as_removed, failure_policy_action
from tests.kube.emulator.errors import ApiError
from tests.kube.emulator.resources import JOBS, PODS

if TYPE_CHECKING:
    from tests.kube.emulator.store import ObjectStore

DEFAULT_BACKOFF_LIMIT = 6
MAX_BACKOFF_FACTOR = 60  # 10 s base -> at most 10 min, as a real controller caps it

BACKOFF_MESSAGE = "Job has reached the specified backoff limit"
DEADLINE_MESSAGE = "Job was active longer than specified deadline"


@dataclass
class _Tracking:
    """What the controller remembers about one Job between syncs."""

    counted: set[str] = field(default_factory=set)  # pod uids whose end is accounted for
    vanished: dict[str, dict[str, Any]] = field(default_factory=dict)  # removed before counted
    last_failure: datetime | None = None
    failures_since_success: int = 0
    create_refusals: set[str] = field(default_factory=set)  # FailedCreate messages recorded


@dataclass
class _Counts:
    succeeded: int
    failed: int
    fail_job_message: str | None = None


class JobController:
    """Creates and accounts the pods of every Job in the store."""

    def __init__(
        self,
        store: ObjectStore,
        *,
        backoff_seconds: float = 0.0,
        events: EventRecorder | None = None,
    ) -> None:
        self._store = store
        self._events = events
        self._backoff_seconds = backoff_seconds
        self._tracking: dict[str, _Tracking] = {}

    # ---- events ---------------------------------------------------------------------------

    def pod_event(self, event_type: str, pod: dict[str, Any], now: datetime) -> None:
        """A pod changed: sync the Job controlling it (if any still exists)."""
        job = self._controlling_job(pod)
        if job is None:
            return
        if event_type == "DELETED":
            tracking = self._tracking.setdefault(uid_of(job), _Tracking())
            if uid_of(pod) not in tracking.counted:
                tracking.vanished[uid_of(pod)] = pod
        self.sync(job, now)

    def job_deleted(self, job: dict[str, Any]) -> None:
        self._tracking.pop(uid_of(job), None)

    def tick(self, now: datetime) -> None:
        """Time-based work: deadlines, delayed replacements, TTL expiry."""
        for job in self._store.list(JOBS, None)["items"]:
            if job_finished(job):
                self.expire(job, now)
            else:
                self.sync(job, now)

    # ---- TTL-after-finished -----------------------------------------------------------------

    def expire(self, job: dict[str, Any], now: datetime) -> None:
        """Delete a finished Job whose ``ttlSecondsAfterFinished`` has passed.

        As the real TTL-after-finished controller: Foreground propagation (the Job goes once its
        pods are gone) with a uid precondition (a recreated Job of the same name is spared).
        """
        ttl = (job.get("spec") or {}).get("ttlSecondsAfterFinished")
        finished_at = job_finish_time(job)
        if ttl is None or finished_at is None or is_deleting(job):
            return
        if now >= finished_at + timedelta(seconds=int(ttl)):
            tolerate_missing(
                partial(
                    self._store.delete,
                    JOBS,
                    meta(job).get("namespace"),
                    meta(job)["name"],
                    propagation_policy="Foreground",
                    preconditions={"uid": uid_of(job)},
                )
            )

    # ---- the reconcile loop ------------------------------------------------------------------

    def sync(self, job: dict[str, Any], now: datetime) -> None:
        """Bring one Job's pods and status in line with its spec (idempotent).

        ``job`` may be a stale snapshot (an event's object): the current one is read first.
        """
        current = self._reload(job)
        if current is None or is_deleting(current):
            return
        job = current
        tracking = self._tracking.setdefault(uid_of(job), _Tracking())
        pods = self._pods_of(job)
        if job_finished(job):
            self._delete_active(job, pods, tracking)
            tracking.vanished.clear()
            self.expire(job, now)
            return
        spec = job.get("spec") or {}
        old_status = job.get("status") or {}
        status = copy.deepcopy(old_status)
        counts = self._account(job, pods, tracking, now)
        active = [p for p in pods if _is_active(p, tracking)]
        terminating = [p for p in pods if _is_terminating(p, tracking)]

        failure = self._failure(job, counts, active, now)
        conditions = list(status.get("conditions") or [])
        if failure is not None:
            reason, message = failure
            counts.failed += len(active)
            self._delete_active(job, active, tracking)
            active = []
            if reason == "PodFailurePolicy":
                conditions.append(
                    new_condition("FailureTarget", now, reason=reason, message=message)
                )
            conditions.append(new_condition("Failed", now, reason=reason, message=message))
            self._record(job, WARNING, reason, message)
        elif _completed(spec, counts.succeeded, len(active)):
            self._delete_active(job, active, tracking)
            active = []
            conditions.append(new_condition("Complete", now))
            status["completionTime"] = rfc3339(now)
            self._record(job, NORMAL, "Completed", "Job completed")
        elif spec.get("suspend"):
            self._delete_active(job, active, tracking)
            active = []
            if not condition_true(job, "Suspended"):
                conditions = _set_suspended(conditions, now, suspended=True)
                self._record(job, NORMAL, "Suspended", "Job suspended")
        else:
            if condition_true(job, "Suspended"):
                conditions = _set_suspended(conditions, now, suspended=False)
                status["startTime"] = rfc3339(now)
                self._record(job, NORMAL, "Resumed", "Job resumed")
            status.setdefault("startTime", rfc3339(now))
            wanted = _wanted_active(spec, counts.succeeded) - len(active) - len(terminating)
            if wanted > 0 and self._backoff_elapsed(tracking, now):
                active += self._create_pods(job, wanted, tracking)

        status["conditions"] = conditions
        if not conditions:
            del status["conditions"]
        _set_count(status, "active", len(active))
        _set_count(status, "succeeded", counts.succeeded)
        _set_count(status, "failed", counts.failed)
        status["ready"] = sum(1 for p in active if condition_true(p, "Ready"))
        status.setdefault("uncountedTerminatedPods", {})
        if status != old_status:
            self._write_status(job, status)

    # ---- accounting --------------------------------------------------------------------------

    def _account(
        self, job: dict[str, Any], pods: list[dict[str, Any]], tracking: _Tracking, now: datetime
    ) -> _Counts:
        """Count every pod end not yet counted; returns the new totals."""
        status = job.get("status") or {}
        counts = _Counts(int(status.get("succeeded") or 0), int(status.get("failed") or 0))
        policy = (job.get("spec") or {}).get("podFailurePolicy")
        ended: list[dict[str, Any]] = []
        for pod in pods:
            if uid_of(pod) in tracking.counted:
                continue
            if pod_terminal(pod) or (policy is None and is_deleting(pod)):
                ended.append(pod)
        for pod in tracking.vanished.values():
            if uid_of(pod) not in tracking.counted:
                ended.append(as_removed(pod, policy is not None))
        tracking.vanished.clear()
        for pod in ended:
            tracking.counted.add(uid_of(pod))
            if pod_phase(pod) == "Succeeded":
                counts.succeeded += 1
                tracking.failures_since_success = 0
                continue
            action, message = failure_policy_action(policy, pod)
            if action == "Ignore":
                continue
            counts.failed += 1
            tracking.failures_since_success += 1
            tracking.last_failure = now
            if action == "FailJob" and counts.fail_job_message is None:
                counts.fail_job_message = message
        return counts

    def _failure(
        self, job: dict[str, Any], counts: _Counts, active: list[dict[str, Any]], now: datetime
    ) -> tuple[str, str] | None:
        """``(reason, message)`` when the Job has failed, else None."""
        spec = job.get("spec") or {}
        if counts.fail_job_message is not None:
            return "PodFailurePolicy", counts.fail_job_message
        limit = spec.get("backoffLimit")
        limit = DEFAULT_BACKOFF_LIMIT if limit is None else int(limit)
        if counts.failed > limit or _past_backoff_limit_on_failure(spec, active, limit):
            return "BackoffLimitExceeded", BACKOFF_MESSAGE
        deadline = spec.get("activeDeadlineSeconds")
        started = timestamp(job, "status", "startTime")
        if (
            deadline is not None
            and started is not None
            and not spec.get("suspend")
            and now - started >= timedelta(seconds=int(deadline))
        ):
            return "DeadlineExceeded", DEADLINE_MESSAGE
        return None

    def _backoff_elapsed(self, tracking: _Tracking, now: datetime) -> bool:
        if self._backoff_seconds <= 0 or tracking.failures_since_success == 0:
            return True
        assert tracking.last_failure is not None
        factor = min(2 ** (tracking.failures_since_success - 1), MAX_BACKOFF_FACTOR)
        return now >= tracking.last_failure + timedelta(seconds=self._backoff_seconds * factor)

    # ---- writes ------------------------------------------------------------------------------

    def _create_pods(
        self, job: dict[str, Any], count: int, tracking: _Tracking
    ) -> list[dict[str, Any]]:
        created = []
        ns = meta(job).get("namespace")
        for _ in range(count):
            try:
                pod = self._store.create(PODS, ns, _pod_from_template(job), internal=True)
            except ApiError as err:
                log.info("job %s/%s: pod not created: %s", ns, meta(job)["name"], err)
                if err.message not in tracking.create_refusals:
                    tracking.create_refusals.add(err.message)
                    self._record(job, WARNING, "FailedCreate", f"Error creating: {err.message}")
                break
            created.append(pod)
            self._record(job, NORMAL, "SuccessfulCreate", f"Created pod: {meta(pod)['name']}")
        return created

    def _delete_active(
        self, job: dict[str, Any], pods: list[dict[str, Any]], tracking: _Tracking
    ) -> None:
        ns = meta(job).get("namespace")
        for pod in pods:
            if pod_terminal(pod) or is_deleting(pod):
                continue
            tracking.counted.add(uid_of(pod))
            name = meta(pod)["name"]
            if tolerate_missing(partial(self._store.delete, PODS, ns, name)) is not None:
                self._record(job, NORMAL, "SuccessfulDelete", f"Deleted pod: {name}")

    def _record(self, job: dict[str, Any], event_type: str, reason: str, message: str) -> None:
        if self._events is not None:
            self._events.record(job, JOBS, event_type, reason, message)

    def _write_status(self, job: dict[str, Any], status: dict[str, Any]) -> None:
        uid = uid_of(job)

        def mutate(current: dict[str, Any]) -> None:
            if uid_of(current) == uid:
                current["status"] = copy.deepcopy(status)

        ns, name = meta(job).get("namespace"), meta(job)["name"]
        tolerate_missing(lambda: self._store.update_internal(JOBS, ns, name, mutate))

    # ---- reads -------------------------------------------------------------------------------

    def _pods_of(self, job: dict[str, Any]) -> list[dict[str, Any]]:
        uid = uid_of(job)
        mine = self._store.matching(
            PODS, meta(job).get("namespace"), partial(is_controlled_by, owner_uid=uid)
        )
        return sorted(mine, key=lambda p: (meta(p).get("creationTimestamp", ""), meta(p)["name"]))

    def _reload(self, job: dict[str, Any]) -> dict[str, Any] | None:
        try:
            current = self._store.get(JOBS, meta(job).get("namespace"), meta(job)["name"])
        except ApiError:
            return None
        return current if uid_of(current) == uid_of(job) else None

    def _controlling_job(self, pod: dict[str, Any]) -> dict[str, Any] | None:
        for ref in meta(pod).get("ownerReferences") or []:
            if ref.get("controller") and ref.get("kind") == "Job":
                try:
                    job = self._store.get(JOBS, meta(pod).get("namespace"), ref["name"])
                except ApiError:
                    return None
                return job if uid_of(job) == ref.get("uid") else None
        return None


# ---- pure helpers ------------------------------------------------------------------------------


def _is_active(pod: dict[str, Any], tracking: _Tracking) -> bool:
    return not pod_terminal(pod) and not is_deleting(pod) and uid_of(pod) not in tracking.counted


def _is_terminating(pod: dict[str, Any], tracking: _Tracking) -> bool:
    """Being deleted, end not yet counted (a Job with a podFailurePolicy waits for these)."""
    return not pod_terminal(pod) and is_deleting(pod) and uid_of(pod) not in tracking.counted


def _past_backoff_limit_on_failure(
    spec: dict[str, Any], active: list[dict[str, Any]], limit: int
) -> bool:
    """restartPolicy OnFailure: the kubelet restarts containers in place, so the controller
    counts the restarts of its active pods against backoffLimit (``>=``, or any when it is 0)."""
    template_spec = (spec.get("template") or {}).get("spec") or {}
    if template_spec.get("restartPolicy") != "OnFailure":
        return False
    restarts = sum(
        int(container.get("restartCount") or 0)
        for pod in active
        for key in ("initContainerStatuses", "containerStatuses")
        for container in (pod.get("status") or {}).get(key) or []
    )
    return restarts > 0 if limit == 0 else restarts >= limit


def _completed(spec: dict[str, Any], succeeded: int, active: int) -> bool:
    completions = spec.get("completions")
    if completions is None:
        return succeeded > 0 and active == 0
    return succeeded >= int(completions)


def _wanted_active(spec: dict[str, Any], succeeded: int) -> int:
    parallelism = spec.get("parallelism")
    parallelism = 1 if parallelism is None else int(parallelism)
    completions = spec.get("completions")
    if completions is None:
        return parallelism if succeeded == 0 else 0
    return max(0, min(parallelism, int(completions) - succeeded))


def _set_count(status: dict[str, Any], key: str, value: int) -> None:
    """active/succeeded/failed are omitted when zero (omitempty), as a real server shows them."""
    if value:
        status[key] = value
    else:
        status.pop(key, None)


def _set_suspended(
    conditions: list[dict[str, Any]], now: datetime, *, suspended: bool
) -> list[dict[str, Any]]:
    others = [c for c in conditions if c.get("type") != "Suspended"]
    if suspended:
        cond = new_condition("Suspended", now, reason="JobSuspended", message="Job suspended")
    else:
        cond = new_condition(
            "Suspended", now, status="False", reason="JobResumed", message="Job resumed"
        )
    return [*others, cond]


def _pod_from_template(job: dict[str, Any]) -> dict[str, Any]:
    """The pod a Job creates: its template, ``generateName: <job>-``, a controller reference."""
    template = copy.deepcopy((job.get("spec") or {}).get("template") or {})
    template_meta = template.get("metadata") or {}
    name = meta(job)["name"]
    labels = dict(template_meta.get("labels") or {})
    labels.setdefault("controller-uid", uid_of(job))
    labels.setdefault("job-name", name)
    pod_meta: dict[str, Any] = {
        "generateName": f"{name}-",
        "labels": labels,
        "ownerReferences": [controller_reference(job, JOBS)],
    }
    for key in ("annotations", "finalizers"):
        if template_meta.get(key):
            pod_meta[key] = template_meta[key]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": template.get("spec")}
