"""Following a run's orchestrator Job from the submitting side (``synchronous`` runs), and
seeing from outside that its pod will never start the run (:func:`unstartable_job`, for
``wharf runs logs --follow`` of an asynchronous run; :func:`never_starts`).

Owns :func:`follow_job` and the reads it is built on (:func:`read_job`, :func:`job_pods`,
:func:`stream_pod_log`).

Invariants: it never waits on a fixed sleep (a change is seen at once, a missed one within the
monitoring interval); each pod's log is copied once, oldest pod first; the Job's disappearance
ends the following (the run's record then says how it ended).
"""

from __future__ import annotations

import codecs
import json
import math
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from kubernetes.client import ApiException
from urllib3.exceptions import HTTPError

from wharf.integrations.kubernetes.clients import KubeClients, cluster_call
from wharf.integrations.kubernetes.step_backend_outcome import (
    describe_termination,
    main_termination,
)

LOG_CHUNK = 4096
WATCH_CONNECT_TIMEOUT = 10.0
WATCH_READ_SLACK = 10.0
STARTED_PHASES = frozenset({"Running", "Succeeded", "Failed"})


@dataclass(frozen=True)
class JobEnd:
    succeeded: bool
    detail: str
    """How the Job ended, as a phrase ("completed", "failed: BackoffLimitExceeded ...")."""
    stuck: bool = False
    """The Job has not ended, but its pod cannot start (a configured waiting reason, e.g. an
    image that cannot be pulled): it would wait forever."""


def stuck_container(pod: dict[str, Any], reasons: Collection[str]) -> str | None:
    """Why ``pod`` cannot start — a container waiting for one of ``reasons`` — as a phrase
    naming the container's image and the reason; None if it is not so stuck."""
    status = pod.get("status") or {}
    spec = pod.get("spec") or {}
    images = {
        c.get("name"): c.get("image")
        for c in (spec.get("initContainers") or []) + (spec.get("containers") or [])
    }
    for container in (status.get("initContainerStatuses") or []) + (
        status.get("containerStatuses") or []
    ):
        waiting = (container.get("state") or {}).get("waiting") or {}
        reason = waiting.get("reason")
        if reason in reasons:
            message = waiting.get("message")
            image = container.get("image") or images.get(container.get("name")) or "?"
            return f"image '{image}': {reason}" + (f": {message}" if message else "")
    return None


def cannot_start(pod: dict[str, Any], reasons: Collection[str]) -> str | None:
    """Why the Job's ``pod`` cannot start (:func:`stuck_container`), as a phrase following
    "The orchestrator Job NAMESPACE/NAME"; None if it is not so stuck."""
    stuck = stuck_container(pod, reasons)
    if stuck is None:
        return None
    return f"cannot start its pod {pod['metadata']['name']} ({stuck})"


def never_starts(
    job: dict[str, Any], pods: list[dict[str, Any]], reasons: Collection[str]
) -> str | None:
    """Why the orchestrator Job ``job`` (with its ``pods``) will never start a run that no pod
    has taken over, as :func:`cannot_start` words it (a pod stuck on one of ``reasons``) or as
    :func:`job_end` words a failed Job; None while it may still."""
    for pod in pods:
        stuck = cannot_start(pod, reasons)
        if stuck is not None:
            return stuck
    end = job_end(job, pods)
    if end is not None and not end.succeeded:
        return end.detail
    return None


def unstartable_job(
    clients: KubeClients,
    namespace: str,
    name: str,
    reasons: Collection[str],
    uid: str | None = None,
) -> str | None:
    """:func:`never_starts` for the orchestrator Job ``name`` as the API has it now, as a
    sentence naming the Job ("The orchestrator Job NAMESPACE/NAME cannot start its pod ...");
    None while it may still start the run. A Job that does not exist was deleted if its
    create answered (``uid``: the uid the run recorded then), else may not be created yet.
    A cluster that cannot be read is one :class:`WharfError` line."""
    with cluster_call(f"read the orchestrator Job {namespace}/{name}"):
        job = read_job(clients, namespace, name)
        if job is None:
            if not uid:
                return None
            return (
                f"The orchestrator Job {namespace}/{name} was deleted before its pod took the "
                "run over"
            )
        pods = job_pods(clients, namespace, name)
    detail = never_starts(job, pods, reasons)
    return None if detail is None else f"The orchestrator Job {namespace}/{name} {detail}"


def job_end(job: dict[str, Any], pods: Sequence[dict[str, Any]] = ()) -> JobEnd | None:
    """How ``job`` (as the API returns it) ended; None while it has not. A failed Job's
    phrase also says how the last of its ``pods`` (oldest first) that ended did ("failed:
    BackoffLimitExceeded; its last pod P was killed by SIGKILL (exit code 137, OOMKilled)"):
    the Job's reason alone does not say why its pods failed."""
    for condition in job.get("status", {}).get("conditions") or []:
        if condition.get("status") != "True":
            continue
        if condition.get("type") == "Complete":
            return JobEnd(True, "completed")
        if condition.get("type") == "Failed":
            reason = condition.get("reason") or "failed"
            message = condition.get("message")
            detail = f"failed: {reason}" + (f" ({message})" if message else "")
            return JobEnd(False, detail + _last_pod_end(pods))
    return None


