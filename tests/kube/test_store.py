"""Unit tests of the emulator's object store, without HTTP: objects, versions, watches, deletion."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.kube.emulator.clock import FakeClock
from tests.kube.emulator.errors import ApiError
from tests.kube.emulator.resources import (
    CONFIGMAPS,
    CRONJOBS,
    JOBS,
    NAMESPACES,
    PODS,
    SECRETS,
    SERVICEACCOUNTS,
)
from tests.kube.emulator.store import ObjectStore, WatchEvent

START = datetime(2026, 12, 4, 16, 0, 0, tzinfo=UTC)
MERGE = "application/merge-patch+json"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(START)


@pytest.fixture
def store(clock: FakeClock) -> ObjectStore:
    return ObjectStore(clock)


def pod_body(name: str, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": dict(labels)},
        "spec": {"containers": [{"name": "main", "image": "python:3.11", "command": ["true"]}]},
    }


def job_body(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "python:3.11"}],
                }
            }
        },
    }


def raises(code: int, reason: str, call: Any, *args: Any, **kwargs: Any) -> ApiError:
    with pytest.raises(ApiError) as info:
        call(*args, **kwargs)
    assert (info.value.code, info.value.reason) == (code, reason), info.value.message
    return info.value


# ------------------------------------------------------------------------------------- create


def test_create_fills_server_metadata(store: ObjectStore) -> None:
    before = store.resource_version
    pod = store.create(PODS, "default", pod_body("p1"))
    metadata = pod["metadata"]
    assert metadata["namespace"] == "default"
    assert metadata["creationTimestamp"] == "2026-12-04T16:00:00Z"
    assert metadata["resourceVersion"] == str(before + 1) == str(store.resource_version)
    assert len(metadata["uid"]) == 36
    assert "generation" not in metadata
    assert pod["status"] == {"phase": "Pending", "qosClass": "BestEffort"}
    assert pod["spec"]["restartPolicy"] == "Always"
    assert store.get(PODS, "default", "p1") == pod


def test_create_ignores_client_status_and_server_fields(store: ObjectStore) -> None:
    body = pod_body("p1")
    body["status"] = {"phase": "Running"}
    body["metadata"].update(resourceVersion="-1", uid="mine", deletionTimestamp="x")
    pod = store.create(PODS, "default", body)
    assert pod["status"]["phase"] == "Pending"
    assert pod["metadata"]["uid"] != "mine"
    assert "deletionTimestamp" not in pod["metadata"]
    internal = store.create(
        PODS, "default", {**pod_body("p2"), "status": {"phase": "Running"}}, internal=True
    )
    assert internal["status"]["phase"] == "Running"


def test_create_with_a_resource_version_is_an_internal_error(store: ObjectStore) -> None:
    body = pod_body("p1")
    body["metadata"]["resourceVersion"] = "12"
    error = raises(500, "", store.create, PODS, "default", body)
    assert error.message == "resourceVersion should not be set on objects to be created"
    assert "reason" not in error.status()


def test_generate_name_and_generation(store: ObjectStore) -> None:
    job = store.create(JOBS, "default", {**job_body(""), "metadata": {"generateName": "run-"}})
    name = job["metadata"]["name"]
    assert name.startswith("run-") and len(name) == len("run-") + 5
    assert job["metadata"]["generation"] == 1
    assert job["metadata"]["generateName"] == "run-"


def test_create_errors(store: ObjectStore) -> None:
    store.create(PODS, "default", pod_body("p1"))
    error = raises(409, "AlreadyExists", store.create, PODS, "default", pod_body("p1"))
    assert error.message == 'pods "p1" already exists'
    error = raises(404, "NotFound", store.create, PODS, "nowhere", pod_body("p2"))
    assert error.message == 'namespaces "nowhere" not found'
    other_ns = pod_body("p3")
    other_ns["metadata"]["namespace"] = "kube-system"
    raises(400, "BadRequest", store.create, PODS, "default", other_ns)
    raises(422, "Invalid", store.create, PODS, "default", {"metadata": {}, "spec": {}})
    raises(400, "BadRequest", store.create, PODS, "default", {**pod_body("p4"), "kind": "Job"})


def test_secret_data_must_be_base64(store: ObjectStore) -> None:
    body = {"metadata": {"name": "s"}, "data": {"a": "not base64!"}}
    error = raises(400, "BadRequest", store.create, SECRETS, "default", body)
    assert error.message.endswith("illegal base64 data at input byte 3")
    raises(400, "BadRequest", store.create, SECRETS, "default", {**body, "data": {"a": "abc"}})
    assert store.create(SECRETS, "default", {**body, "data": {"a": "YWJj"}})["data"] == {
        "a": "YWJj"
    }


def test_dry_run_create_stores_nothing(store: ObjectStore) -> None:
    version = store.resource_version
    pod = store.create(PODS, "default", pod_body("p1"), dry_run=True)
    assert pod["metadata"]["name"] == "p1"
    assert store.resource_version == version
    raises(404, "NotFound", store.get, PODS, "default", "p1")


def test_initial_namespaces(store: ObjectStore) -> None:
    names = [ns["metadata"]["name"] for ns in store.namespaces()]
    assert names == ["default", "kube-node-lease", "kube-public", "kube-system"]
    default = store.get(NAMESPACES, None, "default")
    assert default["status"]["phase"] == "Active"
    assert default["spec"]["finalizers"] == ["kubernetes"]


# --------------------------------------------------------------------------------------- list


def test_list_is_sorted_filtered_and_real_shaped(store: ObjectStore) -> None:
    store.create(NAMESPACES, None, {"metadata": {"name": "other"}})
    store.create(PODS, "default", pod_body("b", app="x"))
    store.create(PODS, "default", pod_body("a", app="y"))
    store.create(PODS, "other", pod_body("c", app="x"))
    everything = store.list(PODS, None)
    assert everything["kind"] == "PodList" and everything["apiVersion"] == "v1"
    assert everything["metadata"]["resourceVersion"] == str(store.resource_version)
    assert [p["metadata"]["name"] for p in everything["items"]] == ["a", "b", "c"]
    assert "kind" not in everything["items"][0]
    assert [p["metadata"]["name"] for p in store.list(PODS, "default")["items"]] == ["a", "b"]
    by_label = store.list(PODS, None, label_selector="app in (x)")
    assert [p["metadata"]["name"] for p in by_label["items"]] == ["b", "c"]
    by_field = store.list(PODS, None, field_selector="metadata.namespace=other")
    assert [p["metadata"]["name"] for p in by_field["items"]] == ["c"]
    raises(400, "BadRequest", store.list, PODS, None, label_selector="app in (")


def test_list_order_is_etcd_key_order(store: ObjectStore) -> None:
    for namespace in ("a", "a-b"):
        store.create(NAMESPACES, None, {"metadata": {"name": namespace}})
    store.create(CONFIGMAPS, "a", {"metadata": {"name": "z"}})
    store.create(CONFIGMAPS, "a-b", {"metadata": {"name": "c"}})
    listed = store.list(CONFIGMAPS, None)["items"]
    assert [(c["metadata"]["namespace"], c["metadata"]["name"]) for c in listed] == [
        ("a-b", "c"),  # "a-b/c" < "a/z"
        ("a", "z"),
    ]
    page = store.list(CONFIGMAPS, None, limit=1, label_selector="x!=y")
    assert "continue" in page["metadata"] and "remainingItemCount" not in page["metadata"]
    rest = store.list(CONFIGMAPS, None, limit=1, continue_token=page["metadata"]["continue"])
    assert [c["metadata"]["name"] for c in rest["items"]] == ["z"]


def test_list_pages_with_limit_and_continue(store: ObjectStore) -> None:
    for name in ("a", "b", "c", "d", "e"):
        store.create(CONFIGMAPS, "default", {"metadata": {"name": name}})
    first = store.list(CONFIGMAPS, "default", limit=2)
    assert [c["metadata"]["name"] for c in first["items"]] == ["a", "b"]
    assert first["metadata"]["remainingItemCount"] == 3
    version = first["metadata"]["resourceVersion"]
    # changes after the first page do not show in the later ones (one consistent snapshot)
    store.create(CONFIGMAPS, "default", {"metadata": {"name": "f"}})
    store.patch(CONFIGMAPS, "default", "c", {"data": {"k": "new"}}, MERGE)
    store.delete(CONFIGMAPS, "default", "d")
    second = store.list(
        CONFIGMAPS, "default", limit=2, continue_token=first["metadata"]["continue"]
    )
    assert [c["metadata"]["name"] for c in second["items"]] == ["c", "d"]
    assert "data" not in second["items"][0]
    assert second["metadata"]["resourceVersion"] == version
    third = store.list(
        CONFIGMAPS, "default", limit=2, continue_token=second["metadata"]["continue"]
    )
    assert [c["metadata"]["name"] for c in third["items"]] == ["e"]
    assert "continue" not in third["metadata"]
    fresh = store.list(CONFIGMAPS, "default")
    assert [c["metadata"]["name"] for c in fresh["items"]] == ["a", "b", "c", "e", "f"]
    raises(400, "BadRequest", store.list, CONFIGMAPS, "default", continue_token="garbage!")
    store.compact()
    raises(
        410,
        "Expired",
        store.list,
        CONFIGMAPS,
        "default",
        limit=2,
        continue_token=first["metadata"]["continue"],
    )


# ------------------------------------------------------------------------------------ updates


def test_replace_conflicts_on_stale_version(store: ObjectStore) -> None:
    pod = store.create(PODS, "default", pod_body("p1"))
    pod["metadata"]["labels"] = {"a": "1"}
    updated = store.replace(PODS, "default", "p1", pod)
    assert updated["metadata"]["labels"] == {"a": "1"}
    assert int(updated["metadata"]["resourceVersion"]) > int(pod["metadata"]["resourceVersion"])
    error = raises(409, "Conflict", store.replace, PODS, "default", "p1", pod)
    assert "the object has been modified" in error.message
    unconditional = dict(updated)
    unconditional["metadata"] = {**updated["metadata"], "resourceVersion": ""}
    store.replace(PODS, "default", "p1", unconditional)
    other_uid = {**unconditional, "metadata": {**unconditional["metadata"], "uid": "x"}}
    error = raises(409, "Conflict", store.replace, PODS, "default", "p1", other_uid)
    assert "Precondition failed: UID in precondition: x" in error.message
    raises(404, "NotFound", store.replace, PODS, "default", "nope", {"metadata": {"name": "nope"}})
    raises(400, "BadRequest", store.replace, PODS, "default", "other", updated)


def test_status_only_changes_through_the_subresource(store: ObjectStore) -> None:
    store.create(PODS, "default", pod_body("p1"))
    patched = store.patch(PODS, "default", "p1", {"status": {"phase": "Running"}}, MERGE)
    assert patched["status"]["phase"] == "Pending"
    via_status = store.patch(
        PODS,
        "default",
        "p1",
        {"status": {"phase": "Running"}, "metadata": {"labels": {"x": "y"}}},
        MERGE,
        subresource="status",
    )
    assert via_status["status"]["phase"] == "Running"
    assert "labels" not in via_status["metadata"]  # {} is omitted, and /status kept it
    current = store.get(PODS, "default", "p1")
    current["status"] = {"phase": "Failed"}
    assert store.replace(PODS, "default", "p1", current)["status"]["phase"] == "Running"
    raises(
        404, "NotFound", store.patch, CONFIGMAPS, "default", "p1", {}, MERGE, subresource="status"
    )


def test_generation_counts_spec_changes_only(store: ObjectStore) -> None:
    store.create(
        CRONJOBS,
        "default",
        {
            "metadata": {"name": "cj"},
            "spec": {"schedule": "*/5 * * * *", "jobTemplate": job_body("x")},
        },
    )
    labelled = store.patch(CRONJOBS, "default", "cj", {"metadata": {"labels": {"a": "b"}}}, MERGE)
    assert labelled["metadata"]["generation"] == 1
    suspended = store.patch(CRONJOBS, "default", "cj", {"spec": {"suspend": True}}, MERGE)
    assert suspended["metadata"]["generation"] == 2
    status = store.patch(
        CRONJOBS, "default", "cj", {"status": {"active": []}}, MERGE, subresource="status"
    )
    assert status["metadata"]["generation"] == 2


def test_a_write_that_changes_nothing_is_not_an_event(store: ObjectStore) -> None:
    created = store.create(CONFIGMAPS, "default", {"metadata": {"name": "c"}, "data": {"k": "v"}})
    watcher = store.watch(CONFIGMAPS, "default", resource_version=store.resource_version)
    version = store.resource_version
    same = store.patch(CONFIGMAPS, "default", "c", {"data": {"k": "v"}}, MERGE)
    assert same == created
    store.replace(CONFIGMAPS, "default", "c", created)
    store.remove_finalizer(CONFIGMAPS, "default", "c", "not-there")
    assert store.resource_version == version
    assert watcher.next(0) is None


def test_patch_content_types(store: ObjectStore) -> None:
    store.create(CONFIGMAPS, "default", {"metadata": {"name": "c"}, "data": {"a": "1"}})
    raises(415, "UnsupportedMediaType", store.patch, CONFIGMAPS, "default", "c", {}, "text/plain")
    json_patched = store.patch(
        CONFIGMAPS,
        "default",
        "c",
        [{"op": "add", "path": "/data/b", "value": "2"}],
        "application/json-patch+json",
    )
    assert json_patched["data"] == {"a": "1", "b": "2"}
    dry = store.patch(CONFIGMAPS, "default", "c", {"data": {"a": None}}, MERGE, dry_run=True)
    assert dry["data"] == {"b": "2"}
    assert store.get(CONFIGMAPS, "default", "c")["data"] == {"a": "1", "b": "2"}
    raises(404, "NotFound", store.patch, CONFIGMAPS, "default", "missing", {}, MERGE)


def test_update_internal_and_bind(store: ObjectStore) -> None:
    store.create(PODS, "default", pod_body("p1"))
    changed = store.update_internal(
        PODS, "default", "p1", lambda pod: pod["status"].update(phase="Running")
    )
    assert changed["status"]["phase"] == "Running"
    bound = store.bind_pod("default", "p1", "node-a")
    assert bound["spec"]["nodeName"] == "node-a"
    assert bound["status"]["conditions"][0]["type"] == "PodScheduled"
    raises(409, "Conflict", store.bind_pod, "default", "p1", "node-b")


# ------------------------------------------------------------------------------------- delete


def test_delete_unbound_pod_is_immediate(store: ObjectStore) -> None:
    store.create(PODS, "default", pod_body("p1"))
    deleted = store.delete(PODS, "default", "p1", grace_period_seconds=30)
    assert deleted["kind"] == "Pod" and deleted["metadata"]["name"] == "p1"
    assert deleted["metadata"]["deletionTimestamp"] == "2026-12-04T16:00:00Z"
    assert deleted["metadata"]["deletionGracePeriodSeconds"] == 0
    raises(404, "NotFound", store.get, PODS, "default", "p1")
    raises(404, "NotFound", store.delete, PODS, "default", "p1")


def test_delete_bound_pod_waits_for_the_kubelet(store: ObjectStore, clock: FakeClock) -> None:
    store.create(PODS, "default", pod_body("p1"))
    bound = store.bind_pod("default", "p1", "node-a")
    watcher = store.watch(
        PODS, "default", resource_version=int(bound["metadata"]["resourceVersion"])
    )
    marked = store.delete(PODS, "default", "p1")
    assert marked["metadata"]["deletionGracePeriodSeconds"] == 30
    assert marked["metadata"]["deletionTimestamp"] == "2026-12-04T16:00:30Z"
    assert store.get(PODS, "default", "p1")["metadata"]["deletionTimestamp"]
    clock.advance_to(START + timedelta(seconds=5))
    again = store.delete(PODS, "default", "p1", grace_period_seconds=10)
    assert again["metadata"]["deletionGracePeriodSeconds"] == 10
    assert again["metadata"]["deletionTimestamp"] == "2026-12-04T16:00:10Z"  # from the request
    store.patch(
        PODS, "default", "p1", {"status": {"phase": "Succeeded"}}, MERGE, subresource="status"
    )
    unchanged = store.delete(PODS, "default", "p1")  # no shorter grace asked: still pending
    assert unchanged["metadata"]["deletionGracePeriodSeconds"] == 10
    store.delete(PODS, "default", "p1", grace_period_seconds=0)
    raises(404, "NotFound", store.get, PODS, "default", "p1")
    events = []
    while (event := watcher.next(0)) is not None:
        events.append((event.type, event.object["metadata"]["deletionGracePeriodSeconds"]))
    assert events == [
        ("MODIFIED", 30),
        ("MODIFIED", 10),
        ("MODIFIED", 10),
        ("MODIFIED", 0),
        ("DELETED", 0),
    ]


def test_delete_preconditions_and_dry_run(store: ObjectStore) -> None:
    secret = store.create(SECRETS, "default", {"metadata": {"name": "s"}, "stringData": {"k": "v"}})
    assert secret["data"] == {"k": "dg=="} and secret["type"] == "Opaque"
    raises(409, "Conflict", store.delete, SECRETS, "default", "s", preconditions={"uid": "other"})
    reply = store.delete(SECRETS, "default", "s", dry_run=True)
    assert reply["status"] == "Success"
    assert store.get(SECRETS, "default", "s")
    reply = store.delete(SECRETS, "default", "s")
    assert reply["kind"] == "Status" and reply["details"]["uid"] == secret["metadata"]["uid"]
    store.create(SERVICEACCOUNTS, "default", {"metadata": {"name": "sa"}})
    assert store.delete(SERVICEACCOUNTS, "default", "sa")["kind"] == "ServiceAccount"


def test_finalizers_hold_deletion_until_removed(store: ObjectStore) -> None:
    store.create(CONFIGMAPS, "default", {"metadata": {"name": "c", "finalizers": ["x/y"]}})
    marked = store.delete(CONFIGMAPS, "default", "c")
    assert marked["metadata"]["deletionTimestamp"] == "2026-12-04T16:00:00Z"
    store.remove_finalizer(CONFIGMAPS, "default", "c", "x/y")
    raises(404, "NotFound", store.get, CONFIGMAPS, "default", "c")
    store.remove_finalizer(CONFIGMAPS, "default", "c", "x/y")  # gone: no error


def test_propagation_policies_record_finalizers(store: ObjectStore) -> None:
    for name in ("orphaned", "foreground", "background"):
        store.create(JOBS, "default", job_body(name))
    default = store.delete(JOBS, "default", "orphaned")
    assert default["metadata"]["finalizers"] == ["orphan"]
    assert default["metadata"]["generation"] == 2
    foreground = store.delete(JOBS, "default", "foreground", propagation_policy="Foreground")
    assert foreground["metadata"]["finalizers"] == ["foregroundDeletion"]
    background = store.delete(JOBS, "default", "background", propagation_policy="Background")
    assert background["status"] == "Success"
    assert [j["metadata"]["name"] for j in store.objects_of(JOBS)] == ["foreground", "orphaned"]
    store.remove_finalizer(JOBS, "default", "orphaned", "orphan")
    assert [j["metadata"]["name"] for j in store.objects_of(JOBS)] == ["foreground"]
    raises(422, "Invalid", store.delete, JOBS, "default", "foreground", propagation_policy="All")


def test_a_second_delete_can_change_the_propagation_policy(store: ObjectStore) -> None:
    store.create(JOBS, "default", job_body("j"))
    assert store.delete(JOBS, "default", "j")["metadata"]["finalizers"] == ["orphan"]
    unchanged = store.delete(JOBS, "default", "j")
    assert unchanged["metadata"]["finalizers"] == ["orphan"]
    foreground = store.delete(JOBS, "default", "j", propagation_policy="Foreground")
    assert foreground["metadata"]["finalizers"] == ["foregroundDeletion"]
    store.delete(JOBS, "default", "j", propagation_policy="Background")
    assert store.objects_of(JOBS) == []


def test_namespace_termination(store: ObjectStore) -> None:
    store.create(NAMESPACES, None, {"metadata": {"name": "ns1"}})
    store.create(CONFIGMAPS, "ns1", {"metadata": {"name": "c"}})
    terminating = store.delete(NAMESPACES, None, "ns1")
    assert terminating["status"]["phase"] == "Terminating"
    assert terminating["metadata"]["deletionTimestamp"]
    error = raises(403, "Forbidden", store.create, CONFIGMAPS, "ns1", {"metadata": {"name": "d"}})
    assert error.message.endswith("because it is being terminated")
    error = raises(
        409, "AlreadyExists", store.create, NAMESPACES, None, {"metadata": {"name": "ns1"}}
    )
    assert error.message == 'object is being deleted: namespaces "ns1" already exists'
    store.delete(CONFIGMAPS, "ns1", "c")
    store.update_internal(NAMESPACES, None, "ns1", lambda ns: ns["spec"].update(finalizers=[]))
    raises(404, "NotFound", store.get, NAMESPACES, None, "ns1")
    raises(403, "Forbidden", store.delete, NAMESPACES, None, "default")


# -------------------------------------------------------------------------------------- watch


def drain(watcher: Any) -> list[tuple[str, str]]:
    events = []
    while (event := watcher.next(0)) is not None:
        events.append((event.type, event.object["metadata"]["name"]))
    return events


def test_watch_starts_with_current_objects_then_live_changes(store: ObjectStore) -> None:
    store.create(PODS, "default", pod_body("old"))
    watcher = store.watch(PODS, "default")
    store.create(PODS, "default", pod_body("new"))
    store.create(PODS, "kube-system", pod_body("elsewhere"))
    store.delete(PODS, "default", "old")
    assert drain(watcher) == [
        ("ADDED", "old"),
        ("ADDED", "new"),
        ("MODIFIED", "old"),  # a pod's deletion is recorded (grace 0), then carried out
        ("DELETED", "old"),
    ]
    watcher.close()
    assert watcher.next(0) is None


def test_watch_from_version_replays_history_and_expires(store: ObjectStore) -> None:
    first = store.create(PODS, "default", pod_body("a"))
    store.create(PODS, "default", pod_body("b"))
    version = int(first["metadata"]["resourceVersion"])
    assert drain(store.watch(PODS, "default", resource_version=version)) == [("ADDED", "b")]
    future = store.watch(PODS, "default", resource_version=store.resource_version + 5)
    store.create(PODS, "default", pod_body("c"))
    assert drain(future) == []  # only changes after the requested version
    store.compact()
    error = raises(410, "Expired", store.watch, PODS, "default", resource_version=version)
    assert error.message.startswith(f"too old resource version: {version} (")
    assert drain(store.watch(PODS, "default", resource_version=store.resource_version)) == []


def test_watch_history_is_bounded(clock: FakeClock) -> None:
    store = ObjectStore(clock, history_limit=3)
    start = store.resource_version
    for name in ("a", "b", "c", "d"):
        store.create(CONFIGMAPS, "default", {"metadata": {"name": name}})
    raises(410, "Expired", store.watch, CONFIGMAPS, None, resource_version=start)
    assert drain(store.watch(CONFIGMAPS, None, resource_version=start + 1)) == [
        ("ADDED", "b"),
        ("ADDED", "c"),
        ("ADDED", "d"),
    ]


def test_selector_transitions_are_added_and_deleted(store: ObjectStore) -> None:
    store.create(PODS, "default", pod_body("p", app="web"))
    watcher = store.watch(PODS, "default", label_selector="app=web")
    phase = store.watch(PODS, None, field_selector="status.phase=Running")
    left = store.patch(PODS, "default", "p", {"metadata": {"labels": {"app": "db"}}}, MERGE)
    store.patch(PODS, "default", "p", {"metadata": {"labels": {"app": "web"}}}, MERGE)
    store.patch(PODS, "default", "p", {"metadata": {"labels": {"v": "2"}}}, MERGE)
    events = []
    while (event := watcher.next(0)) is not None:
        events.append(event)
    assert [e.type for e in events] == ["ADDED", "DELETED", "ADDED", "MODIFIED"]
    # leaving: the last matching content, at the version of the change that made it leave
    assert events[1].object["metadata"]["labels"] == {"app": "web"}
    assert events[1].object["metadata"]["resourceVersion"] == left["metadata"]["resourceVersion"]
    assert events[1].resource_version == int(left["metadata"]["resourceVersion"])
    assert events[2].object["metadata"]["labels"] == {"app": "web"}
    store.patch(PODS, "default", "p", {"status": {"phase": "Running"}}, MERGE, subresource="status")
    assert drain(phase) == [("ADDED", "p")]


def test_watch_events_are_copies_and_bookmarks_follow_delivery(store: ObjectStore) -> None:
    watcher = store.watch(CONFIGMAPS, "default", send_bookmarks=True)
    store.create(CONFIGMAPS, "default", {"metadata": {"name": "c"}, "data": {"k": "v"}})
    assert watcher.bookmark() is None  # an event is still queued
    event = watcher.next(1)
    assert event is not None
    event.object["data"]["k"] = "changed"
    assert store.get(CONFIGMAPS, "default", "c")["data"] == {"k": "v"}
    bookmark = watcher.bookmark()
    assert bookmark is not None and bookmark.type == "BOOKMARK"
    assert bookmark.object["metadata"]["resourceVersion"] == str(store.resource_version)


def test_watch_wakes_a_waiting_reader(store: ObjectStore) -> None:
    watcher = store.watch(CONFIGMAPS, "default", resource_version=store.resource_version)
    got: list[WatchEvent | None] = []
    reader = threading.Thread(target=lambda: got.append(watcher.next(10)))
    reader.start()
    store.create(CONFIGMAPS, "default", {"metadata": {"name": "c"}})
    reader.join(10)
    assert got and got[0] is not None and got[0].type == "ADDED"
    store.drop_watches()
    assert watcher.closed and watcher.next(0) is None


# ---------------------------------------------------------------------------------- listeners


def test_listeners_see_changes_in_commit_order_including_their_own(store: ObjectStore) -> None:
    seen: list[tuple[str, str, str]] = []

    def on_change(event: WatchEvent) -> None:
        seen.append(
            (
                event.type,
                event.rtype.plural if event.rtype else "",
                event.object["metadata"]["name"],
            )
        )
        if event.type == "ADDED" and event.rtype == JOBS:
            # A controller writing from inside a listener: delivered after this call returns.
            store.create(PODS, "default", pod_body(event.object["metadata"]["name"] + "-pod"))
            seen.append(("created", "pods", "inside"))

    def second(event: WatchEvent) -> None:
        seen.append(("second", "", event.object["metadata"]["name"]))

    store.subscribe(on_change)
    store.subscribe(second)
    store.create(JOBS, "default", job_body("j"))
    assert seen == [
        ("ADDED", "jobs", "j"),
        ("created", "pods", "inside"),
        ("second", "", "j"),
        ("ADDED", "pods", "j-pod"),
        ("second", "", "j-pod"),
    ]


def test_listener_gets_old_object_and_failures_do_not_break_writes(store: ObjectStore) -> None:
    olds: list[Any] = []

    def failing(event: WatchEvent) -> None:
        olds.append(event.old_object)
        raise RuntimeError("listener bug")

    store.subscribe(failing)
    store.create(CONFIGMAPS, "default", {"metadata": {"name": "c"}, "data": {"k": "1"}})
    store.patch(CONFIGMAPS, "default", "c", {"data": {"k": "2"}}, MERGE)
    assert olds[0] is None and olds[1]["data"] == {"k": "1"}


def test_timestamps_follow_the_fake_clock(store: ObjectStore, clock: FakeClock) -> None:
    clock.advance_to(START + timedelta(minutes=5, seconds=7))
    pod = store.create(PODS, "default", pod_body("p"))
    assert pod["metadata"]["creationTimestamp"] == "2026-12-04T16:05:07Z"
    with pytest.raises(ValueError):
        clock.advance_to(START)


def test_concurrent_writers_keep_one_ordered_history(store: ObjectStore) -> None:
    heard: list[int] = []
    store.subscribe(lambda event: heard.append(event.resource_version))
    watcher = store.watch(CONFIGMAPS, None, resource_version=store.resource_version)
    errors: list[BaseException] = []

    def write(prefix: str) -> None:
        try:
            for i in range(40):
                store.create(CONFIGMAPS, "default", {"metadata": {"name": f"{prefix}-{i}"}})
                store.patch(CONFIGMAPS, "default", f"{prefix}-{i}", {"data": {"i": str(i)}}, MERGE)
        except BaseException as error:  # surfaced below
            errors.append(error)

    writers = [threading.Thread(target=write, args=(f"w{n}",)) for n in range(4)]
    for thread in writers:
        thread.start()
    for thread in writers:
        thread.join(30)
    assert not errors
    assert len(heard) == 320 and heard == sorted(heard)
    seen = []
    while (event := watcher.next(0)) is not None:
        seen.append(event.resource_version)
    assert seen == heard
    assert len(store.objects_of(CONFIGMAPS)) == 160


def test_patches_without_a_version_never_conflict_with_concurrent_writes(
    store: ObjectStore,
) -> None:
    """A patch that states no resourceVersion applies to whatever is current (a real server
    retries it internally); one that states a stale version is a 409."""
    store.create(PODS, "default", pod_body("busy", app="x"))
    failures: list[Exception] = []

    def patch_many(writer: int) -> None:
        for i in range(40):
            body = {"metadata": {"annotations": {f"w{writer}-{i}": "x"}}}
            try:
                store.patch(PODS, "default", "busy", body, MERGE)
                json_patch = [
                    {"op": "add", "path": f"/metadata/labels/j{writer}-{i}", "value": "y"}
                ]
                store.patch(PODS, "default", "busy", json_patch, "application/json-patch+json")
            except Exception as error:  # collected: an assertion in a thread would be lost
                failures.append(error)

    threads = [threading.Thread(target=patch_many, args=(w,)) for w in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert failures == []
    pod = store.get(PODS, "default", "busy")
    assert len(pod["metadata"]["annotations"]) == 240
    assert len([k for k in pod["metadata"]["labels"] if k.startswith("j")]) == 240
    stale = {"metadata": {"resourceVersion": "1", "annotations": {"late": "x"}}}
    raises(409, "Conflict", store.patch, PODS, "default", "busy", stale, MERGE)
    stale_test = [{"op": "test", "path": "/metadata/resourceVersion", "value": "1"}]
    with pytest.raises(ApiError):
        store.patch(PODS, "default", "busy", stale_test, "application/json-patch+json")
