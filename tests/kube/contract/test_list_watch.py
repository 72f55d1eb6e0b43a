"""Lists and watches: label and field selectors, list resourceVersion, watch semantics."""

from __future__ import annotations

import itertools
import json
import os
import threading
import time
from typing import Any

import pytest
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from tests.kube.contract.conftest import MERGE_PATCH, SLOW_ENV, Target

LABELLED = {
    "a": {"tier": "web", "env": "prod"},
    "b": {"tier": "db", "env": "prod"},
    "c": {"tier": "web", "env": "dev"},
    "d": {},
}


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("tier=web", {"a", "c"}),
        ("tier==web", {"a", "c"}),
        ("tier!=web", {"b", "d"}),
        ("tier in (web,db)", {"a", "b", "c"}),
        ("tier notin (web)", {"b", "d"}),
        ("env", {"a", "b", "c"}),
        ("!env", {"d"}),
        ("tier=web,env=prod", {"a"}),
        ("env=prod,tier notin (db)", {"a"}),
        ("tier=none", set()),
    ],
)
def test_label_selectors(target: Target, selector: str, expected: set[str]) -> None:
    for name, labels in LABELLED.items():
        target.core.create_namespaced_config_map(
            target.namespace, target.config_map_manifest(name, labels=labels)
        )
    listed = target.core.list_namespaced_config_map(target.namespace, label_selector=selector)
    assert {item.metadata.name for item in listed.items} == expected


def test_an_invalid_label_selector_is_a_bad_request(target: Target) -> None:
    status, error = target.error(
        target.core.list_namespaced_config_map, target.namespace, label_selector="tier in web"
    )
    assert status == 400 and error["reason"] == "BadRequest"


def _pods(target: Target, *names: str) -> None:
    for name in names:
        target.core.create_namespaced_pod(target.namespace, target.pod_manifest(name))


def test_field_selectors_on_pods(target: Target) -> None:
    _pods(target, "p1", "p2", "p3")
    target.core.patch_namespaced_pod_status(
        "p2", target.namespace, {"status": {"phase": "Running"}}, _content_type=MERGE_PATCH
    )
    ns = target.namespace

    def names(**kwargs: Any) -> set[str]:
        return {p.metadata.name for p in target.core.list_namespaced_pod(ns, **kwargs).items}

    assert names(field_selector="metadata.name=p1") == {"p1"}
    assert names(field_selector="metadata.name!=p1") == {"p2", "p3"}
    assert names(field_selector="status.phase=Running") == {"p2"}
    assert names(field_selector="status.phase=Pending") == {"p1", "p3"}
    assert names(field_selector="status.phase!=Pending,metadata.name!=p1") == {"p2"}
    everywhere = target.core.list_pod_for_all_namespaces(field_selector=f"metadata.namespace={ns}")
    assert {p.metadata.name for p in everywhere.items} == {"p1", "p2", "p3"}
    assert {p.metadata.namespace for p in everywhere.items} == {ns}


def test_field_selector_metadata_name_on_config_maps(target: Target) -> None:
    for name in ("x", "y"):
        target.core.create_namespaced_config_map(target.namespace, target.config_map_manifest(name))
    listed = target.core.list_namespaced_config_map(
        target.namespace, field_selector="metadata.name=y"
    )
    assert [item.metadata.name for item in listed.items] == ["y"]


def test_an_unsupported_field_selector_is_a_bad_request(target: Target) -> None:
    status, error = target.error(
        target.core.list_namespaced_config_map, target.namespace, field_selector="status.phase=x"
    )
    assert status == 400 and error["reason"] == "BadRequest"


def test_list_carries_a_resource_version_at_least_the_last_write(target: Target) -> None:
    last = 0
    for name in ("x", "y"):
        created = target.raw(
            target.core.create_namespaced_config_map,
            target.namespace,
            target.config_map_manifest(name),
        )
        last = int(created["metadata"]["resourceVersion"])
    listed = target.raw(target.core.list_namespaced_config_map, target.namespace)
    assert listed["kind"] == "ConfigMapList"
    assert int(listed["metadata"]["resourceVersion"]) >= last
    assert all(int(i["metadata"]["resourceVersion"]) <= last for i in listed["items"])


def _sentinel(name: str) -> Any:
    return lambda e: e["type"] == "ADDED" and e["object"]["metadata"]["name"] == name


