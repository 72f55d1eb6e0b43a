"""Taking over a run from an orchestrator pod that died mid-run (its Job started another pod).

Owns :func:`take_over` (what the run's steps did, and which step Jobs are adoptable),
:func:`collect_left_jobs` (the step Jobs nobody adopts: their logs kept, then deleted; the
copies into the artifact store done by :class:`LeftLogs` while the run goes on) and
:func:`delete_predecessor_secrets` (the step-env Secrets the earlier pods' backends left, once
the resumed run ended; the Job would collect them anyway).

Invariants: a step run in flight is adopted only when its Job exists, is not being deleted and
has not finished (:func:`is_live`); the step backend then takes over that Job, never starting a
second one for one step run. Every other step Job of the run has its pods' log read, then is
deleted, and the log is stored at its step run's ``logs_uri`` (as the backend's cleanup would
have) by a thread of its own, through an outage of the artifact store for up to the run's
patience (``log_capture.store_step_log``), so the resumed run is never held up by the store
(its liveness is not at stake). A log still not stored when that wait ends, or when the run
ended that long ago (:meth:`LeftLogs.close`: the pod waits no longer), is lost with a warning
naming its step: never a traceback, never a failed run; a log that cannot be had from
Kubernetes is a warning too.
"""

from __future__ import annotations

import functools
import json
import logging
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from uuid import UUID

from kubernetes.client import ApiException, CoreV1Api

from wharf.artifacts.store import ArtifactStore
from wharf.execution.artifact_outages import through_artifact_outage
from wharf.execution.heartbeat import liveness_timeout_for
from wharf.execution.log_capture import ThroughOutage, once, store_step_log, write_log
from wharf.execution.run_heartbeat import orchestrator_process
from wharf.execution.run_lifecycle import IN_FLIGHT_STATUSES, Resumption, latest_step_runs
from wharf.execution.services import RunServices
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
    services: RunServices,
    run_id: UUID,
    resumed: Resumption,
) -> LeftLogs:
    """Keep the logs of the step Jobs of run ``run_id`` that this pod does not adopt (their
    step run ended, or they finished, while no orchestrator pod was alive), as the step
    backend's cleanup would have (unless a log is there already), then delete them
    (Background, as cleanup does). Pods still running are followed to their end first, all at
    once within one bounded wait (their step runs ended). The logs read are stored in the
    artifact store at their step run's ``logs_uri`` by the :class:`LeftLogs` returned
    (started), through an outage for up to the run's patience, while the run goes on: its
    liveness deadline is never at stake. Called once the run is taken over, before its steps
    go on; failures are logged, the run goes on."""
    store, logs = services.store, services.artifact_store
    kept = LeftLogs(
        logs,
        functools.partial(through_artifact_outage, services),
        liveness_timeout_for(services.heartbeat_interval),
    )
    try:
        left = left_jobs(step_jobs(clients, namespace, run_id), resumed.adoptable)
        if not left:
            return kept
        response: Any = clients.core.list_namespaced_pod(
            namespace,
            label_selector=f"{RUN_ID_KEY}={label_value(str(run_id))}",
            _preload_content=False,
        )
        pods = pods_by_job(json.loads(response.data).get("items") or [])
    except Exception:
        logger.warning("Could not list the step Jobs left by earlier pods.", exc_info=True)
        return kept
    records = {str(record.id): record for record in resumed.steps.values()}
    to_copy: dict[str, tuple[StepRunRecord, list[dict[str, Any]]]] = {}
    for step_run_id, job in left.items():
        name = str(job["metadata"]["name"])
        try:
            record = records.get(step_run_id) or store.steps.get(UUID(step_run_id))
            if record.logs_uri and not _stored(logs, record.logs_uri):
                to_copy[name] = (record, pods.get(name, []))
        except Exception:
            logger.warning("Could not keep the log of step Job %s.", name, exc_info=True)
    followed = _follow_running(clients.core, namespace, to_copy.values())
    for job in left.values():
        name = str(job["metadata"]["name"])
        if name in to_copy:
            record, of_job = to_copy[name]
            try:
                _copy_log(clients.core, namespace, kept, record, of_job, followed)
            except Exception:
                logger.warning("Could not keep the log of step Job %s.", name, exc_info=True)
        try:
            delete_job(clients.batch, name, namespace, "Background")
        except Exception:
            logger.warning("Could not delete the step Job %s.", name, exc_info=True)
    logger.info("Collected %d step Job(s) left by earlier pods.", len(left))
    return kept.start()


