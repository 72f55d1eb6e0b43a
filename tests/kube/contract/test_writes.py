"""Writes: merge, strategic-merge and JSON patches, PUT conflicts, the status subresource, dryRun."""

from __future__ import annotations

from typing import Any

from tests.kube.contract.conftest import JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH, Target


def _config_map(target: Target, data: dict[str, str]) -> dict[str, Any]:
    return target.raw(
        target.core.create_namespaced_config_map,
        target.namespace,
        target.config_map_manifest("cm", data, labels={"keep": "yes", "drop": "yes"}),
    )


def test_merge_patch_sets_and_removes_keys(target: Target) -> None:
    _config_map(target, {"a": "1", "b": "2"})
    patched = target.raw(
        target.core.patch_namespaced_config_map,
        "cm",
        target.namespace,
        {"data": {"b": None, "c": "3"}, "metadata": {"labels": {"drop": None, "new": "x"}}},
        _content_type=MERGE_PATCH,
    )
    assert patched["data"] == {"a": "1", "c": "3"}
    assert patched["metadata"]["labels"] == {"keep": "yes", "new": "x"}


def _two_container_pod(target: Target) -> None:
    containers = [
        {"name": "main", "image": "busybox:1.36", "command": ["true"]},
        {"name": "side", "image": "busybox:1.36", "command": ["true"]},
    ]
    target.core.create_namespaced_pod(
        target.namespace, target.pod_manifest("p", containers=containers)
    )


def test_strategic_merge_patch_merges_containers_by_name(target: Target) -> None:
    _two_container_pod(target)
    patched = target.raw(
        target.core.patch_namespaced_pod,
        "p",
        target.namespace,
        {"spec": {"containers": [{"name": "side", "image": "busybox:1.37"}]}},
        _content_type=STRATEGIC_MERGE_PATCH,
    )
    containers = patched["spec"]["containers"]
    assert [(c["name"], c["image"]) for c in containers] == [
        ("main", "busybox:1.36"),
        ("side", "busybox:1.37"),
    ]
    assert containers[1]["command"] == ["true"]


def test_merge_patch_replaces_the_container_list_which_a_pod_refuses(target: Target) -> None:
    _two_container_pod(target)
    status, error = target.error(
        target.core.patch_namespaced_pod,
        "p",
        target.namespace,
        {"spec": {"containers": [{"name": "side", "image": "busybox:1.37"}]}},
        _content_type=MERGE_PATCH,
    )
    assert status == 422 and error["reason"] == "Invalid"
    pod = target.core.read_namespaced_pod("p", target.namespace)
    assert [c.image for c in pod.spec.containers] == ["busybox:1.36", "busybox:1.36"]


def test_strategic_merge_patch_merges_labels_on_a_job(target: Target) -> None:
    target.batch.create_namespaced_job(
        target.namespace, target.job_manifest("j", labels={"a": "1"})
    )
    patched = target.raw(
        target.batch.patch_namespaced_job,
        "j",
        target.namespace,
        {"metadata": {"labels": {"b": "2"}, "annotations": {"wharf.io/note": "x"}}},
        _content_type=STRATEGIC_MERGE_PATCH,
    )
    assert patched["metadata"]["labels"] == {"a": "1", "b": "2"}
    assert patched["metadata"]["annotations"] == {"wharf.io/note": "x"}


def test_strategic_merge_patch_merges_finalizers_where_merge_patch_replaces(target: Target) -> None:
    body = target.config_map_manifest("cm")
    body["metadata"]["finalizers"] = ["example.com/a"]
    target.core.create_namespaced_config_map(target.namespace, body)
    try:
        merged = target.raw(
            target.core.patch_namespaced_config_map,
            "cm",
            target.namespace,
            {"metadata": {"finalizers": ["example.com/b"]}},
            _content_type=STRATEGIC_MERGE_PATCH,
        )
        assert sorted(merged["metadata"]["finalizers"]) == ["example.com/a", "example.com/b"]
        replaced = target.raw(
            target.core.patch_namespaced_config_map,
            "cm",
            target.namespace,
            {"metadata": {"finalizers": ["example.com/c"]}},
            _content_type=MERGE_PATCH,
        )
        assert replaced["metadata"]["finalizers"] == ["example.com/c"]
    finally:
        target.core.patch_namespaced_config_map(
            "cm", target.namespace, {"metadata": {"finalizers": None}}, _content_type=MERGE_PATCH
        )


