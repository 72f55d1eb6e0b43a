"""The emulator's Job controller and TTL-after-finished, driven through the store with a FakeClock.

CronJob, garbage-collector and namespace tests live in ``test_controllers_cron.py`` and
``test_controllers_gc.py``.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest

from tests.kube.controller_bed import ControllerBed, condition, required_condition
from tests.kube.emulator.clock import rfc3339
from tests.kube.emulator.resources import JOBS, PODS
from tests.waiting import wait_for

ZENML_DEFAULT_POLICY = {
    "rules": [
        {
            "action": "Count",
            "onExitCodes": {"containerName": "main", "operator": "NotIn", "values": [0]},
        },
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
    ]
}


@pytest.fixture
def bed() -> Iterator[ControllerBed]:
    bed = ControllerBed()
    yield bed
    bed.close()


@pytest.fixture
def backoff_bed() -> Iterator[ControllerBed]:
    """Replacement pods wait 10 s, 20 s, ... after failures, as on a real cluster."""
    bed = ControllerBed(job_backoff_seconds=10)
    yield bed
    bed.close()


def test_a_new_job_gets_one_pod_from_its_template(bed: ControllerBed) -> None:
    job = bed.create_job("train")
    pods = bed.pods_of("train")
    assert len(pods) == 1
    pod = pods[0]
    meta = pod["metadata"]
    assert re.fullmatch(r"train-[a-z0-9]{5}", meta["name"])
    assert meta["generateName"] == "train-"
    assert meta["namespace"] == "default"
    uid = job["metadata"]["uid"]
    assert meta["labels"]["controller-uid"] == uid
    assert meta["labels"]["batch.kubernetes.io/job-name"] == "train"
    assert meta["labels"]["app"] == "wharf-test"
    assert meta["annotations"] == {"note": "from-template"}
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "name": "train",
            "uid": uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert pod["spec"]["containers"][0]["command"] == ["true"]
    assert pod["status"]["phase"] == "Pending"
    status = job["status"]
    assert status["active"] == 1
    assert status["startTime"] == rfc3339(bed.clock.now())
    assert "succeeded" not in status and "failed" not in status


def test_a_succeeded_pod_completes_the_job(bed: ControllerBed) -> None:
    bed.create_job("train")
    (pod,) = bed.pods_of("train")
    bed.run(pod)
    assert bed.job("train")["status"]["ready"] == 1
    finished_at = bed.advance(7)
    bed.finish(pod, 0)
    status = bed.job("train")["status"]
    assert status["succeeded"] == 1
    assert "active" not in status
    assert status["completionTime"] == rfc3339(finished_at)
    complete = condition(bed.job("train"), "Complete")
    assert complete is not None and complete["status"] == "True"
    assert condition(bed.job("train"), "Failed") is None
    assert len(bed.pods_of("train")) == 1  # the finished pod stays until the job goes


def test_failures_are_replaced_until_the_backoff_limit_is_exceeded(bed: ControllerBed) -> None:
    bed.create_job("flaky", backoffLimit=2)
    for attempt in range(1, 4):
        assert len(bed.pods_of("flaky")) == attempt
        (pod,) = bed.waiting_pods("flaky")
        bed.run(pod)
        bed.finish(pod, 1)
        assert bed.job("flaky")["status"]["failed"] == attempt
    job = bed.job("flaky")
    failed = required_condition(job, "Failed")
    assert failed is not None and failed["status"] == "True"
    assert failed["reason"] == "BackoffLimitExceeded"
    assert failed["message"] == "Job has reached the specified backoff limit"
    assert len(bed.pods_of("flaky")) == 3  # no pod after the third failure
    assert "active" not in job["status"] and "completionTime" not in job["status"]


def test_backoff_limit_zero_fails_on_the_first_failure(bed: ControllerBed) -> None:
    bed.create_job("once", backoffLimit=0)
    (pod,) = bed.pods_of("once")
    bed.finish(pod, 3)
    assert required_condition(bed.job("once"), "Failed")["reason"] == "BackoffLimitExceeded"
    assert len(bed.pods_of("once")) == 1


def test_pod_failure_policy_fail_job(bed: ControllerBed) -> None:
    policy = {
        "rules": [
            {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}},
        ]
    }
    bed.create_job("strict", backoffLimit=6, podFailurePolicy=policy)
    (pod,) = bed.pods_of("strict")
    bed.run(pod)
    bed.finish(pod, 42)
    job = bed.job("strict")
    expected = (
        f"Container main for pod default/{pod['metadata']['name']} failed with exit code 42 "
        "matching FailJob rule at index 0"
    )
    for ctype in ("FailureTarget", "Failed"):
        cond = condition(job, ctype)
        assert cond is not None and cond["status"] == "True"
        assert cond["reason"] == "PodFailurePolicy"
        assert cond["message"] == expected
    assert job["status"]["failed"] == 1
    assert len(bed.pods_of("strict")) == 1


def test_pod_failure_policy_ignore_does_not_count(bed: ControllerBed) -> None:
    bed.create_job("disrupted", backoffLimit=0, podFailurePolicy=ZENML_DEFAULT_POLICY)
    (pod,) = bed.pods_of("disrupted")
    bed.run(pod)
    disruption = {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"}
    bed.set_status(pod, {"phase": "Failed", "conditions": [disruption]})
    job = bed.job("disrupted")
    assert "failed" not in job["status"]
    assert condition(job, "Failed") is None
    pods = bed.pods_of("disrupted")
    assert len(pods) == 2 and job["status"]["active"] == 1


def test_pod_failure_policy_count_counts_toward_the_backoff_limit(bed: ControllerBed) -> None:
    bed.create_job("counted", backoffLimit=1, podFailurePolicy=ZENML_DEFAULT_POLICY)
    bed.finish(bed.pods_of("counted")[0], 1)
    assert bed.job("counted")["status"]["failed"] == 1
    assert condition(bed.job("counted"), "Failed") is None
    bed.finish(bed.waiting_pods("counted")[0], 2)
    job = bed.job("counted")
    assert job["status"]["failed"] == 2
    assert required_condition(job, "Failed")["reason"] == "BackoffLimitExceeded"


def test_pod_condition_rule_message_names_the_condition(bed: ControllerBed) -> None:
    policy = {
        "rules": [
            {"action": "FailJob", "onPodConditions": [{"type": "ConfigIssue", "status": "True"}]}
        ]
    }
    bed.create_job("cond", podFailurePolicy=policy)
    (pod,) = bed.pods_of("cond")
    bed.set_status(
        pod, {"phase": "Failed", "conditions": [{"type": "ConfigIssue", "status": "True"}]}
    )
    assert required_condition(bed.job("cond"), "Failed")["message"] == (
        f"Pod default/{pod['metadata']['name']} has condition ConfigIssue matching FailJob rule "
        "at index 0"
    )


def test_a_pod_deleted_while_running_counts_as_failed(bed: ControllerBed) -> None:
    bed.create_job("victim", backoffLimit=1)
    (pod,) = bed.pods_of("victim")
    bed.run(pod)
    bed.store.delete(PODS, "default", pod["metadata"]["name"])  # graceful: the kubelet stops it
    job = bed.job("victim")
    assert job["status"]["failed"] == 1
    pods = bed.pods_of("victim")
    assert len(pods) == 2 and "deletionTimestamp" in pods[0]["metadata"]
    bed.finish(pods[0], 143)
    bed.kubelet_delete(pods[0])
    assert bed.job("victim")["status"]["failed"] == 1  # counted once
    assert bed.job("victim")["status"]["active"] == 1


def test_a_deleted_unscheduled_pod_is_a_disruption_under_a_policy(bed: ControllerBed) -> None:
    bed.create_job("evicted", backoffLimit=0, podFailurePolicy=ZENML_DEFAULT_POLICY)
    (pod,) = bed.pods_of("evicted")
    bed.store.delete(PODS, "default", pod["metadata"]["name"])  # never bound: gone at once
    job = bed.job("evicted")
    assert "failed" not in job["status"] and condition(job, "Failed") is None
    assert len(bed.pods_of("evicted")) == 1 and job["status"]["active"] == 1


def test_a_deleted_running_pod_under_a_policy_is_replaced_once_it_has_failed(
    bed: ControllerBed,
) -> None:
    """With a podFailurePolicy the controller waits for the terminal phase (exit codes)."""
    bed.create_job("graceful", backoffLimit=1, podFailurePolicy=ZENML_DEFAULT_POLICY)
    (pod,) = bed.pods_of("graceful")
    bed.run(pod)
    bed.store.delete(PODS, "default", pod["metadata"]["name"])
    job = bed.job("graceful")
    assert len(bed.pods_of("graceful")) == 1  # still stopping: no replacement yet
    assert "active" not in job["status"] and "failed" not in job["status"]
    bed.finish(pod, 143)  # the kubelet reports SIGTERM's exit code
    assert bed.job("graceful")["status"]["failed"] == 1
    assert len(bed.waiting_pods("graceful")) == 1
    bed.kubelet_delete(pod)
    assert bed.job("graceful")["status"]["failed"] == 1


def test_a_deleted_unscheduled_pod_without_policy_counts(bed: ControllerBed) -> None:
    bed.create_job("plain", backoffLimit=0)
    (pod,) = bed.pods_of("plain")
    bed.store.delete(PODS, "default", pod["metadata"]["name"])
    assert required_condition(bed.job("plain"), "Failed")["reason"] == "BackoffLimitExceeded"


def test_active_deadline_fails_the_job_and_stops_its_pods(bed: ControllerBed) -> None:
    bed.create_job("slow", activeDeadlineSeconds=60, backoffLimit=6)
    (pod,) = bed.pods_of("slow")
    bed.run(pod)
    bed.advance(59)
    assert condition(bed.job("slow"), "Failed") is None
    bed.advance(1)
    job = bed.job("slow")
    failed = required_condition(job, "Failed")
    assert failed["reason"] == "DeadlineExceeded"
    assert failed["message"] == "Job was active longer than specified deadline"
    assert job["status"]["failed"] == 1 and "active" not in job["status"]
    (stopping,) = bed.pods_of("slow")
    assert "deletionTimestamp" in stopping["metadata"]  # the kubelet finishes it
    bed.kubelet_delete(stopping)
    assert bed.pods_of("slow") == []
    assert bed.job("slow")["status"]["failed"] == 1


def test_ttl_after_finished_deletes_the_job_and_its_pods(bed: ControllerBed) -> None:
    bed.create_job("short-lived", ttlSecondsAfterFinished=100)
    (pod,) = bed.pods_of("short-lived")
    bed.run(pod)
    bed.finish(pod, 0)
    bed.advance(99)
    assert bed.get(JOBS, "short-lived") is not None
    bed.advance(1)
    assert bed.get(JOBS, "short-lived") is None
    assert bed.pods_of("short-lived") == []


def test_ttl_zero_deletes_the_job_as_soon_as_it_fails(bed: ControllerBed) -> None:
    bed.create_job("gone", ttlSecondsAfterFinished=0, backoffLimit=0)
    bed.finish(bed.pods_of("gone")[0], 1)
    assert bed.get(JOBS, "gone") is None
    assert bed.pods_of("gone") == []


def test_a_suspended_job_has_no_pods_until_resumed(bed: ControllerBed) -> None:
    bed.create_job("later", suspend=True)
    assert bed.pods_of("later") == []
    job = bed.job("later")
    suspended = required_condition(job, "Suspended")
    assert suspended["status"] == "True" and suspended["reason"] == "JobSuspended"
    assert "startTime" not in job["status"]
    resumed_at = bed.advance(30)
    bed.store.patch(
        JOBS, "default", "later", {"spec": {"suspend": False}}, "application/merge-patch+json"
    )
    job = bed.job("later")
    assert len(bed.pods_of("later")) == 1
    resumed = required_condition(job, "Suspended")
    assert resumed["status"] == "False" and resumed["reason"] == "JobResumed"
    assert job["status"]["startTime"] == rfc3339(resumed_at)


def test_suspending_a_running_job_deletes_its_pods_without_counting_them(
    bed: ControllerBed,
) -> None:
    bed.create_job("paused")
    bed.store.patch(
        JOBS, "default", "paused", {"spec": {"suspend": True}}, "application/merge-patch+json"
    )
    assert bed.pods_of("paused") == []  # never bound: removed at once
    job = bed.job("paused")
    assert "failed" not in job["status"] and "active" not in job["status"]
    assert required_condition(job, "Suspended")["status"] == "True"


def test_replacements_wait_for_the_backoff_delay_on_the_clock(backoff_bed: ControllerBed) -> None:
    bed = backoff_bed
    bed.create_job("patient", backoffLimit=3)
    bed.finish(bed.pods_of("patient")[0], 1)
    assert len(bed.pods_of("patient")) == 1
    bed.advance(9)
    assert len(bed.pods_of("patient")) == 1
    bed.advance(1)
    assert len(bed.pods_of("patient")) == 2
    bed.finish(bed.waiting_pods("patient")[0], 1)
    bed.advance(19)
    assert len(bed.pods_of("patient")) == 2
    bed.advance(1)  # second failure: 20 s
    assert len(bed.pods_of("patient")) == 3


def test_parallel_completions(bed: ControllerBed) -> None:
    bed.create_job("fanout", completions=3, parallelism=2)
    pods = bed.pods_of("fanout")
    assert len(pods) == 2
    bed.finish(pods[0], 0)
    assert len(bed.pods_of("fanout")) == 3
    bed.finish(pods[1], 0)
    assert len(bed.pods_of("fanout")) == 3  # only one more completion wanted
    (last,) = bed.waiting_pods("fanout")
    bed.finish(last, 0)
    job = bed.job("fanout")
    assert job["status"]["succeeded"] == 3
    assert required_condition(job, "Complete")["status"] == "True"


def test_a_job_in_another_namespace_gets_its_pod_there(bed: ControllerBed) -> None:
    from tests.kube.emulator.resources import NAMESPACES

    bed.store.create(NAMESPACES, None, {"metadata": {"name": "wharf"}})
    bed.create_job("step", ns="wharf")
    (pod,) = bed.pods_of("step", ns="wharf")
    assert pod["metadata"]["namespace"] == "wharf"
    assert bed.pods_of("step") == []


def _complete_condition(bed: ControllerBed, name: str) -> dict[str, Any] | None:
    return condition(bed.job(name), "Complete")


def test_concurrent_writers_and_ticks_settle_consistently(bed: ControllerBed) -> None:
    """Writers in several threads (as the HTTP server has) and a ticking thread: every reaction
    still happens once, nothing deadlocks, and every job ends with the right counts."""
    stop_ticking = threading.Event()

    def ticker() -> None:
        # A short pause between ticks: a loop re-taking the store's lock at once can starve the
        # writers on a loaded machine (a lock hand-off is not fair), which is not what is tested.
        while not stop_ticking.wait(0.001):
            bed.controllers.tick(bed.clock.now())

    def writer(index: int) -> None:
        for n in range(5):
            name = f"w{index}-{n}"
            bed.create_job(name, backoffLimit=1)
            first = wait_for(partial(bed.waiting_pods, name), f"{name}'s pod", timeout=10)[0]
            bed.finish(first, 1)
            second = wait_for(partial(bed.waiting_pods, name), f"{name}'s replacement", timeout=10)
            bed.finish(second[0], 0)

    tick_thread = threading.Thread(target=ticker)
    tick_thread.start()
    writers = [threading.Thread(target=writer, args=(i,)) for i in range(4)]
    for thread in writers:
        thread.start()
    for thread in writers:
        thread.join(timeout=60)
    stop_ticking.set()
    tick_thread.join(timeout=10)
    assert not any(t.is_alive() for t in [*writers, tick_thread])
    for job in bed.jobs():
        name = job["metadata"]["name"]
        done = wait_for(partial(_complete_condition, bed, name), f"{name} to complete", timeout=10)
        assert done["status"] == "True"
        status = bed.job(name)["status"]
        assert (status["succeeded"], status["failed"]) == (1, 1), name
        assert len(bed.pods_of(name)) == 2
    assert len(bed.jobs()) == 20


def test_attaching_reconciles_what_is_already_stored() -> None:
    """Controllers attached to a store with content pick it up (a Job, a pending deletion)."""
    from tests.kube.controller_bed import START, job_body
    from tests.kube.emulator.clock import FakeClock
    from tests.kube.emulator.controllers import Controllers
    from tests.kube.emulator.store import ObjectStore

    clock = FakeClock(START)
    store = ObjectStore(clock)
    store.create(JOBS, "default", job_body("early"))
    store.create(JOBS, "default", job_body("leaving"))
    store.delete(JOBS, "default", "leaving", propagation_policy="Foreground")
    assert store.get(JOBS, "default", "leaving")["metadata"]["finalizers"] == ["foregroundDeletion"]
    assert store.list(PODS, "default")["items"] == []

    Controllers(store, clock).attach()

    (pod,) = store.list(PODS, "default")["items"]
    assert pod["metadata"]["labels"]["job-name"] == "early"
    assert [j["metadata"]["name"] for j in store.list(JOBS, "default")["items"]] == ["early"]


def test_on_failure_restarts_count_against_the_backoff_limit(bed: ControllerBed) -> None:
    """With restartPolicy OnFailure the kubelet restarts containers; the restarts are counted."""
    from tests.kube.controller_bed import job_body

    body = job_body("restarts", backoffLimit=2)
    body["spec"]["template"]["spec"]["restartPolicy"] = "OnFailure"
    bed.store.create(JOBS, "default", body)
    (pod,) = bed.pods_of("restarts")
    bed.run(pod)
    running = {"name": "main", "restartCount": 1, "ready": True, "state": {"running": {}}}
    bed.set_status(pod, {"containerStatuses": [running]})
    assert condition(bed.job("restarts"), "Failed") is None
    bed.set_status(pod, {"containerStatuses": [{**running, "restartCount": 2}]})
    failed = required_condition(bed.job("restarts"), "Failed")
    assert failed["reason"] == "BackoffLimitExceeded"
    (stopping,) = bed.pods_of("restarts")
    assert "deletionTimestamp" in stopping["metadata"]


def test_the_job_controller_records_events(bed: ControllerBed) -> None:
    from tests.kube.controller_bed import events_for
    from tests.kube.emulator.resources import EVENTS

    job = bed.create_job("noted", backoffLimit=0)
    (pod,) = bed.pods_of("noted")
    bed.finish(pod, 1)
    assert events_for(bed, "noted") == [
        ("Normal", "SuccessfulCreate", f"Created pod: {pod['metadata']['name']}"),
        ("Warning", "BackoffLimitExceeded", "Job has reached the specified backoff limit"),
    ]
    event = bed.store.list(EVENTS, "default")["items"][0]
    assert event["involvedObject"]["uid"] == job["metadata"]["uid"]
    assert event["involvedObject"]["kind"] == "Job"
    assert event["source"] == {"component": "job-controller"}
    assert event["count"] == 1 and event["metadata"]["name"].startswith("noted.")
    bed.create_job("fine")
    bed.finish(bed.pods_of("fine")[0], 0)
    assert [reason for _, reason, _ in events_for(bed, "fine")] == ["SuccessfulCreate", "Completed"]


def test_a_pod_refused_for_a_missing_service_account_is_a_failed_create_event(
    bed: ControllerBed,
) -> None:
    """As a real cluster: the ServiceAccount admission refuses the Job's pod, the Job gets no
    pod and one FailedCreate Warning (not one per retry); once the account exists, its pod."""
    from tests.kube.controller_bed import events_for, pod_template
    from tests.kube.emulator.resources import SERVICEACCOUNTS

    bed.store.service_account_admission = True
    template = pod_template()
    template["spec"]["serviceAccountName"] = "trainer"
    bed.create_job("refused", template=template)
    bed.advance(1)
    assert bed.pods_of("refused") == []
    assert events_for(bed, "refused") == [
        (
            "Warning",
            "FailedCreate",
            'Error creating: pods "refused-" is forbidden: error looking up service account '
            'default/trainer: serviceaccount "trainer" not found',
        )
    ]
    bed.store.create(SERVICEACCOUNTS, "default", {"metadata": {"name": "trainer"}})
    bed.advance(1)
    assert len(bed.pods_of("refused")) == 1
