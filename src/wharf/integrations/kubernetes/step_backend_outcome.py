"""How a step Job's attempt ended, read from the Job and its pods as the API server reports them.

Owns :func:`attempt_outcome` (the rules) and the shared :func:`being_deleted` predicate.

Invariant: pure; it looks at plain dicts (the watch's latest states) and answers None while the
attempt is still going.
"""

from __future__ import annotations

import signal
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from wharf.execution.backends import NOT_STARTED, AttemptOutcome, Ended

KubeObject = dict[str, Any]
MAIN_CONTAINER = "main"
TERMINAL_PHASES = ("Succeeded", "Failed")
PLAIN_TERMINATION_REASONS = ("Completed", "Error", "", None)
DEADLINE_REASON = "DeadlineExceeded"
"""The reason of a Job's ``Failed`` condition once its ``activeDeadlineSeconds`` passed."""


def attempt_outcome(
    job: KubeObject | None,
    job_deleted: bool,
    pods: Sequence[KubeObject],
    *,
    backoff_limit: int,
    waiting_reasons: Collection[str],
    cancelled: bool = False,
    cancel_overdue: bool = False,
    awaited_secret: str | None = None,
    create_refused: str | None = None,
    startup_timeout_passed: float | None = None,
) -> AttemptOutcome | None:
    """How the attempt of ``job`` (None: not seen) ended, or None while it runs. ``pods``: the
    Job's pods, oldest first. ``cancel_overdue``: it was cancelled and its pods should have
    ended by now. ``awaited_secret``: the Job's own Secret, created right after the Job (its
    pod may wait for it a moment: that wait is not a failure). ``create_refused``: why the API
    refuses the Job's pod (its ``FailedCreate`` Event). ``startup_timeout_passed``: the
    ``pod_startup_timeout`` (s), once that long passed since the submit. Rules, in order:

    - the Job's ``Complete`` condition, or any of its pods ``Succeeded``: succeeded;
    - the Job's ``Failed`` condition (backoff limit, active deadline, pod failure policy) once
      its pods are seen ended, or more counted pod failures than ``backoff_limit`` (a failure
      under a ``DisruptionTarget`` condition is not counted, nor a pod killed because it was
      deleted): failed, with the last exit code ("exited with code 2", "was killed by SIGKILL
      (exit code 137, OOMKilled)");
    - a container of its newest pod waiting for one of ``waiting_reasons`` (an image that
      cannot be pulled, a missing secret other than ``awaited_secret``): failed at once,
      naming the reason and the image;
    - the Job without any pod and its pod refused by the API (``create_refused``): failed at
      once, naming the refusal;
    - ``startup_timeout_passed`` and no container of its pods ever started: failed, naming the
      timeout and why its newest pod waits (unschedulable, a container's waiting reason);
    - the Job deleted by someone else (gone, or being deleted and its pods ended): lost.

    After a cancel: cancelled once the Job is gone or its pods ended, or once the cancel is
    overdue (the pods' node no longer reports, and only the pod garbage collector would remove
    them)."""
    if cancelled:
        return _cancelled(job, job_deleted, pods, cancel_overdue)
    conditions = _true_conditions(job)
    if "Complete" in conditions or any(_phase(p) == "Succeeded" for p in pods):
        return AttemptOutcome(Ended.SUCCEEDED, "exited with code 0")
    failed = [p for p in pods if _phase(p) == "Failed"]
    ended_pods = all(_phase(p) in TERMINAL_PHASES for p in pods)
    if "Failed" in conditions and ended_pods:  # (the pods' watch may be a little behind)
        return AttemptOutcome(Ended.FAILED, _failure_detail(failed, conditions["Failed"]))
    counted = [p for p in failed if _failed_by_itself(p)]
    if len(counted) > backoff_limit:
        return AttemptOutcome(Ended.FAILED, _failure_detail(counted, None))
    if pods and _phase(pods[-1]) not in TERMINAL_PHASES:
        stuck = _waiting_for(pods[-1], waiting_reasons, awaited_secret)
        if stuck is not None:
            return AttemptOutcome(Ended.FAILED, stuck)
    if create_refused is not None and job is not None and not pods and not conditions:
        return AttemptOutcome(
            Ended.FAILED, f"{NOT_STARTED}: the API refused its pod ({create_refused})"
        )
    if startup_timeout_passed is not None and not any(map(_container_started, pods)):
        return AttemptOutcome(Ended.FAILED, not_started_detail(pods, startup_timeout_passed))
    if job_deleted or (being_deleted(job) and ended_pods):
        return AttemptOutcome(Ended.LOST, "was deleted from outside (its Job is gone)")
    return None


