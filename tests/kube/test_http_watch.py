"""The emulator's list and watch over HTTP, through the official client and its ``Watch``.

Paging with limit/continue, watches from a resourceVersion that end at ``timeoutSeconds``,
selectors, bookmarks (on request and at the timeout), a client leaving, and 410 Expired for a
compacted version (an ERROR event on a watch, as a real server sends it; HTTP 410 on a list).
"""

from __future__ import annotations

import json

import pytest
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from tests.kube.emulator import Emulator
from tests.kube.http_testing import NS, failure, pod_body
from tests.waiting import wait_for


def test_list_pages_with_limit_and_continue(core: client.CoreV1Api) -> None:
    for i in range(5):
        core.create_namespaced_config_map(NS, {"metadata": {"name": f"cm-{i}"}})
    names, token = [], None
    while True:
        page = core.list_namespaced_config_map(NS, limit=2, _continue=token)
        names += [cm.metadata.name for cm in page.items]
        token = page.metadata._continue
        if not token:
            break
    assert names == [f"cm-{i}" for i in range(5)]
    selected = core.list_config_map_for_all_namespaces(label_selector="missing=label")
    assert selected.items == []


def test_watch_from_a_version_streams_later_changes_and_ends_at_the_timeout(
    core: client.CoreV1Api,
) -> None:
    core.create_namespaced_pod(NS, pod_body("before"))
    version = core.list_namespaced_pod(NS).metadata.resource_version
    core.create_namespaced_pod(NS, pod_body("after"))
    core.patch_namespaced_pod("after", NS, {"metadata": {"labels": {"x": "1"}}})
    core.delete_namespaced_pod("after", NS)
    events = [
        (e["type"], e["object"].metadata.name)
        for e in watch.Watch().stream(
            core.list_namespaced_pod, NS, resource_version=version, timeout_seconds=1
        )
    ]
    # (A pod's delete may first show as MODIFIED with a deletionTimestamp, as on a real server.)
    assert events[:2] == [("ADDED", "after"), ("MODIFIED", "after")]
    assert events[-1] == ("DELETED", "after")
    assert {name for _, name in events} == {"after"}


def test_watch_with_selectors_and_all_namespaces(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, pod_body("one"))
    other = pod_body("two")
    other["metadata"]["labels"] = {"app": "other"}
    core.create_namespaced_pod("kube-system", other)
    stream = watch.Watch().stream(
        core.list_pod_for_all_namespaces, label_selector="app=other", timeout_seconds=1
    )
    assert [(e["type"], e["object"].metadata.namespace) for e in stream] == [
        ("ADDED", "kube-system")
    ]


def test_bookmarks_on_request_and_at_the_timeout(
    emulator: Emulator, core: client.CoreV1Api
) -> None:
    version = core.list_namespaced_pod(NS).metadata.resource_version
    core.create_namespaced_pod(NS, pod_body("p"))
    w = watch.Watch()
    stream = w.stream(
        core.list_namespaced_pod,
        NS,
        resource_version=version,
        allow_watch_bookmarks=True,
        timeout_seconds=1,
    )
    first = next(stream)
    assert first["type"] == "ADDED"
    core.create_namespaced_config_map(NS, {"metadata": {"name": "elsewhere"}})
    emulator.bookmark()
    bookmark = next(stream)
    assert bookmark["type"] == "BOOKMARK"
    assert bookmark["raw_object"]["kind"] == "Pod"
    assert int(bookmark["raw_object"]["metadata"]["resourceVersion"]) == int(
        core.list_namespaced_config_map(NS).metadata.resource_version
    )
    assert w.resource_version == bookmark["raw_object"]["metadata"]["resourceVersion"]
    assert [e["type"] for e in stream] == ["BOOKMARK"]  # the timeout end


def test_a_watch_the_client_leaves_is_closed_on_the_server(
    emulator: Emulator, core: client.CoreV1Api
) -> None:
    w = watch.Watch()
    stream = w.stream(core.list_namespace, timeout_seconds=60)
    assert next(stream)["type"] == "ADDED"
    assert emulator.open_watches == 1
    w.stop()
    stream.close()
    wait_for(lambda: emulator.open_watches == 0, "the watch to close")
    assert core.list_namespace().items  # the server carries on


def test_watch_from_a_compacted_version_raises_410_through_watch(
    emulator: Emulator, core: client.CoreV1Api
) -> None:
    old = core.list_namespaced_pod(NS).metadata.resource_version
    core.create_namespaced_pod(NS, pod_body("p"))
    emulator.faults.expire()
    with pytest.raises(ApiException) as caught:
        list(
            watch.Watch().stream(
                core.list_namespaced_pod, NS, resource_version=old, timeout_seconds=1
            )
        )
    assert caught.value.status == 410 and caught.value.reason.startswith("Expired: too old")
    # Without timeout_seconds the client retries once from the same version, then gives up.
    with pytest.raises(ApiException) as caught:
        next(iter(watch.Watch().stream(core.list_namespaced_pod, NS, resource_version=old)))
    assert caught.value.status == 410
    # The raw answer is what a real server sends: 200 and one ERROR event with the Status.
    response = core.list_namespaced_pod(
        NS, watch=True, resource_version=old, _preload_content=False
    )
    assert response.status == 200
    event = json.loads(response.data.decode().strip())
    assert event["type"] == "ERROR" and event["object"]["code"] == 410
    assert event["object"]["reason"] == "Expired"


def test_list_with_a_compacted_continue_token_gets_410(
    emulator: Emulator, core: client.CoreV1Api
) -> None:
    for i in range(3):
        core.create_namespaced_config_map(NS, {"metadata": {"name": f"cm-{i}"}})
    token = core.list_namespaced_config_map(NS, limit=1).metadata._continue
    core.create_namespaced_config_map(NS, {"metadata": {"name": "later"}})
    emulator.faults.expire()
    status, body = failure(core.list_namespaced_config_map, NS, limit=1, _continue=token)
    assert (status, body["reason"]) == (410, "Expired")