def test_watch_from_a_resource_version_gets_exactly_the_later_events(target: Target) -> None:
    ns, core = target.namespace, target.core
    start = target.raw(core.create_namespaced_config_map, ns, target.config_map_manifest("a"))
    start_rv = start["metadata"]["resourceVersion"]
    core.create_namespaced_config_map(ns, target.config_map_manifest("b"))
    core.patch_namespaced_config_map("a", ns, {"data": {"k": "v"}}, _content_type=MERGE_PATCH)
    core.delete_namespaced_config_map("b", ns)
    core.create_namespaced_config_map(ns, target.config_map_manifest("end"))

    events = target.watch_events(
        core.list_namespaced_config_map, ns, resource_version=start_rv, until=_sentinel("end")
    )
    seen = [(e["type"], e["object"]["metadata"]["name"]) for e in events]
    assert seen == [("ADDED", "b"), ("MODIFIED", "a"), ("DELETED", "b"), ("ADDED", "end")]
    versions = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    # strictly increasing, a DELETED included: resuming from the last one seen misses nothing
    assert all(a < b for a, b in itertools.pairwise(versions)), versions
    assert versions[0] > int(start_rv)
    assert events[1]["object"]["data"] == {"k": "v"}


def test_watch_without_a_resource_version_starts_with_the_current_objects(target: Target) -> None:
    ns, core = target.namespace, target.core
    for name in ("a", "b"):
        core.create_namespaced_config_map(ns, target.config_map_manifest(name))
    seen: set[str] = set()

    def both_seen(event: dict[str, Any]) -> bool:
        seen.add(event["object"]["metadata"]["name"])
        return seen >= {"a", "b"}

    events = target.watch_events(core.list_namespaced_config_map, ns, until=both_seen)
    assert sorted((e["type"], e["object"]["metadata"]["name"]) for e in events) == [
        ("ADDED", "a"),
        ("ADDED", "b"),
    ]


def test_timeout_seconds_ends_the_stream(target: Target) -> None:
    begun = time.monotonic()
    events = target.watch_events(
        target.core.list_namespaced_config_map, target.namespace, timeout_seconds=1
    )
    assert events == []
    assert time.monotonic() - begun < 5


def test_watch_bookmarks_carry_a_resource_version(target: Target) -> None:
    """A BOOKMARK holds only a newer resourceVersion: progress the watch saw no event for.

    kube-apiserver 1.20 sends one a minute into a watch and 2 s before its timeout, while its
    cache sees writes (measured: at 60.8 s and 68.6 s of a 70 s watch with configmaps written
    elsewhere every 5 s; none in an 8 s watch); the emulator sends one as a timeout ends a watch.
    """
    if not target.is_emulator and not os.environ.get(SLOW_ENV):
        pytest.skip("a real server's first BOOKMARK comes after 60 s; set " + SLOW_ENV + "=1")
    ns, core = target.namespace, target.core
    listed = target.raw(core.list_namespaced_config_map, ns)
    elsewhere = f"{ns}-elsewhere"  # writes there are progress this watch sees no event for
    core.create_namespace({"metadata": {"name": elsewhere}})
    progress = target.raw(
        core.create_namespaced_config_map, elsewhere, target.config_map_manifest("progress")
    )
    done = threading.Event()

    def keep_writing_elsewhere() -> None:
        while not done.wait(2.0):
            core.create_namespaced_config_map(elsewhere, {"metadata": {"generateName": "w-"}})

    writer = threading.Thread(target=keep_writing_elsewhere, daemon=True)
    writer.start()
    try:
        events = target.watch_events(
            core.list_namespaced_config_map,
            ns,
            resource_version=listed["metadata"]["resourceVersion"],
            allow_watch_bookmarks=True,
            timeout_seconds=2 if target.is_emulator else 70,
            until=lambda e: e["type"] == "BOOKMARK",
        )
    finally:
        done.set()
        writer.join()
    assert [e["type"] for e in events] == ["BOOKMARK"], events
    bookmark = events[0]["object"]
    assert bookmark["kind"] == "ConfigMap" and bookmark["apiVersion"] == "v1"
    assert "name" not in bookmark["metadata"]  # only a resourceVersion, no object
    assert int(bookmark["metadata"]["resourceVersion"]) >= int(
        progress["metadata"]["resourceVersion"]
    )


