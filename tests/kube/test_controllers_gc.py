"""The emulator's garbage collector (ownerReferences) and namespace finaliser, through the store."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.kube.controller_bed import ControllerBed, cronjob_body
from tests.kube.emulator.resources import CONFIGMAPS, CRONJOBS, JOBS, NAMESPACES, PODS, SECRETS


@pytest.fixture
def bed() -> Iterator[ControllerBed]:
    bed = ControllerBed()
    yield bed
    bed.close()


def owner_ref(owner: dict[str, Any], *, controller: bool = False) -> dict[str, Any]:
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": controller,
    }


def configmap(
    bed: ControllerBed, name: str, *owners: dict[str, Any], ns: str = "default"
) -> dict[str, Any]:
    body: dict[str, Any] = {"metadata": {"name": name}, "data": {"k": "v"}}
    if owners:
        body["metadata"]["ownerReferences"] = [owner_ref(o) for o in owners]
    return bed.store.create(CONFIGMAPS, ns, body)


def namespace_names(bed: ControllerBed) -> list[str]:
    return [n["metadata"]["name"] for n in bed.store.list(NAMESPACES, None)["items"]]


def test_background_deletion_of_a_job_deletes_its_pods(bed: ControllerBed) -> None:
    bed.create_job("bg", completions=2, parallelism=2)
    running, _unbound = bed.pods_of("bg")
    bed.run(running)
    bed.store.delete(JOBS, "default", "bg", propagation_policy="Background")
    assert bed.get(JOBS, "bg") is None
    (left,) = bed.pods_of("bg")  # the unbound pod is gone; the bound one is stopping
    assert left["metadata"]["name"] == running["metadata"]["name"]
    assert "deletionTimestamp" in left["metadata"]
    bed.kubelet_delete(left)
    assert bed.pods_of("bg") == []


def test_deleting_a_job_without_a_policy_orphans_its_pods(bed: ControllerBed) -> None:
    """batch/v1 Jobs default to orphaning their pods (kubectl sends Background explicitly)."""
    bed.create_job("legacy")
    bed.store.delete(JOBS, "default", "legacy")
    assert bed.get(JOBS, "legacy") is None
    (pod,) = bed.pods_of("legacy")
    assert "ownerReferences" not in pod["metadata"]
    assert "deletionTimestamp" not in pod["metadata"]


def test_orphan_propagation_keeps_pods_and_drops_references(bed: ControllerBed) -> None:
    bed.create_job("orphaner")
    bed.store.delete(JOBS, "default", "orphaner", propagation_policy="Orphan")
    assert bed.get(JOBS, "orphaner") is None
    (pod,) = bed.pods_of("orphaner")
    assert "ownerReferences" not in pod["metadata"]


def test_foreground_deletion_waits_for_the_pods(bed: ControllerBed) -> None:
    bed.create_job("fg")
    (pod,) = bed.pods_of("fg")
    bed.run(pod)
    bed.store.delete(JOBS, "default", "fg", propagation_policy="Foreground")
    job = bed.job("fg")
    assert "deletionTimestamp" in job["metadata"]
    assert job["metadata"]["finalizers"] == ["foregroundDeletion"]
    (stopping,) = bed.pods_of("fg")
    assert "deletionTimestamp" in stopping["metadata"]
    assert bed.pods_of("fg")[0]["metadata"]["name"] == pod["metadata"]["name"]  # no replacement
    bed.finish(stopping, 143)
    bed.kubelet_delete(stopping)
    assert bed.pods_of("fg") == []
    assert bed.get(JOBS, "fg") is None


def test_foreground_deletion_of_a_job_with_unbound_pods_finishes_at_once(
    bed: ControllerBed,
) -> None:
    bed.create_job("quick")
    bed.store.delete(JOBS, "default", "quick", propagation_policy="Foreground")
    assert bed.get(JOBS, "quick") is None
    assert bed.pods_of("quick") == []


def test_deleting_a_cronjob_cascades_to_jobs_and_pods(bed: ControllerBed) -> None:
    bed.store.create(CRONJOBS, "default", cronjob_body("cascade", "*/5 * * * *"))
    bed.advance(5 * 60)
    (job,) = bed.jobs()
    assert len(bed.pods_of(job["metadata"]["name"])) == 1
    bed.store.delete(CRONJOBS, "default", "cascade", propagation_policy="Background")
    assert bed.jobs() == []
    assert bed.pods_of(job["metadata"]["name"]) == []


def test_a_dependent_with_a_live_owner_left_only_loses_the_dangling_reference(
    bed: ControllerBed,
) -> None:
    first = configmap(bed, "owner-a")
    second = configmap(bed, "owner-b")
    configmap(bed, "shared", first, second)
    bed.store.delete(CONFIGMAPS, "default", "owner-a")
    shared = bed.get(CONFIGMAPS, "shared")
    assert shared is not None
    assert [r["name"] for r in shared["metadata"]["ownerReferences"]] == ["owner-b"]
    bed.store.delete(CONFIGMAPS, "default", "owner-b")
    assert bed.get(CONFIGMAPS, "shared") is None


def test_a_dependent_whose_owners_do_not_exist_is_collected(bed: ControllerBed) -> None:
    ghost = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "ghost", "uid": "00000000-0000-0000-0000-000000000000"},
    }
    configmap(bed, "haunted", ghost)
    assert bed.get(CONFIGMAPS, "haunted") is None


def test_an_owner_of_a_kind_not_served_is_assumed_to_exist(bed: ControllerBed) -> None:
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": "rs", "uid": "11111111-0000-0000-0000-000000000000"},
    }
    configmap(bed, "kept", deployment)
    assert bed.get(CONFIGMAPS, "kept") is not None


def test_step_jobs_owned_by_the_orchestrator_job_go_with_it(bed: ControllerBed) -> None:
    """The orchestrator copies its pod's owner references (controller=False) onto step jobs."""
    orchestrator = bed.create_job("orchestrator")
    from tests.kube.controller_bed import job_body

    step = job_body("step-1")
    step["metadata"]["ownerReferences"] = [owner_ref(orchestrator)]
    bed.store.create(JOBS, "default", step)
    assert len(bed.pods_of("step-1")) == 1
    bed.store.delete(JOBS, "default", "orchestrator", propagation_policy="Foreground")
    assert bed.get(JOBS, "step-1") is None
    assert bed.get(JOBS, "orchestrator") is None
    assert bed.store.list(PODS, "default")["items"] == []


