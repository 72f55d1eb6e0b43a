"""The shared pod watch against the API emulator (conftest's ``emulator`` and ``clients``): one
list, then one resumable watch, through dropped streams, 410 Expired and failing lists; pods
grouped by their Job."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from tests.kube.emulator import Emulator
from tests.waiting import wait_for
from wharf.integrations.kubernetes.clients import KubeClients
from wharf.integrations.kubernetes.pod_watch import ObjectWatch, job_name_of_pod, name_of

NS = "default"
SELECTOR = "wharf.io/watched=yes"


@pytest.fixture
def pods(clients: KubeClients) -> Iterator[ObjectWatch]:
    watch = ObjectWatch(
        clients.core.list_namespaced_pod, NS, SELECTOR, job_name_of_pod, what="pods"
    ).start()
    try:
        yield watch
    finally:
        watch.close()


def pod(name: str, job: str, watched: bool = True) -> dict[str, Any]:
    labels = {"job-name": job, **({"wharf.io/watched": "yes"} if watched else {})}
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "x"}]},
    }


def pod_names(watch: ObjectWatch, job: str) -> list[str | None]:
    return [name_of(p) for p in watch.objects(job)]


def sees(watch: ObjectWatch, job: str, names: list[str]) -> bool:
    return watch.wait_until(lambda: pod_names(watch, job) == names, timeout=5)


def test_pods_are_grouped_by_job_and_deletions_leave_a_tombstone(
    clients: KubeClients, pods: ObjectWatch
) -> None:
    core = clients.core
    core.create_namespaced_pod(NS, pod("a-1", "a"))
    assert pods.wait_until(lambda: pods.synced, timeout=5)
    core.create_namespaced_pod(NS, pod("a-2", "a"))
    core.create_namespaced_pod(NS, pod("b-1", "b"))
    core.create_namespaced_pod(NS, pod("c-1", "c", watched=False))
    assert sees(pods, "a", ["a-1", "a-2"])
    assert sees(pods, "b", ["b-1"])
    core.delete_namespaced_pod("b-1", NS, grace_period_seconds=0)
    assert pods.wait_until(lambda: pods.deleted("b"), timeout=5)
    assert pods.objects("c") == [] and not pods.deleted("c")
    assert (pods.lists, pods.watches) == (1, 1)


def test_a_dropped_stream_resumes_from_the_last_version_without_listing_again(
    emulator: Emulator, clients: KubeClients, pods: ObjectWatch
) -> None:
    assert pods.wait_until(lambda: pods.synced, timeout=5)
    wait_for(lambda: emulator.open_watches == 1, "one open watch", 10.0)
    assert emulator.faults.drop_watches() == 1
    clients.core.create_namespaced_pod(NS, pod("a-1", "a"))
    assert sees(pods, "a", ["a-1"])
    assert pods.lists == 1 and pods.watches >= 2


def test_410_expired_lists_again_and_misses_nothing(
    emulator: Emulator, clients: KubeClients, pods: ObjectWatch
) -> None:
    core = clients.core
    core.create_namespaced_pod(NS, pod("a-1", "a"))
    assert sees(pods, "a", ["a-1"])
    # (its watch is open: the drop below ends it, and the next one meets the fault)
    wait_for(lambda: emulator.open_watches == 1, "one open watch", 10.0)
    # the next watch is answered 410 (an ERROR event), as a server whose history is compacted
    emulator.faults.fail_next("watch", "pods", code=410)
    emulator.faults.drop_watches()
    core.create_namespaced_pod(NS, pod("a-2", "a"))
    core.delete_namespaced_pod("a-1", NS, grace_period_seconds=0)
    assert sees(pods, "a", ["a-2"])
    assert pods.lists == 2
    wait_for(lambda: emulator.open_watches == 1, "one open watch", 10.0)
    # a compacted history: resuming from the old version fails, the watch lists again
    emulator.faults.expire()
    emulator.faults.drop_watches()
    core.create_namespaced_pod(NS, pod("b-1", "b"))
    assert sees(pods, "b", ["b-1"])


def test_failing_lists_are_retried_with_backoff(emulator: Emulator, clients: KubeClients) -> None:
    clients.core.create_namespaced_pod(NS, pod("a-1", "a"))
    emulator.faults.fail_next("list", "pods", code=503, times=2)
    watch = ObjectWatch(clients.core.list_namespaced_pod, NS, SELECTOR, job_name_of_pod).start()
    try:
        assert watch.wait_until(lambda: watch.synced, timeout=5)
        assert pod_names(watch, "a") == ["a-1"]
        assert watch.lists == 3
    finally:
        watch.close()


def test_close_ends_the_open_watch_promptly(emulator: Emulator, pods: ObjectWatch) -> None:
    assert pods.wait_until(lambda: pods.synced, timeout=5)
    wait_for(lambda: emulator.open_watches == 1, "one open watch", 10.0)
    started = time.monotonic()
    pods.close()
    assert time.monotonic() - started < 1.0
    wait_for(lambda: emulator.open_watches == 0, "no open watch", 10.0)
    assert not pods.wait_until(lambda: False, timeout=0.01)


def test_waiters_of_two_watches_on_one_condition_wake_on_either(
    clients: KubeClients, pods: ObjectWatch
) -> None:
    jobs = ObjectWatch(
        clients.batch.list_namespaced_job, NS, SELECTOR, name_of, condition=pods.condition
    ).start()
    try:
        assert jobs.wait_until(lambda: jobs.synced and pods.synced, timeout=5)
        job: dict[str, Any] = {
            "metadata": {"name": "j", "labels": {"wharf.io/watched": "yes"}},
            "spec": {"template": pod("ignored", "j")},
        }
        job["spec"]["template"]["metadata"].pop("name")
        clients.batch.create_namespaced_job(NS, job)
        assert pods.wait_until(lambda: len(jobs.objects("j")) == 1, timeout=5)
    finally:
        jobs.close()


def test_the_watch_decodes_nothing_into_models(clients: KubeClients, pods: ObjectWatch) -> None:
    clients.core.create_namespaced_pod(NS, pod("a-1", "a"))
    assert sees(pods, "a", ["a-1"])
    (seen,) = pods.objects("a")
    assert isinstance(seen, dict) and not isinstance(seen, client.V1Pod)
    assert seen["spec"]["containers"][0]["name"] == "main"


def test_on_change_names_the_key_that_changed(clients: KubeClients) -> None:
    seen: list[str | None] = []
    watch = ObjectWatch(
        clients.core.list_namespaced_pod, NS, SELECTOR, job_name_of_pod, on_change=seen.append
    ).start()
    try:
        assert watch.wait_until(lambda: watch.synced, timeout=5)
        assert seen == [None]  # the first list: any key may have changed
        clients.core.create_namespaced_pod(NS, pod("a-1", "a"))
        clients.core.create_namespaced_pod(NS, pod("b-1", "b"))
        assert watch.wait_until(lambda: seen[-1:] == ["b"], timeout=5)
        assert seen == [None, "a", "b"]
    finally:
        watch.close()
