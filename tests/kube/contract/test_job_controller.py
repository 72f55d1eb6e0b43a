"""The Job controller and garbage collector (emulator only: a bare kube-apiserver has neither).

These tests play the kubelet's part by patching pod status; time-based behaviour (deadlines, TTL)
runs on an emulator with a fake clock (``clocked_target``), moved with ``Target.advance``.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.kube.contract.conftest import MERGE_PATCH, Target

pytestmark = pytest.mark.emulator_only(
    reason="Jobs create pods only with a controller manager (kube-controller-manager)"
)


def _pods_of(target: Target, job: str) -> list[dict[str, Any]]:
    listed = target.raw(
        target.core.list_namespaced_pod, target.namespace, label_selector=f"job-name={job}"
    )
    return sorted(listed["items"], key=lambda p: p["metadata"]["creationTimestamp"])


def _wait_pods(target: Target, job: str, count: int) -> list[dict[str, Any]]:
    return target.wait_for(
        lambda: (pods := _pods_of(target, job)) and len(pods) >= count and pods,
        what=f"{count} pod(s) of job {job}",
    )


def _wait_new_pod(target: Target, job: str, known: list[dict[str, Any]]) -> dict[str, Any]:
    """The job's pod that is none of ``known`` (pods created in one second sort in any order)."""
    known_uids = {p["metadata"]["uid"] for p in known}
    fresh = target.wait_for(
        lambda: [p for p in _pods_of(target, job) if p["metadata"]["uid"] not in known_uids],
        what=f"a new pod of job {job}",
    )
    assert len(fresh) == 1, fresh
    return fresh[0]


def _end_pod(
    target: Target,
    pod: str,
    phase: str,
    exit_code: int,
    conditions: list[dict[str, Any]] | None = None,
) -> None:
    state = {
        "terminated": {"exitCode": exit_code, "reason": "Completed" if exit_code == 0 else "Error"}
    }
    status: dict[str, Any] = {
        "phase": phase,
        "containerStatuses": [
            {"name": "main", "ready": False, "restartCount": 0, "image": "busybox:1.36",
             "imageID": "", "state": state}
        ],
    }  # fmt: skip
    if conditions:
        status["conditions"] = conditions
    target.core.patch_namespaced_pod_status(
        pod, target.namespace, {"status": status}, _content_type=MERGE_PATCH
    )


def _job(target: Target, name: str) -> dict[str, Any]:
    return target.raw(target.batch.read_namespaced_job, name, target.namespace)


