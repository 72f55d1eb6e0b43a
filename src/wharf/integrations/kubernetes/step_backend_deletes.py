"""Removing a step attempt's Kubernetes objects, for the Kubernetes step backend.

Owns the deletes of a cancel (:func:`delete_for_cancel`), a cleanup (:func:`delete_job`), pods on
a lost node (:func:`force_delete_pods`) and ``stop_recorded`` (:func:`delete_jobs_of_step_run`).

Invariants: every delete tolerates an object already gone (404) and reads no object back (the
answer is not decoded into models).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any
from uuid import UUID

from kubernetes.client import ApiException, BatchV1Api, CoreV1Api

from wharf.integrations.kubernetes.clients import cluster_call
from wharf.integrations.kubernetes.labels import STEP_RUN_ID_KEY

NOT_FOUND = 404

KubeObject = Mapping[str, Any]


def deleted(call: Callable[[], Any]) -> bool:
    """Run a delete (answered undecoded); False when the object was already gone."""
    try:
        response = call()
    except ApiException as exc:
        if exc.status == NOT_FOUND:
            return False
        raise
    getattr(response, "data", None)  # read to its end: the connection goes back to the pool
    return True


def delete_job(
    batch: BatchV1Api, name: str, namespace: str, propagation: str, grace: int | None = None
) -> bool:
    """Delete the Job ``name`` (its pods by ``propagation``); False if it was gone."""
    options: dict[str, Any] = {"propagation_policy": propagation, "_preload_content": False}
    if grace is not None:
        options["grace_period_seconds"] = grace
    return deleted(lambda: batch.delete_namespaced_job(name, namespace, **options))


def delete_pod(core: CoreV1Api, name: str, namespace: str, grace: int) -> bool:
    return deleted(
        lambda: core.delete_namespaced_pod(
            name, namespace, grace_period_seconds=grace, _preload_content=False
        )
    )


def delete_for_cancel(
    batch: BatchV1Api,
    core: CoreV1Api,
    job_name: str,
    namespace: str,
    running_pods: Iterable[KubeObject],
    grace: int,
) -> None:
    """End an attempt: its Job deleted in the foreground and its ``running_pods`` with
    ``grace`` (the garbage collector would give the pods their own grace; the caller's
    applies; a pod not seen yet has not started: the collector's deletion is soon enough)."""
    delete_job(batch, job_name, namespace, "Foreground", grace)
    for pod in running_pods:
        delete_pod(core, pod_name(pod), namespace, grace)


def force_delete_pods(core: CoreV1Api, namespace: str, pods: Iterable[KubeObject]) -> None:
    """Delete those of ``pods`` that did not end, at once (``--force``: no kubelet will confirm
    their end), so that neither they nor their Job linger terminating."""
    for pod in pods:
        if not pod_ended(pod):
            delete_pod(core, pod_name(pod), namespace, 0)


def delete_jobs_of_step_run(batch: BatchV1Api, namespace: str, step_run_id: UUID) -> bool:
    """Delete (foreground) the Jobs labelled with ``step_run_id``; whether any was deleted.
    A refusal or an unreachable API server is one :class:`WharfError` line (a user's
    ``wharf runs stop --force`` meets it)."""
    with cluster_call(f"delete the Jobs of step run {step_run_id} in {namespace}"):
        response: Any = batch.list_namespaced_job(
            namespace, label_selector=f"{STEP_RUN_ID_KEY}={step_run_id}", _preload_content=False
        )
        stopped = False
        for job in json.loads(response.data).get("items") or []:
            stopped |= delete_job(batch, str(job["metadata"]["name"]), namespace, "Foreground")
    return stopped


def pod_name(pod: KubeObject) -> str:
    return str(pod["metadata"]["name"])


def pod_started(pod: KubeObject) -> bool:
    """Whether a container of the pod has started (so it has a log to follow)."""
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return any({"running", "terminated"} & set(s.get("state") or {}) for s in statuses)


def pod_ended(pod: KubeObject) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
