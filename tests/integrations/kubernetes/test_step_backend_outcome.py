"""How a step Job's attempt ended, from Job and pod states as the API server reports them (pure):
the cases the emulator does not easily produce — deadlines, disruptions, OOM kills, init
containers, a Job condition ahead of its pods."""

from __future__ import annotations

from typing import Any

from wharf.execution.backends import AttemptOutcome, Ended
from wharf.integrations.kubernetes.step_backend_outcome import (
    attempt_outcome,
    describe_termination,
)

REASONS = ("ErrImagePull", "ImagePullBackOff", "CreateContainerConfigError")


def job(*conditions: tuple[str, str, str], deleting: bool = False) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "j"}
    if deleting:
        metadata["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {
        "metadata": metadata,
        "status": {
            "conditions": [
                {"type": kind, "status": "True", "reason": reason, "message": message}
                for kind, reason, message in conditions
            ]
        },
    }


def pod(
    phase: str,
    *,
    exit_code: int | None = None,
    reason: str | None = None,
    waiting: str | None = None,
    init_waiting: str | None = None,
    disrupted: bool = False,
    deleting: bool = False,
    name: str = "j-1",
) -> dict[str, Any]:
    state: dict[str, Any] = {}
    if exit_code is not None:
        state["terminated"] = {"exitCode": exit_code, **({"reason": reason} if reason else {})}
    if waiting is not None:
        state["waiting"] = {"reason": waiting, "message": "no such image"}
    status: dict[str, Any] = {
        "phase": phase,
        "containerStatuses": [{"name": "main", "image": "img:1", "state": state}],
    }
    if init_waiting is not None:
        status["initContainerStatuses"] = [
            {"name": "init", "state": {"waiting": {"reason": init_waiting}}}
        ]
    if disrupted:
        status["conditions"] = [{"type": "DisruptionTarget", "status": "True"}]
    metadata: dict[str, Any] = {"name": name, "creationTimestamp": "2026-01-01T00:00:00Z"}
    if deleting:
        metadata["deletionTimestamp"] = "2026-01-01T00:00:01Z"
    spec = {
        "containers": [{"name": "main", "image": "img:1"}],
        "initContainers": [{"name": "init", "image": "init-img:2"}],
    }
    return {"metadata": metadata, "spec": spec, "status": status}


def outcome(
    the_job: dict[str, Any] | None,
    pods: list[dict[str, Any]],
    *,
    deleted: bool = False,
    backoff_limit: int = 0,
    cancelled: bool = False,
) -> AttemptOutcome | None:
    return attempt_outcome(
        the_job,
        deleted,
        pods,
        backoff_limit=backoff_limit,
        waiting_reasons=REASONS,
        cancelled=cancelled,
    )


def test_a_running_or_unseen_attempt_has_no_outcome() -> None:
    assert outcome(None, []) is None
    assert outcome(job(), [pod("Pending")]) is None
    assert outcome(job(), [pod("Running")]) is None


def test_success_from_the_pod_or_the_job() -> None:
    done = AttemptOutcome(Ended.SUCCEEDED, "exited with code 0")
    assert outcome(job(), [pod("Succeeded", exit_code=0)]) == done
    assert outcome(job(("Complete", "", "")), []) == done


def test_failures_within_the_backoff_limit_wait_for_the_next_pod() -> None:
    first = pod("Failed", exit_code=1, name="j-1")
    assert outcome(job(), [first, pod("Running", name="j-2")], backoff_limit=1) is None
    second = pod("Failed", exit_code=4, name="j-2")
    assert outcome(job(), [first, second], backoff_limit=1) == AttemptOutcome(
        Ended.FAILED, "exited with code 4"
    )


def test_disruptions_and_deleted_pods_are_not_counted() -> None:
    assert outcome(job(), [pod("Failed", exit_code=143, disrupted=True)]) is None
    assert outcome(job(), [pod("Failed", exit_code=143, deleting=True)]) is None


def test_a_failed_job_waits_for_its_pods_to_be_seen_ended() -> None:
    failed = job(("Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit"))
    assert outcome(failed, [pod("Running")]) is None
    assert outcome(failed, [pod("Failed", exit_code=2, disrupted=True)]) == AttemptOutcome(
        Ended.FAILED, "exited with code 2"
    )


def test_a_deadline_names_the_jobs_reason() -> None:
    expired = job(("Failed", "DeadlineExceeded", "Job was active longer than specified deadline"))
    assert outcome(expired, []) == AttemptOutcome(
        Ended.FAILED,
        "failed: DeadlineExceeded (Job was active longer than specified deadline)",
    )


def test_a_deadline_that_killed_the_pod_is_named_with_the_pods_end() -> None:
    """The Job controller stops the pod at the deadline: its SIGTERM is not the cause."""
    expired = job(("Failed", "DeadlineExceeded", "Job was active longer than specified deadline"))
    killed = pod("Failed", exit_code=143, deleting=True)
    assert outcome(expired, [killed]) == AttemptOutcome(
        Ended.FAILED,
        "was stopped at its Job's active deadline (active_deadline_seconds; DeadlineExceeded: "
        "Job was active longer than specified deadline): it was killed by SIGTERM (exit code 143)",
    )


def test_waiting_reasons_fail_at_once_naming_the_image_of_that_container() -> None:
    pulled = outcome(job(), [pod("Pending", waiting="ErrImagePull")])
    assert pulled == AttemptOutcome(
        Ended.FAILED, 'could not start: ErrImagePull for image "img:1" (no such image)'
    )
    init = outcome(job(), [pod("Pending", init_waiting="CreateContainerConfigError")])
    assert init is not None
    assert init.detail == 'could not start: CreateContainerConfigError for image "init-img:2"'
    assert outcome(job(), [pod("Pending", waiting="ContainerCreating")]) is None