def _last_pod_end(pods: Sequence[dict[str, Any]]) -> str:
    for pod in reversed(pods):
        terminated = main_termination(pod)
        if terminated is not None:
            name = (pod.get("metadata") or {}).get("name")
            return f"; its last pod {name} {describe_termination(terminated)}"
    return ""


def read_job(clients: KubeClients, namespace: str, name: str) -> dict[str, Any] | None:
    """The Job as the API returns it (plain dict); None when it does not exist."""
    try:
        response: Any = clients.batch.read_namespaced_job(name, namespace, _preload_content=False)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
    job: dict[str, Any] = json.loads(response.data)
    return job


def job_pods(clients: KubeClients, namespace: str, job_name: str) -> list[dict[str, Any]]:
    """The pods of the Job, oldest first (by creation time, then name)."""
    response: Any = clients.core.list_namespaced_pod(
        namespace, label_selector=f"job-name={job_name}", _preload_content=False
    )
    pods: list[dict[str, Any]] = json.loads(response.data)["items"]
    return sorted(
        pods,
        key=lambda p: (p["metadata"].get("creationTimestamp") or "", p["metadata"]["name"]),
    )


def follow_job(
    clients: KubeClients,
    namespace: str,
    name: str,
    out: TextIO,
    *,
    interval: float,
    fail_on_waiting_reasons: Collection[str] = (),
    on_wait: Callable[[], None] | None = None,
) -> JobEnd:
    """Wait for the Job ``name`` to finish, copying its pods' logs to ``out``; how it ended,
    or that it is stuck: a pod's container waits for one of ``fail_on_waiting_reasons`` (e.g.
    an image pull error, which would otherwise keep it waiting forever). The log of each pod
    (one per attempt of the Job) is copied as the pod runs. Between pods it waits on a watch
    of the Job (``resourceVersion`` from the last read) that ends on the Job's next change or
    after ``interval``; a watch the server refuses (410 Gone, a dropped stream) only ends that
    wait. ``on_wait``: called before each wait (tests observe progress through it)."""
    streamed: set[str] = set()
    while True:
        job = read_job(clients, namespace, name)
        if job is None:
            return JobEnd(False, f"the Job {namespace}/{name} was deleted")
        progressed = False
        pods = job_pods(clients, namespace, name)
        for pod in pods:
            pod_name = pod["metadata"]["name"]
            stuck = cannot_start(pod, fail_on_waiting_reasons)
            if stuck is not None:
                return JobEnd(False, stuck, stuck=True)
            if pod_name in streamed or pod.get("status", {}).get("phase") not in STARTED_PHASES:
                continue
            if stream_pod_log(clients, namespace, pod_name, out):
                streamed.add(pod_name)
                progressed = True
        end = job_end(job, pods)
        if end is not None:
            return end
        if not progressed:
            if on_wait is not None:
                on_wait()
            _wait_for_change(clients, namespace, name, job, interval)


def stream_pod_log(clients: KubeClients, namespace: str, pod: str, out: TextIO) -> bool:
    """Copy the pod's log to ``out`` until its container ends; False if the log cannot be
    read (yet: a container still waiting)."""
    try:
        response: Any = clients.core.read_namespaced_pod_log(
            pod, namespace, follow=True, _preload_content=False
        )
    except ApiException as exc:
        if exc.status in (400, 404):
            return False
        raise
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    try:
        for chunk in response.stream(LOG_CHUNK, decode_content=True):
            text = decoder.decode(chunk)
            if text:
                out.write(text)
                out.flush()
        tail = decoder.decode(b"", final=True)
        if tail:
            out.write(tail)
            out.flush()
    finally:
        response.release_conn()
    return True


def _wait_for_change(
    clients: KubeClients, namespace: str, name: str, job: dict[str, Any], interval: float
) -> None:
    """Until the Job's next change (the first byte of the next watch event, an error event
    included), for at most about ``interval`` seconds; a dropped stream ends the wait too."""
    version = job.get("metadata", {}).get("resourceVersion")
    seconds = max(1, math.ceil(interval))
    try:
        response: Any = clients.batch.list_namespaced_job(
            namespace,
            field_selector=f"metadata.name={name}",
            watch=True,
            resource_version=version,
            timeout_seconds=seconds,
            _preload_content=False,
            _request_timeout=(WATCH_CONNECT_TIMEOUT, seconds + WATCH_READ_SLACK),
        )
    except ApiException as exc:
        if exc.status == 410:
            return
        raise
    try:
        for _ in response.stream(1):
            return
    except HTTPError:  # dropped or timed out: the caller reads the Job again
        return
    finally:
        response.release_conn()