def not_started_detail(pods: Sequence[KubeObject], timeout: float) -> str:
    """Why an attempt whose pods never ran a container within ``timeout`` (its
    ``pod_startup_timeout``) did not start, as an outcome's detail: the newest pod's phase, its
    scheduling refusal and its containers' waiting reasons, as far as they are known."""
    what = f"{NOT_STARTED} within its pod_startup_timeout ({timeout:g} s)"
    if not pods:
        return f"{what}: its Job has no pod"
    pod = pods[-1]
    status = pod.get("status") or {}
    name = (pod.get("metadata") or {}).get("name")
    why = [f"its pod {name} is {status.get('phase') or 'Pending'}"]
    scheduled = next(
        (c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"), None
    )
    if scheduled is not None and scheduled.get("status") == "False":
        reason, message = scheduled.get("reason") or "not scheduled", scheduled.get("message")
        why.append(f"{reason}" + (f" ({message})" if message else ""))
    elif not (pod.get("spec") or {}).get("nodeName"):
        why.append("not scheduled to a node")
    for container in [
        *(status.get("initContainerStatuses") or []),
        *(status.get("containerStatuses") or []),
    ]:
        waiting = (container.get("state") or {}).get("waiting") or {}
        if waiting.get("reason"):
            message = waiting.get("message")
            why.append(
                f"container {container.get('name')} waiting: {waiting['reason']}"
                + (f" ({message})" if message else "")
            )
    return f"{what}: " + "; ".join(why)


def _container_started(pod: KubeObject) -> bool:
    """Whether a container of the pod has run (is running or ended)."""
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return any({"running", "terminated"} & set(s.get("state") or {}) for s in statuses)


def _failed_by_itself(pod: KubeObject) -> bool:
    """A failure the Job counts: not a disruption, not a pod killed because it was deleted."""
    return "DisruptionTarget" not in _true_conditions(pod) and not being_deleted(pod)


def being_deleted(obj: Mapping[str, Any] | None) -> bool:
    """Whether the object (a Job or a pod) is being deleted: it has a deletionTimestamp."""
    return obj is not None and bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def describe_termination(terminated: KubeObject) -> str:
    """A container's end as a phrase: "exited with code 1", "was killed by SIGTERM (exit code
    143)", with the runtime's reason when it says more than "Error"."""
    code = int(terminated.get("exitCode", 0))
    reason = terminated.get("reason")
    extra = "" if reason in PLAIN_TERMINATION_REASONS else f", {reason}"
    if code > 128:
        try:
            name = signal.Signals(code - 128).name
        except ValueError:
            name = None
        if name is not None:
            return f"was killed by {name} (exit code {code}{extra})"
    return f"exited with code {code}" + (f" ({reason})" if extra else "")


def main_termination(pod: KubeObject) -> KubeObject | None:
    """The ``terminated`` state of the pod's main container (else its first), if it ended."""
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    ordered = sorted(statuses, key=lambda s: s.get("name") != MAIN_CONTAINER)
    for status in ordered:
        terminated = (status.get("state") or {}).get("terminated")
        if terminated:
            return dict(terminated)
    return None


def _cancelled(
    job: KubeObject | None, job_deleted: bool, pods: Sequence[KubeObject], overdue: bool
) -> AttemptOutcome | None:
    ended_pods = bool(pods) and all(_phase(p) in TERMINAL_PHASES for p in pods)
    finished = bool(_true_conditions(job).keys() & {"Complete", "Failed"})
    if not (job_deleted or ended_pods or finished or overdue):
        return None
    if overdue and not (job_deleted or ended_pods or finished):
        running = [p for p in pods if _phase(p) not in TERMINAL_PHASES]
        names = ", ".join(str((p.get("metadata") or {}).get("name")) for p in running)
        what = f"its pod {names}" if names else "its Job"
        return AttemptOutcome(
            Ended.CANCELLED,
            f"was cancelled, and {what} did not end within its grace period "
            "(its node does not report: lost?)",
        )
    for pod in reversed(pods):
        terminated = main_termination(pod)
        if terminated is not None:
            return AttemptOutcome(Ended.CANCELLED, describe_termination(terminated))
    return AttemptOutcome(Ended.CANCELLED, "was cancelled before it ran")


def _failure_detail(failed: Sequence[KubeObject], condition: KubeObject | None) -> str:
    """The last failed pod's end; a Job that failed at its active deadline says so first (the
    pod's SIGTERM came from the Job controller, not from the step)."""
    for pod in reversed(failed):
        terminated = main_termination(pod)
        if terminated is not None:
            if condition is not None and condition.get("reason") == DEADLINE_REASON:
                return f"{_at_deadline(condition)}: it {describe_termination(terminated)}"
            return describe_termination(terminated)
    if condition is not None:
        reason, message = condition.get("reason") or "Failed", condition.get("message")
        return f"failed: {reason}" + (f" ({message})" if message else "")
    status = (failed[-1].get("status") or {}) if failed else {}
    reason = status.get("reason") or "the pod failed"
    return f"failed: {reason}" + (f" ({status['message']})" if status.get("message") else "")


def _at_deadline(condition: KubeObject) -> str:
    message = condition.get("message")
    why = f"{DEADLINE_REASON}: {message}" if message else DEADLINE_REASON
    return f"was stopped at its Job's active deadline (active_deadline_seconds; {why})"


def _waiting_for(
    pod: KubeObject, reasons: Collection[str], awaited_secret: str | None
) -> str | None:
    status = pod.get("status") or {}
    images = {
        c.get("name"): c.get("image")
        for c in [
            *((pod.get("spec") or {}).get("initContainers") or []),
            *((pod.get("spec") or {}).get("containers") or []),
        ]
    }
    for container in [
        *(status.get("initContainerStatuses") or []),
        *(status.get("containerStatuses") or []),
    ]:
        waiting = (container.get("state") or {}).get("waiting") or {}
        reason = waiting.get("reason")
        if reason in reasons and not _awaits(waiting, awaited_secret):
            image = images.get(container.get("name")) or container.get("image")
            message = waiting.get("message")
            return f'could not start: {reason} for image "{image}"' + (
                f" ({message})" if message else ""
            )
    return None


def _awaits(waiting: KubeObject, secret: str | None) -> bool:
    """Whether a container waits only for ``secret`` to be created (a kubelet's
    ``CreateContainerConfigError``: ``secret "NAME" not found``, retried until it exists)."""
    return (
        secret is not None
        and waiting.get("reason") == "CreateContainerConfigError"
        and f'secret "{secret}" not found' in str(waiting.get("message") or "")
    )


def _phase(pod: KubeObject) -> str | None:
    phase = (pod.get("status") or {}).get("phase")
    return None if phase is None else str(phase)


def _true_conditions(obj: KubeObject | None) -> dict[str, KubeObject]:
    if obj is None:
        return {}
    conditions = (obj.get("status") or {}).get("conditions") or []
    return {str(c.get("type")): c for c in conditions if c.get("status") == "True"}