def _stored(logs: ArtifactStore, uri: str) -> bool:
    """Whether a log is at ``uri``; not known (the store unreachable, one try) counts as no:
    the copy, waiting through the outage, then writes it (again)."""
    try:
        return logs.exists(uri)
    except Exception as exc:
        logger.info("Could not tell whether %s is stored (%s): it is copied.", uri, exc)
        return False


class LeftLogs:
    """The logs of the step Jobs left by earlier pods (read from Kubernetes, their Jobs since
    deleted), stored by a daemon thread one after the other, each through an outage of the
    artifact store as ``through_outage`` waits one out (``log_capture.store_step_log``: a log
    that cannot be stored is a warning); :meth:`close` waits for them up to ``patience``."""

    def __init__(
        self, logs: ArtifactStore, through_outage: ThroughOutage = once, patience: float = 0.0
    ) -> None:
        self._logs = logs
        self._through_outage = through_outage
        self._patience = patience
        self._lock = threading.Lock()
        self._waiting: list[tuple[str, str, bytes]] = []
        """(step name, ``logs_uri``, text) of each log not stored yet."""
        self._thread: threading.Thread | None = None

    def add(self, name: str, uri: str, text: bytes) -> None:
        with self._lock:
            self._waiting.append((name, uri, text))

    def start(self) -> LeftLogs:
        """Start storing the logs added (if any); self."""
        with self._lock:
            if self._waiting and self._thread is None:
                self._thread = threading.Thread(
                    target=self._store_all, name="wharf-left-logs", daemon=True
                )
                self._thread.start()
        return self

    def _store_all(self) -> None:
        while True:
            with self._lock:
                if not self._waiting:
                    return
                name, uri, text = self._waiting[0]
            try:
                save = functools.partial(write_log, self._logs, uri, text)
                store_step_log(self._logs, uri, save, name, self._through_outage)
            except Exception as exc:  # never the run's: only this log is lost
                logger.warning("Step '%s': its log could not be stored: %s", name, exc)
            with self._lock:
                self._waiting.pop(0)

    def close(self) -> None:
        """The run ended: wait up to the patience for the logs still being stored; those that
        are not by then are lost (a warning naming their steps; the thread, a daemon, ends with
        the process)."""
        thread = self._thread
        if thread is not None:
            thread.join(self._patience)
        with self._lock:
            names = [name for name, _, _ in self._waiting]
        if names:
            logger.warning(
                "The log(s) of step(s) %s, left by earlier pods, could not be stored before the "
                "run ended (the artifact store could not be reached within %.0f s): they are lost.",
                ", ".join(f"'{n}'" for n in names),
                self._patience,
            )


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
    kept: LeftLogs,
    record: StepRunRecord,
    pods: Sequence[Mapping[str, Any]],
    followed: Mapping[str, PodLogFollower],
) -> None:
    """Read the log of ``pods`` (those running were ``followed``) and hand it to ``kept`` for
    ``record``'s ``logs_uri`` (no file when they printed nothing, as with cleanup)."""
    names = [pod_name(pod) for pod in pods]
    own = {name: followed[name] for name in names if name in followed}
    text = collect_pod_logs(core, namespace, names, own)
    if text and record.logs_uri:  # a silent step costs no file, as with cleanup
        kept.add(record.name, record.logs_uri, text)


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