def test_a_pod_waiting_a_moment_for_its_job_s_own_secret_has_not_failed() -> None:
    """A step operator's Job is created before its Secret (owned by it from its create on): its
    pod may wait for that Secret a moment, as a kubelet waits for one (retried), which must not
    fail the step. A missing Secret of another name still fails it at once."""
    waiting = pod("Pending", waiting="CreateContainerConfigError")
    status = waiting["status"]["containerStatuses"][0]["state"]["waiting"]
    status["message"] = 'secret "wharf-train-0123" not found'

    def decided(awaited: str | None) -> AttemptOutcome | None:
        reasons = REASONS
        return attempt_outcome(
            job(),
            False,
            [waiting],
            backoff_limit=0,
            waiting_reasons=reasons,
            awaited_secret=awaited,
        )

    assert decided("wharf-train-0123") is None
    failed = decided("wharf-train-9999")
    assert failed is not None and failed.ended is Ended.FAILED, failed
    assert 'secret "wharf-train-0123" not found' in failed.detail
    assert decided(None) == failed


def test_a_job_whose_pod_the_api_refuses_fails_naming_the_refusal() -> None:
    """Only while the Job has no pod and has not ended (its FailedCreate Event says why)."""
    refusal = 'Error creating: pods "j-" is forbidden: serviceaccount "sa" not found'

    def decided(the_job: dict[str, Any], pods: list[dict[str, Any]]) -> AttemptOutcome | None:
        return attempt_outcome(
            the_job, False, pods, backoff_limit=0, waiting_reasons=REASONS, create_refused=refusal
        )

    assert decided(job(), []) == AttemptOutcome(
        Ended.FAILED, f"could not start: the API refused its pod ({refusal})"
    )
    assert decided(job(), [pod("Running")]) is None  # an earlier refusal, then its pod
    expired = job(("Failed", "DeadlineExceeded", "Job was active longer than specified deadline"))
    failed = decided(expired, [])
    assert failed is not None and "DeadlineExceeded" in failed.detail


def test_a_job_deleted_from_outside_is_lost_once_its_pods_ended() -> None:
    lost = AttemptOutcome(Ended.LOST, "was deleted from outside (its Job is gone)")
    assert outcome(None, [], deleted=True) == lost
    assert outcome(job(deleting=True), [pod("Running", deleting=True)]) is None
    assert outcome(job(deleting=True), [pod("Failed", exit_code=143, deleting=True)]) == lost


def test_a_cancelled_attempt_ends_cancelled_with_its_exit() -> None:
    assert outcome(job(deleting=True), [pod("Running")], cancelled=True) is None
    assert outcome(job(), [pod("Failed", exit_code=143)], cancelled=True) == AttemptOutcome(
        Ended.CANCELLED, "was killed by SIGTERM (exit code 143)"
    )
    assert outcome(None, [], deleted=True, cancelled=True) == AttemptOutcome(
        Ended.CANCELLED, "was cancelled before it ran"
    )


def test_terminations_read_as_phrases() -> None:
    assert describe_termination({"exitCode": 1, "reason": "Error"}) == "exited with code 1"
    assert (
        describe_termination({"exitCode": 137, "reason": "OOMKilled"})
        == "was killed by SIGKILL (exit code 137, OOMKilled)"
    )
    assert describe_termination({"exitCode": 255}) == "exited with code 255"
    assert (
        describe_termination({"exitCode": 3, "reason": "StartError"})
        == "exited with code 3 (StartError)"
    )


def unschedulable(the_pod: dict[str, Any]) -> dict[str, Any]:
    the_pod["status"]["conditions"] = [
        {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
        }
    ]
    the_pod["status"]["containerStatuses"] = []
    return the_pod


def started_by(timeout: float, pods: list[dict[str, Any]]) -> AttemptOutcome | None:
    return attempt_outcome(
        job(), False, pods, backoff_limit=0, waiting_reasons=REASONS, startup_timeout_passed=timeout
    )


def test_a_pod_that_never_started_within_its_startup_timeout_fails_saying_why() -> None:
    pending = unschedulable(pod("Pending"))
    assert outcome(job(), [pending]) is None  # the timeout has not passed
    ended = started_by(8, [pending])
    assert ended == AttemptOutcome(
        Ended.FAILED,
        "could not start within its pod_startup_timeout (8 s): its pod j-1 is Pending; "
        "Unschedulable (0/3 nodes are available: 3 Insufficient nvidia.com/gpu.)",
    )
    creating = pod("Pending", waiting="ContainerCreating")
    creating["spec"]["nodeName"] = "node-1"
    assert started_by(8, [creating]) == AttemptOutcome(
        Ended.FAILED,
        "could not start within its pod_startup_timeout (8 s): its pod j-1 is Pending; "
        "container main waiting: ContainerCreating (no such image)",
    )
    assert started_by(2.5, []) == AttemptOutcome(
        Ended.FAILED, "could not start within its pod_startup_timeout (2.5 s): its Job has no pod"
    )


def test_a_pod_that_started_is_not_failed_by_the_startup_timeout() -> None:
    running = pod("Running")
    running["status"]["containerStatuses"][0]["state"] = {"running": {}}
    assert started_by(8, [running]) is None
