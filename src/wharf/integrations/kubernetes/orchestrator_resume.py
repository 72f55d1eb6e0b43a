"""Taking over a run from an orchestrator pod that died mid-run (its Job started another pod).

Owns :func:`take_over` (what the run's steps did, and which step Jobs are adoptable) and
:func:`delete_predecessor_secrets` (the step-env Secrets the earlier pods' backends left, once
the resumed run ended; the Job would collect them anyway).

Invariant: a step run in flight is adopted only when its Job exists, is not being deleted and
has not finished (:func:`is_live`); the step backend then takes over that Job, never starting a
second one for one step run.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any
from uuid import UUID

from kubernetes.client import ApiException

from wharf.execution.run_heartbeat import orchestrator_process
from wharf.execution.run_lifecycle import IN_FLIGHT_STATUSES, Resumption, latest_step_runs
from wharf.integrations.kubernetes.clients import KubeClients
from wharf.integrations.kubernetes.labels import RUN_ID_KEY, STEP_RUN_ID_KEY, label_value
from wharf.integrations.kubernetes.step_backend import BACKEND_KEY
from wharf.integrations.kubernetes.step_backend_outcome import being_deleted
from wharf.store.models import PipelineRunRecord
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