def _version_made_too_old(target: Target) -> str:
    """A resourceVersion that a watch can no longer start from (its history is gone)."""
    ns = target.namespace
    first = target.raw(
        target.core.create_namespaced_config_map, ns, target.config_map_manifest("a")
    )
    for name in ("b", "c"):
        target.core.create_namespaced_config_map(ns, target.config_map_manifest(name))
    version = str(first["metadata"]["resourceVersion"])
    target.expire_watch_history(version)
    return version


def test_a_watch_from_a_too_old_version_raises_410(target: Target) -> None:
    version = _version_made_too_old(target)
    with pytest.raises(ApiException) as raised:
        target.watch_events(
            target.core.list_namespaced_config_map,
            target.namespace,
            resource_version=version,
            timeout_seconds=3,
        )
    assert raised.value.status == 410


def test_a_too_old_version_arrives_as_an_error_event_in_the_stream(target: Target) -> None:
    """200, then one ERROR event holding an Expired Status (410) — as kube-apiserver 1.20 answers
    ("The resourceVersion for the provided watch is too old." from etcd; its watch cache words it
    "too old resource version: X (Y)")."""
    version = _version_made_too_old(target)
    response = target.core.list_namespaced_config_map(
        target.namespace,
        watch=True,
        resource_version=version,
        timeout_seconds=3,
        _preload_content=False,
        _request_timeout=10,
    )
    try:
        assert response.status == 200
        first = json.loads(next(iter(response.stream(1 << 16))).splitlines()[0])
    finally:
        response.close()
    assert first["type"] == "ERROR"
    status = first["object"]
    assert status["kind"] == "Status" and status["apiVersion"] == "v1"
    assert status["status"] == "Failure" and status["code"] == 410
    assert status["reason"] == "Expired"
    assert "too old" in status["message"]


def test_objects_leaving_and_entering_a_selector(target: Target) -> None:
    ns, core = target.namespace, target.core
    created = target.raw(
        core.create_namespaced_config_map, ns, target.config_map_manifest("x", labels={"k": "a"})
    )
    left = target.raw(
        core.patch_namespaced_config_map,
        "x",
        ns,
        {"metadata": {"labels": {"k": "b"}}},
        _content_type=MERGE_PATCH,
    )
    core.patch_namespaced_config_map(
        "x", ns, {"metadata": {"labels": {"k": "a"}}}, _content_type=MERGE_PATCH
    )
    core.create_namespaced_config_map(ns, target.config_map_manifest("end", labels={"k": "a"}))
    events = target.watch_events(
        core.list_namespaced_config_map,
        ns,
        label_selector="k=a",
        resource_version=created["metadata"]["resourceVersion"],
        until=_sentinel("end"),
    )
    seen = [(e["type"], e["object"]["metadata"]["name"]) for e in events]
    assert seen == [("DELETED", "x"), ("ADDED", "x"), ("ADDED", "end")]
    # the DELETED of an object leaving the selector holds its last matching content, at the
    # resourceVersion of the change that made it leave
    leaving = events[0]["object"]["metadata"]
    assert leaving["labels"] == {"k": "a"}
    assert leaving["resourceVersion"] == left["metadata"]["resourceVersion"]
    assert events[1]["object"]["metadata"]["labels"] == {"k": "a"}


def test_list_pages_with_limit_and_continue(target: Target) -> None:
    names = [f"cm-{i}" for i in range(5)]
    for name in reversed(names):
        target.core.create_namespaced_config_map(target.namespace, target.config_map_manifest(name))
    first = target.raw(target.core.list_namespaced_config_map, target.namespace, limit=2)
    assert [i["metadata"]["name"] for i in first["items"]] == names[:2]  # in key (name) order
    assert first["metadata"]["continue"]
    assert first["metadata"]["remainingItemCount"] == 3
    second = target.raw(
        target.core.list_namespaced_config_map,
        target.namespace,
        limit=2,
        _continue=first["metadata"]["continue"],
    )
    assert [i["metadata"]["name"] for i in second["items"]] == names[2:4]
    last = target.raw(
        target.core.list_namespaced_config_map,
        target.namespace,
        limit=2,
        _continue=second["metadata"]["continue"],
    )
    assert [i["metadata"]["name"] for i in last["items"]] == names[4:]
    assert not last["metadata"].get("continue")
    assert "remainingItemCount" not in last["metadata"]


