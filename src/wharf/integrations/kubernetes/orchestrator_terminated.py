"""A SIGTERM that reaches the orchestrator pod outside its run loop, and what sent it.

Kubernetes stops a pod with SIGTERM (its deletion, its Job's deletion or active deadline, an
eviction or a drain). Inside the run loop that is a graceful stop
(:class:`~wharf.execution.signals.RunSignals`); before it (the pod still reads its run, its Job,
its stack) the default handler would end the process and leave the run as it was, with no reason.
Owns :class:`TerminationSignal`: while the pod is in it, such a SIGTERM raises
:class:`OrchestratorTerminated` in the main thread (once; a later one is taken and ignored), and
:func:`end_terminated_run`: the run ended failed with :func:`termination_reason`, naming what
stopped the pod when its own pod and Job say so.

Invariants: only a SIGTERM no run loop handles is taken (a
:class:`~wharf.integrations.kubernetes.orchestrator_sigterm.SigtermClaim`, given back on exit);
the Job's deadline hook (``orchestrator_deadline``), entered later, is asked first.
"""

from __future__ import annotations

import json
import logging
import signal
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from wharf.core.enums import ExecutionStatus
from wharf.execution.signals import RunSignals
from wharf.integrations.kubernetes.clients import KubeClients
from wharf.integrations.kubernetes.orchestrator_deadline import deadline_reason, job_deadline
from wharf.integrations.kubernetes.orchestrator_follow import read_job
from wharf.integrations.kubernetes.orchestrator_sigterm import SigtermClaim
from wharf.store.models import PipelineRunRecord
from wharf.store.ports import Store

logger = logging.getLogger("wharf.kubernetes.orchestrator")


class OrchestratorTerminated(BaseException):
    """The orchestrator pod got SIGTERM outside its run loop. A ``BaseException``, as
    ``KeyboardInterrupt``: no ``except Exception`` takes it for a failure of its own; its
    ``repr`` is its message (the run loop's failure reason shows it if it lands there)."""

    def __repr__(self) -> str:
        return str(self)


def _run_loop_handles_sigterm() -> bool:
    handler = signal.getsignal(signal.SIGTERM)
    return isinstance(getattr(handler, "__self__", None), RunSignals)


class TerminationSignal(SigtermClaim):
    """A context in which a SIGTERM that no run loop handles raises
    :class:`OrchestratorTerminated` in the main thread. :attr:`run_id`: the run the pod
    orchestrates, once it is known (the caller sets it), which the termination ends."""

    def __init__(self, run_id: UUID | None = None) -> None:
        super().__init__()
        self.run_id = run_id

    @property
    def received(self) -> bool:
        """Whether such a SIGTERM came (and raised)."""
        return self.taken

    def _claims(self) -> bool:
        return not _run_loop_handles_sigterm()

    def _error(self) -> BaseException:
        return OrchestratorTerminated("The orchestrator pod got SIGTERM")


def end_terminated_run(
    store: Store, clients: KubeClients, namespace: str, pod: str, run_id: UUID | None
) -> PipelineRunRecord | None:
    """End run ``run_id`` failed, its orchestrator pod ``pod`` terminated outside the run loop
    (:func:`termination_reason`; the run loop ends a run it started itself, and ending a
    finished run changes nothing); None when the pod had no run yet (another pod of its Job
    may create it)."""
    reason = termination_reason(clients, namespace, pod)
    logger.error("%s", reason)
    if run_id is None:
        return None
    return store.runs.finish(run_id, ExecutionStatus.FAILED, reason)


def termination_reason(clients: KubeClients, namespace: str, pod_name: str) -> str:
    """The failure reason of a run whose orchestrator pod ``pod_name`` got SIGTERM before its
    run loop: what sent it, as the pod and its Job show it (read now), when they do."""
    cause = _cause(clients, namespace, pod_name)
    if isinstance(cause, _Deadline):  # the Job's deadline, said as the run loop says it
        return cause.reason
    pod = f"The orchestrator pod {namespace}/{pod_name}" if pod_name else "The orchestrator pod"
    said = (
        f"Kubernetes stopped it: {cause}"
        if cause
        else "what sent the signal is not known (the pod was not being deleted)"
    )
    return f"{pod} was terminated (SIGTERM) before it ran the run's steps; {said}."


@dataclass(frozen=True)
class _Deadline:
    reason: str


def _cause(clients: KubeClients, namespace: str, pod_name: str) -> str | _Deadline | None:
    if not pod_name:
        return None
    try:
        response: Any = clients.core.read_namespaced_pod(
            pod_name, namespace, _preload_content=False
        )
        pod: dict[str, Any] = json.loads(response.data)
        disruption = _disruption(pod)
        if disruption is not None:
            return disruption
        if not (pod.get("metadata") or {}).get("deletionTimestamp"):
            return None
        job_name = _job_name(pod)
        job = read_job(clients, namespace, job_name) if job_name else None
    except Exception as exc:  # the reason is still given, without its cause
        logger.warning("Cannot tell what terminated this pod: %s", exc)
        return None
    if job_name and job is None:
        return f"its Job {job_name} was deleted"
    if job is not None:
        if (job.get("metadata") or {}).get("deletionTimestamp"):
            return f"its Job {job_name} is being deleted"
        deadline = job_deadline(job)
        if deadline is not None and datetime.now(UTC) >= deadline:
            return _Deadline(deadline_reason(job))
    return f"its pod {pod_name} was deleted"


def _disruption(pod: Mapping[str, Any]) -> str | None:
    """The pod's ``DisruptionTarget`` condition (eviction, preemption, a taint), if set."""
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "DisruptionTarget" and condition.get("status") == "True":
            reason = condition.get("reason") or "DisruptionTarget"
            message = condition.get("message")
            return f"{reason}" + (f" ({message})" if message else "")
    return None


def _job_name(pod: Mapping[str, Any]) -> str | None:
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("kind") == "Job" and ref.get("controller"):
            name = ref.get("name")
            return str(name) if name else None
    return None
