"""Unit tests of the emulator's object store, without HTTP: creating, listing and updating
objects, their versions and generations."""

from __future__ import annotations

from tests.kube.emulator.resources import (
    CONFIGMAPS,
    CRONJOBS,
    JOBS,
    NAMESPACES,
    PODS,
    SECRETS,
)
from tests.kube.emulator.store import ObjectStore
from tests.kube.store_testing import (
    MERGE,
    clock,
    job_body,
    pod_body,
    raises,
    store,
)

__all__ = ["clock", "store"]  # the fixtures


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