def test_json_patch_operations(target: Target) -> None:
    created = _config_map(target, {"a": "1", "b": "2"})
    patched = target.raw(
        target.core.patch_namespaced_config_map,
        "cm",
        target.namespace,
        [
            {"op": "test", "path": "/metadata/resourceVersion",
             "value": created["metadata"]["resourceVersion"]},
            {"op": "replace", "path": "/data/a", "value": "10"},
            {"op": "remove", "path": "/data/b"},
            {"op": "add", "path": "/data/c", "value": "3"},
            {"op": "add", "path": "/metadata/labels/wharf.io~1step", "value": "s"},
        ],
        _content_type=JSON_PATCH,
    )  # fmt: skip
    assert patched["data"] == {"a": "10", "c": "3"}
    assert patched["metadata"]["labels"]["wharf.io/step"] == "s"


def test_a_failing_json_patch_test_operation_changes_nothing(target: Target) -> None:
    _config_map(target, {"a": "1"})
    status, error = target.error(
        target.core.patch_namespaced_config_map,
        "cm",
        target.namespace,
        [
            {"op": "test", "path": "/data/a", "value": "2"},
            {"op": "replace", "path": "/data/a", "value": "3"},
        ],
        _content_type=JSON_PATCH,
    )
    assert status == 422 and error["reason"] == "Invalid", error
    assert target.core.read_namespaced_config_map("cm", target.namespace).data == {"a": "1"}


def test_put_with_a_stale_resource_version_is_a_conflict(target: Target) -> None:
    stale = _config_map(target, {"a": "1"})
    target.core.patch_namespaced_config_map(
        "cm", target.namespace, {"data": {"a": "2"}}, _content_type=MERGE_PATCH
    )
    stale["data"] = {"a": "3"}
    status, error = target.error(
        target.core.replace_namespaced_config_map, "cm", target.namespace, stale
    )
    assert status == 409
    assert error["reason"] == "Conflict"
    assert error["details"] == {"name": "cm", "kind": "configmaps"}
    assert "the object has been modified" in error["message"]
    assert target.core.read_namespaced_config_map("cm", target.namespace).data == {"a": "2"}


def test_put_with_the_current_resource_version_replaces(target: Target) -> None:
    current = _config_map(target, {"a": "1"})
    current["data"] = {"b": "2"}
    replaced = target.raw(
        target.core.replace_namespaced_config_map, "cm", target.namespace, current
    )
    assert replaced["data"] == {"b": "2"}
    assert int(replaced["metadata"]["resourceVersion"]) > int(
        current["metadata"]["resourceVersion"]
    )
    del replaced["metadata"]["resourceVersion"]  # no version: an unconditional update
    replaced["data"] = {"c": "3"}
    again = target.raw(target.core.replace_namespaced_config_map, "cm", target.namespace, replaced)
    assert again["data"] == {"c": "3"}


def test_pod_status_changes_only_through_the_status_subresource(target: Target) -> None:
    ns = target.namespace
    target.core.create_namespaced_pod(ns, target.pod_manifest("p"))
    patched = target.raw(
        target.core.patch_namespaced_pod,
        "p",
        ns,
        {"metadata": {"labels": {"seen": "yes"}}, "status": {"phase": "Running"}},
        _content_type=MERGE_PATCH,
    )
    assert patched["metadata"]["labels"] == {"seen": "yes"}
    assert patched["status"]["phase"] == "Pending"

    replaced_body = target.raw(target.core.read_namespaced_pod, "p", ns)
    replaced_body["status"]["phase"] = "Succeeded"
    replaced = target.raw(target.core.replace_namespaced_pod, "p", ns, replaced_body)
    assert replaced["status"]["phase"] == "Pending"

    status_patch = {
        "status": {"phase": "Running"},
        "spec": {"containers": [{"name": "main", "image": "busybox:9"}]},
    }
    via_status = target.raw(
        target.core.patch_namespaced_pod_status, "p", ns, status_patch,
        _content_type=STRATEGIC_MERGE_PATCH,
    )  # fmt: skip
    assert via_status["status"]["phase"] == "Running"
    assert via_status["spec"]["containers"][0]["image"] == "busybox:1.36"  # spec ignored there
    assert target.core.read_namespaced_pod("p", ns).status.phase == "Running"
    assert target.core.read_namespaced_pod_status("p", ns).status.phase == "Running"


def test_job_status_is_not_changed_through_the_main_resource(target: Target) -> None:
    target.batch.create_namespaced_job(target.namespace, target.job_manifest("j"))
    patched = target.raw(
        target.batch.patch_namespaced_job,
        "j",
        target.namespace,
        {"status": {"succeeded": 5}},
        _content_type=MERGE_PATCH,
    )
    assert patched.get("status", {}).get("succeeded") in (None, 0)