def test_a_field_selector_watch_follows_one_pod_through_its_phases(target: Target) -> None:
    ns, core = target.namespace, target.core
    listed = target.raw(core.list_namespaced_pod, ns)
    for name in ("p1", "p2"):
        core.create_namespaced_pod(ns, target.pod_manifest(name))
    for phase in ("Running", "Succeeded"):
        for name in ("p1", "p2"):
            core.patch_namespaced_pod_status(
                name, ns, {"status": {"phase": phase}}, _content_type=MERGE_PATCH
            )
    events = target.watch_events(
        core.list_namespaced_pod,
        ns,
        field_selector="metadata.name=p2",
        resource_version=listed["metadata"]["resourceVersion"],
        until=lambda e: e["object"]["status"]["phase"] == "Succeeded",
    )
    assert [(e["type"], e["object"]["status"]["phase"]) for e in events] == [
        ("ADDED", "Pending"),
        ("MODIFIED", "Running"),
        ("MODIFIED", "Succeeded"),
    ]
    assert {e["object"]["metadata"]["name"] for e in events} == {"p2"}


def test_a_phase_selector_watch_sees_pods_enter_and_leave(target: Target) -> None:
    ns, core = target.namespace, target.core
    core.create_namespaced_pod(ns, target.pod_manifest("p"))
    start = target.raw(core.read_namespaced_pod, "p", ns)["metadata"]["resourceVersion"]
    for phase in ("Running", "Failed"):
        core.patch_namespaced_pod_status(
            "p", ns, {"status": {"phase": phase}}, _content_type=MERGE_PATCH
        )
    events = target.watch_events(
        core.list_namespaced_pod,
        ns,
        field_selector="status.phase=Running",
        resource_version=start,
        until=lambda e: e["type"] == "DELETED",
    )
    assert [e["type"] for e in events] == ["ADDED", "DELETED"]
    assert events[0]["object"]["status"]["phase"] == "Running"


def test_watched_jobs_and_pods_decode_into_models(target: Target) -> None:
    """The official Watch decodes each event into the list's item model (V1Job, V1Pod)."""
    ns = target.namespace
    start = target.raw(target.batch.list_namespaced_job, ns)["metadata"]["resourceVersion"]
    target.batch.create_namespaced_job(ns, target.job_manifest("j", labels={"run": "r1"}))
    target.core.create_namespaced_pod(ns, target.pod_manifest("p", labels={"run": "r1"}))
    for list_fn, kind in (
        (target.batch.list_namespaced_job, client.V1Job),
        (target.core.list_namespaced_pod, client.V1Pod),
    ):
        stream = watch.Watch().stream(
            list_fn, ns, label_selector="run=r1", resource_version=start, timeout_seconds=5
        )
        event = next(iter(stream))
        assert event["type"] == "ADDED"
        assert isinstance(event["object"], kind)
        assert event["object"].metadata.labels == {"run": "r1"}
        assert event["object"].metadata.namespace == ns


def test_a_job_watched_by_name_from_a_version(target: Target) -> None:
    """As a client follows one Job: a metadata.name field selector, from a listed version."""
    ns = target.namespace
    listed = target.raw(target.batch.list_namespaced_job, ns, field_selector="metadata.name=j2")
    assert listed["items"] == []
    for name in ("j1", "j2"):
        target.batch.create_namespaced_job(ns, target.job_manifest(name))
    for name in ("j1", "j2"):
        target.batch.patch_namespaced_job(
            name, ns, {"metadata": {"labels": {"seen": "yes"}}}, _content_type=MERGE_PATCH
        )
    events = target.watch_events(
        target.batch.list_namespaced_job,
        ns,
        field_selector="metadata.name=j2",
        resource_version=listed["metadata"]["resourceVersion"],
        until=lambda e: (
            e["type"] == "MODIFIED"
            and e["object"]["metadata"].get("labels", {}).get("seen") == "yes"
        ),
    )
    assert events[0]["type"] == "ADDED"  # then MODIFIED ones (a controller's status too)
    assert {e["object"]["metadata"]["name"] for e in events} == {"j2"}
