"""Unit tests of the emulator's object store, without HTTP: watches (history, expiry,
selectors, bookmarks), listeners, timestamps and concurrent writers."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest

from tests.kube.emulator.clock import FakeClock
from tests.kube.emulator.errors import ApiError
from tests.kube.emulator.resources import (
    CONFIGMAPS,
    JOBS,
    PODS,
)
from tests.kube.emulator.store import ObjectStore, WatchEvent
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
