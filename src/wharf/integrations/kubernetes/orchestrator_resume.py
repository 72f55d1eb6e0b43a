"""Taking over a run from an orchestrator pod that died mid-run (its Job started another pod).

Owns :func:`take_over` (what the run's steps did, and which step Jobs are adoptable),
:func:`collect_left_jobs` (the step Jobs nobody adopts: their logs copied, then deleted) and
:func:`delete_predecessor_secrets` (the step-env Secrets the earlier pods' backends left, once
the resumed run ended; the Job would collect them anyway).

Invariants: a step run in flight is adopted only when its Job exists, is not being deleted and
has not finished (:func:`is_live`); the step backend then takes over that Job, never starting a
second one for one step run. Every other step Job of the run has its pods' log copied to its
step run's ``logs_uri`` (as the backend's cleanup would have) and is deleted; a log that cannot
be had is a warning, never a failed run.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from uuid import UUID

from kubernetes.client import ApiException, CoreV1Api

from wharf.artifacts.store import ArtifactStore
from wharf.execution.log_capture import write_log
from wharf.execution.run_heartbeat import orchestrator_process
from wharf.execution.run_lifecycle import IN_FLIGHT_STATUSES, Resumption, latest_step_runs
from wharf.integrations.kubernetes.clients import KubeClients
from wharf.integrations.kubernetes.labels import RUN_ID_KEY, STEP_RUN_ID_KEY, label_value
from wharf.integrations.kubernetes.pod_watch import job_name_of_pod
from wharf.integrations.kubernetes.step_backend import BACKEND_KEY
from wharf.integrations.kubernetes.step_backend_deletes import (
    delete_job,
    pod_ended,
    pod_name,
    pod_started,
)
from wharf.integrations.kubernetes.step_backend_logs import (
    FOLLOW_WAIT_SECONDS,
    PodLogFollower,
    collect_pod_logs,
)
from wharf.integrations.kubernetes.step_backend_outcome import being_deleted
from wharf.store.models import PipelineRunRecord, StepRunRecord
from wharf.store.ports import Store

logger = logging.getLogger("wharf.kubernetes.orchestrator")

NOT_FOUND = 404


def take_over(
    store: Store,
    clients: KubeClients,
    namespace: str,
    run: PipelineRunRecord,
    heartbeat_interval: float,
) -> Resumption:
    """Claim ``run`` for this process and say what its steps did.

    Every pod of an orchestrator Job runs the run with the same orchestrator run id, so a pod
    that finds its run running with that id resumes it here: it first claims the run's
    liveness record (a beat naming this pod's process, before any sweep could judge the run
    lost with the dead pod), then lists the run's step Jobs by the run's label, then reads the
    run's step runs (after the Jobs: a Job seen finished whose step run is still running
    afterwards lost its process). The run loop submits adoptable step runs again; the engine
    ends any other step run in flight as lost, does not run finished steps again and launches
    the rest as usual."""
    store.runs.update_heartbeat(run.id, orchestrator_process(heartbeat_interval))
    jobs = step_jobs(clients, namespace, run.id)  # before the step runs: see the docstring
    steps = latest_step_runs(store, run.id)
    adoptable = frozenset(
        record.id
        for record in steps.values()
        if record.status in IN_FLIGHT_STATUSES and is_live(jobs.get(str(record.id)))
    )
    in_flight = [r.name for r in steps.values() if r.status in IN_FLIGHT_STATUSES]
    logger.info(
        "Resuming run %s: %d step(s) started before, %d in flight, %d of them adopted.",
        run.name,
        len(steps),
        len(in_flight),
        len(adoptable),
    )
    return Resumption(steps, adoptable)


def step_jobs(clients: KubeClients, namespace: str, run_id: UUID) -> dict[str, dict[str, Any]]:
    """The step Jobs of run ``run_id`` (one list call), by the step run id on their label."""
    response: Any = clients.batch.list_namespaced_job(
        namespace,
        label_selector=f"{RUN_ID_KEY}={label_value(str(run_id))}",
        _preload_content=False,
    )
    jobs: dict[str, dict[str, Any]] = {}
    for job in json.loads(response.data).get("items") or []:
        step_run_id = (job["metadata"].get("labels") or {}).get(STEP_RUN_ID_KEY)
        if step_run_id:
            jobs[step_run_id] = job
    return jobs


def is_live(job: Mapping[str, Any] | None) -> bool:
    """Whether ``job`` exists, is not being deleted and has not finished."""
    if job is None or being_deleted(job):
        return False
    conditions = (job.get("status") or {}).get("conditions") or []
    return not any(
        c.get("type") in ("Complete", "Failed") and c.get("status") == "True" for c in conditions
    )


def collect_left_jobs(
    clients: KubeClients,
    namespace: str,
    store: Store,
    logs: ArtifactStore,
    run_id: UUID,
    resumed: Resumption,
) -> None:
    """Copy the logs of the step Jobs of run ``run_id`` that this pod does not adopt (their
    step run ended, or they finished, while no orchestrator pod was alive) to the artifact
    store ``logs`` at their step run's ``logs_uri``, as the step backend's cleanup would have
    (unless a log is there already), then delete them (Background, as cleanup does). Pods
    still running are followed to their end first, all at once within one bounded wait (their
    step runs ended), so the run's liveness deadline is never at stake. Called
    once the run is taken over, before its steps go on; failures are logged, the run goes on."""
    try:
        left = left_jobs(step_jobs(clients, namespace, run_id), resumed.adoptable)
        if not left:
            return
        response: Any = clients.core.list_namespaced_pod(
            namespace,
            label_selector=f"{RUN_ID_KEY}={label_value(str(run_id))}",
            _preload_content=False,
        )
        pods = pods_by_job(json.loads(response.data).get("items") or [])
    except Exception:
        logger.warning("Could not list the step Jobs left by earlier pods.", exc_info=True)
        return
    records = {str(record.id): record for record in resumed.steps.values()}
    to_copy: dict[str, tuple[StepRunRecord, list[dict[str, Any]]]] = {}
    for step_run_id, job in left.items():
        name = str(job["metadata"]["name"])
        try:
            record = records.get(step_run_id) or store.steps.get(UUID(step_run_id))
            if record.logs_uri and not logs.exists(record.logs_uri):
                to_copy[name] = (record, pods.get(name, []))
        except Exception:
            logger.warning("Could not keep the log of step Job %s.", name, exc_info=True)
    followed = _follow_running(clients.core, namespace, to_copy.values())
    for job in left.values():
        name = str(job["metadata"]["name"])
        if name in to_copy:
            record, of_job = to_copy[name]
            try:
                _copy_log(clients.core, namespace, logs, record, of_job, followed)
            except Exception:
                logger.warning("Could not keep the log of step Job %s.", name, exc_info=True)
        try:
            delete_job(clients.batch, name, namespace, "Background")
        except Exception:
            logger.warning("Could not delete the step Job %s.", name, exc_info=True)
    logger.info("Collected %d step Job(s) left by earlier pods.", len(left))


def left_jobs(
    jobs: Mapping[str, Mapping[str, Any]], adoptable: frozenset[UUID]
) -> dict[str, Mapping[str, Any]]:
    """Those of ``jobs`` (by step run id) that are neither adopted nor being deleted."""
    adopted = {str(step_run_id) for step_run_id in adoptable}
    return {
        step_run_id: job
        for step_run_id, job in jobs.items()
        if step_run_id not in adopted and not being_deleted(job)
    }


def pods_by_job(pods: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """``pods`` by the name of their Job, oldest first (pods of no Job are left out)."""
    by_job: dict[str, list[dict[str, Any]]] = {}
    for pod in pods:
        job = job_name_of_pod(pod)
        if job is not None:
            by_job.setdefault(job, []).append(pod)
    for of_job in by_job.values():
        of_job.sort(key=lambda p: (str(p["metadata"].get("creationTimestamp", "")), pod_name(p)))
    return by_job


def _follow_running(
    core: CoreV1Api,
    namespace: str,
    jobs: Iterable[tuple[StepRunRecord, Sequence[Mapping[str, Any]]]],
) -> dict[str, PodLogFollower]:
    """Follow the log of every pod of ``jobs`` still running, all at once, and wait for them
    to end, all within one :data:`FOLLOW_WAIT_SECONDS` (their step runs ended, so the wait is
    for processes exiting; a pod that takes longer is cut short)."""
    followed = {
        pod_name(pod): PodLogFollower(core, namespace, pod_name(pod)).start()
        for _, pods in jobs
        for pod in pods
        if pod_started(pod) and not pod_ended(pod)
    }
    deadline = time.monotonic() + FOLLOW_WAIT_SECONDS
    for follower in followed.values():
        follower.result(max(0.0, deadline - time.monotonic()))
    return followed


def _copy_log(
    core: CoreV1Api,
    namespace: str,
    logs: ArtifactStore,
    record: StepRunRecord,
    pods: Sequence[Mapping[str, Any]],
    followed: Mapping[str, PodLogFollower],
) -> None:
    """Write the log of ``pods`` (those running were ``followed``) to ``record``'s
    ``logs_uri`` (no file when they printed nothing, as with cleanup)."""
    names = [pod_name(pod) for pod in pods]
    own = {name: followed[name] for name in names if name in followed}
    text = collect_pod_logs(core, namespace, names, own)
    if text and record.logs_uri:  # a silent step costs no file, as with cleanup
        write_log(logs, record.logs_uri, text)


def delete_predecessor_secrets(
    clients: KubeClients, namespace: str, run_id: UUID, own_backend_id: str
) -> None:
    """Delete the step-env Secrets of run ``run_id`` made by other backends than this pod's
    (those of its dead predecessors); failures are logged (the Job collects them anyway)."""
    core = clients.core
    try:
        response: Any = core.list_namespaced_secret(
            namespace,
            label_selector=f"{RUN_ID_KEY}={label_value(str(run_id))},{BACKEND_KEY}",
            _preload_content=False,
        )
        for secret in json.loads(response.data).get("items") or []:
            metadata = secret["metadata"]
            if (metadata.get("labels") or {}).get(BACKEND_KEY) == own_backend_id:
                continue
            try:
                core.delete_namespaced_secret(metadata["name"], namespace)
            except ApiException as exc:
                if exc.status != NOT_FOUND:
                    raise
    except Exception:
        logger.warning("Could not delete the step Secrets of earlier pods.", exc_info=True)