def test_dry_run_create_returns_the_object_and_stores_nothing(target: Target) -> None:
    ns = target.namespace
    pod = target.raw(target.core.create_namespaced_pod, ns, target.pod_manifest("p"), dry_run="All")
    assert pod["metadata"]["name"] == "p" and pod["metadata"]["namespace"] == ns
    assert pod["spec"]["restartPolicy"] == "Always" and pod["status"]["phase"] == "Pending"
    assert not pod["metadata"].get("resourceVersion")  # never stored
    assert target.core.list_namespaced_pod(ns).items == []
    assert not target.exists(target.core.read_namespaced_pod, "p")


def test_dry_run_create_still_validates(target: Target) -> None:
    status, error = target.error(
        target.core.create_namespaced_pod,
        target.namespace,
        target.pod_manifest("Bad_Name"),
        dry_run="All",
    )
    assert status == 422 and error["reason"] == "Invalid"


def test_dry_run_patch_and_delete_change_nothing(target: Target) -> None:
    ns = target.namespace
    _config_map(target, {"a": "1"})
    patched = target.raw(
        target.core.patch_namespaced_config_map, "cm", ns, {"data": {"a": "2"}},
        _content_type=MERGE_PATCH, dry_run="All",
    )  # fmt: skip
    assert patched["data"] == {"a": "2"}
    target.core.delete_namespaced_config_map("cm", ns, dry_run="All")
    assert target.core.read_namespaced_config_map("cm", ns).data == {"a": "1"}


def test_container_statuses_round_trip_through_the_status_subresource(target: Target) -> None:
    ns = target.namespace
    target.core.create_namespaced_pod(ns, target.pod_manifest("p"))
    waiting = {
        "phase": "Pending",
        "containerStatuses": [
            {"name": "main", "ready": False, "restartCount": 0, "image": "busybox:1.36",
             "imageID": "", "state": {"waiting": {"reason": "ImagePullBackOff",
                                                 "message": "Back-off pulling image"}}}
        ],
    }  # fmt: skip
    target.core.patch_namespaced_pod_status("p", ns, {"status": waiting}, _content_type=MERGE_PATCH)
    pod = target.core.read_namespaced_pod("p", ns)
    assert pod.status.container_statuses[0].state.waiting.reason == "ImagePullBackOff"
    terminated = {
        "phase": "Failed",
        "containerStatuses": [
            {"name": "main", "ready": False, "restartCount": 0, "image": "busybox:1.36",
             "imageID": "", "state": {"terminated": {
                 "exitCode": 3, "reason": "Error",
                 "startedAt": "2026-01-01T00:00:00Z", "finishedAt": "2026-01-01T00:00:05Z"}}}
        ],
    }  # fmt: skip
    target.core.patch_namespaced_pod_status(
        "p", ns, {"status": terminated}, _content_type=MERGE_PATCH
    )
    pod = target.core.read_namespaced_pod("p", ns)
    assert pod.status.phase == "Failed"
    [status] = pod.status.container_statuses
    assert status.state.terminated.exit_code == 3
    assert status.state.terminated.reason == "Error"
    assert status.state.waiting is None


def test_writes_to_a_missing_object_are_not_found(target: Target) -> None:
    ns = target.namespace
    status, error = target.error(
        target.core.patch_namespaced_config_map, "nope", ns, {"data": {"a": "1"}},
        _content_type=MERGE_PATCH,
    )  # fmt: skip
    assert status == 404 and error["reason"] == "NotFound"
    status, error = target.error(
        target.core.replace_namespaced_config_map, "nope", ns, target.config_map_manifest("nope")
    )
    assert status == 404 and error["reason"] == "NotFound"
    status, error = target.error(
        target.core.patch_namespaced_pod_status, "nope", ns, {"status": {"phase": "Running"}},
        _content_type=MERGE_PATCH,
    )  # fmt: skip
    assert status == 404 and error["details"] == {"name": "nope", "kind": "pods"}


def test_the_clients_default_for_a_dict_patch_is_a_strategic_merge(target: Target) -> None:
    """kubernetes.client sends a dict patch without ``_content_type`` as a strategic merge."""
    _two_container_pod(target)
    target.core.patch_namespaced_pod(
        "p", target.namespace, {"spec": {"containers": [{"name": "side", "image": "busybox:1.37"}]}}
    )
    pod = target.core.read_namespaced_pod("p", target.namespace)
    assert [(c.name, c.image) for c in pod.spec.containers] == [
        ("main", "busybox:1.36"),
        ("side", "busybox:1.37"),
    ]
