"""Deletion: grace periods of bound and unbound pods, propagation policies, preconditions.

A bare kube-apiserver has no garbage collector: there an owner deleted in the foreground (or with
the orphan policy) keeps its finalizer for ever. On the emulator the collector finishes the job,
as a real cluster's controller manager does.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.kube.contract.conftest import MERGE_PATCH, Target


def _bind(target: Target, pod: str, node: str = "node-a") -> Any:
    body = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": pod},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }
    return target.raw(target.core.create_namespaced_pod_binding, pod, target.namespace, body)


def test_deleting_an_unbound_pod_removes_it_at_once(target: Target) -> None:
    target.core.create_namespaced_pod(target.namespace, target.pod_manifest("p"))
    deleted = target.raw(
        target.core.delete_namespaced_pod, "p", target.namespace, grace_period_seconds=30
    )
    assert deleted["kind"] == "Pod" and deleted["metadata"]["name"] == "p"
    assert "deletionTimestamp" in deleted["metadata"]  # the pod as it was removed
    assert not target.exists(target.core.read_namespaced_pod, "p")


def test_deleting_a_config_map_answers_a_success_status(target: Target) -> None:
    created = target.raw(
        target.core.create_namespaced_config_map,
        target.namespace,
        target.config_map_manifest("cm"),
    )
    answer = target.raw(target.core.delete_namespaced_config_map, "cm", target.namespace)
    assert answer["kind"] == "Status" and answer["status"] == "Success"
    assert answer["details"] == {
        "name": "cm",
        "kind": "configmaps",
        "uid": created["metadata"]["uid"],
    }


def test_binding_sets_the_node_once(target: Target) -> None:
    target.core.create_namespaced_pod(target.namespace, target.pod_manifest("p"))
    answer = _bind(target, "p")
    assert answer == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "code": 201,
    }
    assert target.core.read_namespaced_pod("p", target.namespace).spec.node_name == "node-a"
    body = {"metadata": {"name": "p"}, "target": {"kind": "Node", "name": "node-b"}}
    status, error = target.error(
        target.core.create_namespaced_pod_binding, "p", target.namespace, body
    )
    assert status == 409 and error["reason"] == "Conflict"
    assert error["details"] == {"name": "p", "kind": "pods/binding"}
    assert 'already assigned to node "node-a"' in error["message"]


def test_a_graceful_delete_of_a_bound_pod_waits_for_grace_zero(target: Target) -> None:
    ns = target.namespace
    target.core.create_namespaced_pod(ns, target.pod_manifest("p"))
    _bind(target, "p")
    bound_rv = target.raw(target.core.read_namespaced_pod, "p", ns)["metadata"]["resourceVersion"]

    deleting = target.raw(target.core.delete_namespaced_pod, "p", ns, grace_period_seconds=30)
    assert "deletionTimestamp" in deleting["metadata"]
    assert deleting["metadata"]["deletionGracePeriodSeconds"] == 30
    still = target.raw(target.core.read_namespaced_pod, "p", ns)
    assert "deletionTimestamp" in still["metadata"]

    target.core.delete_namespaced_pod("p", ns, grace_period_seconds=0)
    assert not target.exists(target.core.read_namespaced_pod, "p")
    events = target.watch_events(
        target.core.list_namespaced_pod,
        ns,
        resource_version=bound_rv,
        until=lambda e: e["type"] == "DELETED",
    )
    # the grace-0 delete first records grace 0 (MODIFIED), then removes the pod (DELETED)
    assert [e["type"] for e in events] == ["MODIFIED", "MODIFIED", "DELETED"]
    assert events[0]["object"]["metadata"]["deletionGracePeriodSeconds"] == 30
    assert events[1]["object"]["metadata"]["deletionGracePeriodSeconds"] == 0
    assert "deletionTimestamp" in events[0]["object"]["metadata"]


def test_deleting_a_finished_bound_pod_removes_it_at_once(target: Target) -> None:
    ns = target.namespace
    target.core.create_namespaced_pod(ns, target.pod_manifest("p"))
    _bind(target, "p")
    target.core.patch_namespaced_pod_status(
        "p", ns, {"status": {"phase": "Succeeded"}}, _content_type=MERGE_PATCH
    )
    target.core.delete_namespaced_pod("p", ns, grace_period_seconds=30)
    assert not target.exists(target.core.read_namespaced_pod, "p")


def _job_with_dependent_pod(target: Target) -> dict[str, Any]:
    job = target.raw(target.batch.create_namespaced_job, target.namespace, target.job_manifest("j"))
    owner = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": "j",
        "uid": job["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    pod = target.pod_manifest("dependent", restartPolicy="Never")
    pod["metadata"]["ownerReferences"] = [owner]
    target.core.create_namespaced_pod(target.namespace, pod)
    return job


def test_foreground_deletion_marks_the_owner_until_dependents_are_gone(target: Target) -> None:
    job = _job_with_dependent_pod(target)
    ns = target.namespace
    deleting = target.raw(
        target.batch.delete_namespaced_job, "j", ns, propagation_policy="Foreground"
    )
    assert "deletionTimestamp" in deleting["metadata"]
    assert "foregroundDeletion" in deleting["metadata"]["finalizers"]
    if target.is_emulator:  # the garbage collector removes the dependents, then the owner
        target.wait_for(
            lambda: not target.exists(target.core.read_namespaced_pod, "dependent"),
            what="the dependent pod to go",
        )
        target.wait_for(
            lambda: not target.exists(target.batch.read_namespaced_job, "j"), what="the job to go"
        )
    else:  # no garbage collector: the owner waits with its finalizer
        kept = target.raw(target.batch.read_namespaced_job, "j", ns)
        assert kept["metadata"]["uid"] == job["metadata"]["uid"]
        assert kept["metadata"]["finalizers"] == ["foregroundDeletion"]
        assert target.exists(target.core.read_namespaced_pod, "dependent")


def test_background_deletion_removes_the_owner_now(target: Target) -> None:
    _job_with_dependent_pod(target)
    ns = target.namespace
    target.batch.delete_namespaced_job("j", ns, propagation_policy="Background")
    assert not target.exists(target.batch.read_namespaced_job, "j")
    if target.is_emulator:
        target.wait_for(
            lambda: not target.exists(target.core.read_namespaced_pod, "dependent"),
            what="the garbage collector to delete the dependent pod",
        )


def test_a_batch_v1_job_deleted_without_a_policy_orphans_its_pods(target: Target) -> None:
    """batch/v1 Jobs default to the orphan policy (for compatibility): pass one explicitly."""
    _job_with_dependent_pod(target)
    ns = target.namespace
    deleting = target.raw(target.batch.delete_namespaced_job, "j", ns)
    if target.is_emulator:
        target.wait_for(
            lambda: not target.exists(target.batch.read_namespaced_job, "j"), what="the job to go"
        )
        dependent = target.raw(target.core.read_namespaced_pod, "dependent", ns)
        assert not dependent["metadata"].get("ownerReferences")
    else:  # the orphan finalizer waits for the garbage collector
        assert deleting["metadata"]["finalizers"] == ["orphan"]
        assert "deletionTimestamp" in deleting["metadata"]
        assert target.exists(target.core.read_namespaced_pod, "dependent")


def test_orphan_deletion_keeps_the_dependents(target: Target) -> None:
    _job_with_dependent_pod(target)
    ns = target.namespace
    target.batch.delete_namespaced_job("j", ns, propagation_policy="Orphan")
    if target.is_emulator:
        target.wait_for(
            lambda: not target.exists(target.batch.read_namespaced_job, "j"), what="the job to go"
        )
    assert target.exists(target.core.read_namespaced_pod, "dependent")


def test_a_delete_with_a_wrong_uid_precondition_is_a_conflict(target: Target) -> None:
    ns = target.namespace
    target.core.create_namespaced_config_map(ns, target.config_map_manifest("cm"))
    status, error = target.error(
        target.core.delete_namespaced_config_map,
        "cm",
        ns,
        body={"preconditions": {"uid": str(uuid.uuid4())}},
    )
    assert status == 409 and error["reason"] == "Conflict"
    assert target.exists(target.core.read_namespaced_config_map, "cm")


def test_deleting_a_missing_object_is_not_found(target: Target) -> None:
    status, error = target.error(target.batch.delete_namespaced_job, "nope", target.namespace)
    assert status == 404 and error["reason"] == "NotFound"
    assert error["details"] == {"name": "nope", "group": "batch", "kind": "jobs"}


def test_a_deleted_namespace_refuses_new_content(target: Target) -> None:
    doomed = f"wharf-contract-doomed-{uuid.uuid4().hex[:8]}"
    target.core.create_namespace({"metadata": {"name": doomed}})
    target.core.create_namespaced_config_map(doomed, target.config_map_manifest("cm"))
    target.core.delete_namespace(doomed)
    status, error = target.error(
        target.core.create_namespaced_config_map, doomed, target.config_map_manifest("late")
    )
    if status == 403:
        assert error["reason"] == "Forbidden"
        assert "because it is being terminated" in error["message"]
    else:  # already finalised (the emulator's namespace controller is prompt)
        assert target.is_emulator and status == 404
    if target.is_emulator:
        target.wait_for(
            lambda: not any(n.metadata.name == doomed for n in target.core.list_namespace().items),
            what="the namespace to be finalised",
        )
    else:
        assert target.core.read_namespace(doomed).status.phase == "Terminating"


@pytest.mark.emulator_only(reason="garbage collection needs a controller manager")
def test_a_deleted_namespace_takes_its_objects_along(target: Target) -> None:
    doomed = f"wharf-contract-doomed-{uuid.uuid4().hex[:8]}"
    target.core.create_namespace({"metadata": {"name": doomed}})
    target.core.create_namespaced_config_map(doomed, target.config_map_manifest("cm"))
    target.core.create_namespaced_pod(doomed, target.pod_manifest("p"))
    target.core.delete_namespace(doomed)
    target.wait_for(
        lambda: (
            not target.core.list_pod_for_all_namespaces(
                field_selector=f"metadata.namespace={doomed}"
            ).items
        ),
        what="the namespace's pods to go",
    )
    target.wait_for(
        lambda: doomed not in {n.metadata.name for n in target.core.list_namespace().items},
        what="the namespace to go",
    )


def test_delete_collection_by_label_answers_the_deleted_list(target: Target) -> None:
    ns = target.namespace
    for index, group in enumerate(["x", "x", "y"]):
        target.core.create_namespaced_config_map(
            ns, target.config_map_manifest(f"c{index}", labels={"g": group})
        )
    answer = target.raw(
        target.core.delete_collection_namespaced_config_map, ns, label_selector="g=x"
    )
    assert answer["kind"] == "ConfigMapList"
    assert sorted(i["metadata"]["name"] for i in answer["items"]) == ["c0", "c1"]
    assert [c.metadata.name for c in target.core.list_namespaced_config_map(ns).items] == ["c2"]


def test_delete_collection_of_jobs_with_background_propagation(target: Target) -> None:
    ns = target.namespace
    for name, run in (("a", "r1"), ("b", "r1"), ("c", "r2")):
        target.batch.create_namespaced_job(ns, target.job_manifest(name, labels={"run": run}))
    target.batch.delete_collection_namespaced_job(
        ns, label_selector="run=r1", propagation_policy="Background"
    )
    assert [j.metadata.name for j in target.batch.list_namespaced_job(ns).items] == ["c"]