def test_deleting_a_namespace_empties_it_then_removes_it(bed: ControllerBed) -> None:
    bed.store.create(NAMESPACES, None, {"metadata": {"name": "run-1"}})
    bed.create_job("step", ns="run-1")
    configmap(bed, "state", ns="run-1")
    bed.store.create(SECRETS, "run-1", {"metadata": {"name": "token"}, "stringData": {"t": "x"}})
    (pod,) = bed.pods_of("step", ns="run-1")
    bed.run(pod)
    bed.store.delete(NAMESPACES, None, "run-1")
    namespace = bed.store.get(NAMESPACES, None, "run-1")
    assert namespace["status"]["phase"] == "Terminating"
    assert bed.store.list(CONFIGMAPS, "run-1")["items"] == []
    assert bed.store.list(SECRETS, "run-1")["items"] == []
    assert bed.store.list(JOBS, "run-1")["items"] == []
    (stopping,) = bed.store.list(PODS, "run-1")["items"]
    assert "deletionTimestamp" in stopping["metadata"]  # the kubelet still has to stop it
    bed.kubelet_delete(stopping)
    assert "run-1" not in namespace_names(bed)


def test_deleting_an_empty_namespace_removes_it_at_once(bed: ControllerBed) -> None:
    bed.store.create(NAMESPACES, None, {"metadata": {"name": "empty"}})
    bed.store.delete(NAMESPACES, None, "empty")
    assert "empty" not in namespace_names(bed)


def test_a_namespace_with_only_unbound_pods_goes_at_once(bed: ControllerBed) -> None:
    bed.store.create(NAMESPACES, None, {"metadata": {"name": "pending"}})
    bed.create_job("never-scheduled", ns="pending")
    bed.store.delete(NAMESPACES, None, "pending")
    assert "pending" not in namespace_names(bed)
    assert bed.store.list(PODS, "pending")["items"] == []


def test_re_pointing_a_dependent_at_an_absent_owner_collects_it(bed: ControllerBed) -> None:
    owner = configmap(bed, "owner")
    configmap(bed, "dependent", owner)
    ghost = {**owner_ref(owner), "name": "ghost", "uid": "22222222-0000-0000-0000-000000000000"}
    patch = {"metadata": {"ownerReferences": [ghost]}}
    bed.store.patch(CONFIGMAPS, "default", "dependent", patch, "application/merge-patch+json")
    assert bed.get(CONFIGMAPS, "dependent") is None
    assert bed.get(CONFIGMAPS, "owner") is not None


def test_a_foreground_deletion_spares_a_dependent_another_owner_keeps(bed: ControllerBed) -> None:
    keeper = configmap(bed, "keeper")
    leaver = bed.create_job("leaver")
    body: dict[str, Any] = {"metadata": {"name": "shared-state"}, "data": {}}
    body["metadata"]["ownerReferences"] = [
        owner_ref(keeper),
        {
            **owner_ref({**leaver, "apiVersion": "batch/v1", "kind": "Job"}),
            "blockOwnerDeletion": True,
        },
    ]
    bed.store.create(CONFIGMAPS, "default", body)
    bed.store.delete(JOBS, "default", "leaver", propagation_policy="Foreground")
    assert bed.get(JOBS, "leaver") is None
    shared = bed.get(CONFIGMAPS, "shared-state")
    assert shared is not None
    assert [r["name"] for r in shared["metadata"]["ownerReferences"]] == ["keeper"]
