"""Unit tests of the emulator's object store, without HTTP: deletion (graceful pod deletion,
preconditions, finalizers, propagation policies, namespace termination)."""

from __future__ import annotations

from datetime import timedelta

from tests.kube.emulator.clock import FakeClock
from tests.kube.emulator.resources import (
    CONFIGMAPS,
    JOBS,
    NAMESPACES,
    PODS,
    SECRETS,
    SERVICEACCOUNTS,
)
from tests.kube.emulator.store import ObjectStore
from tests.kube.store_testing import (
    MERGE,
    START,
    clock,
    job_body,
    pod_body,
    raises,
    store,
)

__all__ = ["clock", "store"]  # the fixtures


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