def _condition(job: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for condition in (job.get("status") or {}).get("conditions") or []:
        if condition["type"] == kind and condition["status"] == "True":
            return condition
    return None


def _wait_condition(target: Target, name: str, kind: str) -> dict[str, Any]:
    return target.wait_for(
        lambda: _condition(_job(target, name), kind), what=f"job {name} condition {kind}"
    )


def test_a_job_creates_its_pod_from_the_template(target: Target) -> None:
    job = target.raw(
        target.batch.create_namespaced_job,
        target.namespace,
        target.job_manifest("train", template_labels={"wharf.io/step": "train"}),
    )
    [pod] = _wait_pods(target, "train", 1)
    meta = pod["metadata"]
    assert meta["name"].startswith("train-")
    assert meta["labels"]["job-name"] == "train"
    assert meta["labels"]["controller-uid"] == job["metadata"]["uid"]
    assert meta["labels"]["wharf.io/step"] == "train"
    [owner] = meta["ownerReferences"]
    assert owner["kind"] == "Job" and owner["apiVersion"] == "batch/v1"
    assert owner["uid"] == job["metadata"]["uid"] and owner["controller"] is True
    assert owner["blockOwnerDeletion"] is True
    assert pod["spec"]["restartPolicy"] == "Never"
    assert pod["status"]["phase"] == "Pending"
    running = target.wait_for(
        lambda: (j := _job(target, "train")).get("status", {}).get("active") == 1 and j,
        what="status.active == 1",
    )
    assert "startTime" in running["status"]


def test_a_succeeded_pod_completes_the_job(target: Target) -> None:
    target.batch.create_namespaced_job(target.namespace, target.job_manifest("j"))
    [pod] = _wait_pods(target, "j", 1)
    _end_pod(target, pod["metadata"]["name"], "Succeeded", 0)
    _wait_condition(target, "j", "Complete")
    status = _job(target, "j")["status"]
    assert status["succeeded"] == 1
    assert not status.get("active")
    assert "completionTime" in status


def test_failed_pods_are_replaced_until_the_backoff_limit(target: Target) -> None:
    target.batch.create_namespaced_job(target.namespace, target.job_manifest("j", backoffLimit=1))
    [first] = _wait_pods(target, "j", 1)
    _end_pod(target, first["metadata"]["name"], "Failed", 1)
    second = _wait_new_pod(target, "j", [first])
    assert _condition(_job(target, "j"), "Failed") is None
    _end_pod(target, second["metadata"]["name"], "Failed", 1)
    failed = _wait_condition(target, "j", "Failed")
    assert failed["reason"] == "BackoffLimitExceeded"
    assert _job(target, "j")["status"]["failed"] == 2
    assert len(_pods_of(target, "j")) == 2  # no pod after the limit


def test_pod_failure_policy_fail_job_and_ignore(target: Target) -> None:
    rules = [
        {"action": "FailJob",
         "onExitCodes": {"containerName": "main", "operator": "In", "values": [42]}},
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
        {"action": "Count",
         "onExitCodes": {"containerName": "main", "operator": "NotIn", "values": [0]}},
    ]  # fmt: skip
    body = target.job_manifest("j", backoffLimit=3, podFailurePolicy={"rules": rules})
    target.batch.create_namespaced_job(target.namespace, body)
    [first] = _wait_pods(target, "j", 1)
    disruption = [{"type": "DisruptionTarget", "status": "True", "reason": "EvictionByTest"}]
    _end_pod(target, first["metadata"]["name"], "Failed", 137, conditions=disruption)
    second = _wait_new_pod(target, "j", [first])
    assert not _job(target, "j")["status"].get("failed")  # ignored: not counted
    _end_pod(target, second["metadata"]["name"], "Failed", 42)
    failed = _wait_condition(target, "j", "Failed")
    assert failed["reason"] == "PodFailurePolicy"


def test_active_deadline_fails_the_job_and_deletes_its_pods(clocked_target: Target) -> None:
    target = clocked_target
    target.batch.create_namespaced_job(
        target.namespace, target.job_manifest("j", activeDeadlineSeconds=60)
    )
    _wait_pods(target, "j", 1)
    target.advance(30)
    assert _condition(_job(target, "j"), "Failed") is None
    target.advance(31)
    failed = _wait_condition(target, "j", "Failed")
    assert failed["reason"] == "DeadlineExceeded"
    target.wait_for(lambda: not _pods_of(target, "j"), what="the job's pods to be deleted")


def test_ttl_after_finished_deletes_the_job_and_its_pods(clocked_target: Target) -> None:
    target = clocked_target
    target.batch.create_namespaced_job(
        target.namespace, target.job_manifest("j", ttlSecondsAfterFinished=30)
    )
    [pod] = _wait_pods(target, "j", 1)
    _end_pod(target, pod["metadata"]["name"], "Succeeded", 0)
    _wait_condition(target, "j", "Complete")
    target.advance(10)
    assert target.exists(target.batch.read_namespaced_job, "j")
    target.advance(21)
    target.wait_for(
        lambda: not target.exists(target.batch.read_namespaced_job, "j"), what="the TTL to expire"
    )
    target.wait_for(lambda: not _pods_of(target, "j"), what="the job's pods to be collected")


@pytest.mark.parametrize("policy", ["Background", "Foreground"])
def test_deleting_a_job_collects_its_pods(target: Target, policy: str) -> None:
    target.batch.create_namespaced_job(target.namespace, target.job_manifest("j"))
    _wait_pods(target, "j", 1)
    target.batch.delete_namespaced_job("j", target.namespace, propagation_policy=policy)
    target.wait_for(lambda: not _pods_of(target, "j"), what="the job's pods to be collected")
    target.wait_for(
        lambda: not target.exists(target.batch.read_namespaced_job, "j"), what="the job to go"
    )


def test_a_deleted_running_pod_is_replaced(target: Target) -> None:
    target.batch.create_namespaced_job(target.namespace, target.job_manifest("j", backoffLimit=2))
    [first] = _wait_pods(target, "j", 1)
    target.core.delete_namespaced_pod(
        first["metadata"]["name"], target.namespace, grace_period_seconds=0
    )
    _wait_new_pod(target, "j", [first])


def test_step_jobs_owned_by_an_orchestrator_job_are_collected_with_it(target: Target) -> None:
    """Step Jobs carry a non-controller ownerReference to the orchestrator Job (issue 27)."""
    ns = target.namespace
    orchestrator = target.raw(
        target.batch.create_namespaced_job, ns, target.job_manifest("orchestrator")
    )
    step = target.job_manifest("step")
    step["metadata"]["ownerReferences"] = [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "orchestrator",
         "uid": orchestrator["metadata"]["uid"], "controller": False}
    ]  # fmt: skip
    target.batch.create_namespaced_job(ns, step)
    _wait_pods(target, "step", 1)
    target.batch.delete_namespaced_job("orchestrator", ns, propagation_policy="Foreground")
    target.wait_for(
        lambda: not target.exists(target.batch.read_namespaced_job, "step"),
        what="the step job to be collected",
    )
    target.wait_for(lambda: not _pods_of(target, "step"), what="the step job's pods to go")
    target.wait_for(
        lambda: not target.exists(target.batch.read_namespaced_job, "orchestrator"),
        what="the orchestrator job to go once its dependents are gone",
    )
