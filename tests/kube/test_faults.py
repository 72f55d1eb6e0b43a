"""Fault injection of the emulator, seen through the official ``kubernetes`` client.

Each fault is observed the way a client would meet it on a real cluster: a failed call with a
real-shaped ``Status`` (and ``Retry-After`` for 429), a slow answer, a watch stream that breaks
mid-way, a watch that gets 410 Expired after compaction.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import urllib3
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from tests.kube.emulator import Emulator

NS = "default"


def config_map(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}}


@pytest.fixture
def core(kube_client: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(kube_client)


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        (409, "Conflict"),
        (429, "TooManyRequests"),
        (500, "InternalError"),
        (503, "ServiceUnavailable"),
    ],
)
def test_fail_next_create(
    emulator: Emulator, core: client.CoreV1Api, code: int, reason: str
) -> None:
    emulator.faults.fail_next("create", "configmaps", code=code)
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_config_map(NS, config_map("a"))
    assert caught.value.status == code
    body = json.loads(caught.value.body)
    assert (body["kind"], body["reason"], body["code"]) == ("Status", reason, code)
    if code == 429:
        assert caught.value.headers["Retry-After"] == "1"
        assert body["details"]["retryAfterSeconds"] == 1
    # The fault is spent: the retry goes through, and nothing was created by the failed call.
    created = core.create_namespaced_config_map(NS, config_map("a"))
    assert created.metadata.name == "a"


def test_lose_answer_applies_the_request_and_cuts_its_connection(
    emulator: Emulator, core: client.CoreV1Api
) -> None:
    """The client meets a connection cut before any answer (it does not repeat a create); the
    object was created all the same, and the next request is answered."""
    emulator.faults.lose_answer("create", "configmaps")
    with pytest.raises(urllib3.exceptions.HTTPError):
        core.create_namespaced_config_map(NS, config_map("a"))
    assert emulator.faults.pending_lost_answers() == 0
    assert core.read_namespaced_config_map("a", NS).metadata.name == "a"
    created = core.create_namespaced_config_map(NS, config_map("b"))
    assert created.metadata.name == "b"


def test_fail_next_matches_verb_and_resource_and_counts(
    emulator: Emulator, core: client.CoreV1Api
) -> None:
    core.create_namespaced_pod(
        NS, {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "m", "image": "x"}]}}
    )
    emulator.faults.fail_next("patch", "pods", code=500, times=2, reason="Custom")
    core.patch_namespaced_pod_status("p", NS, {"status": {"phase": "Running"}})  # pods/status
    core.create_namespaced_config_map(NS, config_map("unaffected"))
    for _ in range(2):
        with pytest.raises(ApiException) as caught:
            core.patch_namespaced_pod("p", NS, {"metadata": {"labels": {"a": "b"}}})
        assert json.loads(caught.value.body)["reason"] == "Custom"
    core.patch_namespaced_pod("p", NS, {"metadata": {"labels": {"a": "b"}}})

    emulator.faults.fail_next("patch", "pods/status", code=409)
    with pytest.raises(ApiException) as caught:
        core.patch_namespaced_pod_status("p", NS, {"status": {"phase": "Running"}})
    assert caught.value.status == 409


def test_fail_next_list_and_any_resource(emulator: Emulator, core: client.CoreV1Api) -> None:
    emulator.faults.fail_next("list")
    with pytest.raises(ApiException) as caught:
        core.list_namespaced_secret(NS)
    assert caught.value.status == 503
    assert core.list_namespaced_secret(NS).items == []


def test_fail_next_watch_fails_the_stream_request(
    emulator: Emulator, core: client.CoreV1Api
) -> None:
    emulator.faults.fail_next("watch", "pods", code=500)
    with pytest.raises(ApiException) as caught:
        list(watch.Watch().stream(core.list_namespaced_pod, NS, timeout_seconds=1))
    assert caught.value.status == 500


def test_an_injected_410_on_watch_is_an_error_event(
    emulator: Emulator, core: client.CoreV1Api
) -> None:
    emulator.faults.fail_next("watch", "pods", code=410)
    response = core.list_namespaced_pod(NS, watch=True, _preload_content=False)
    assert response.status == 200
    event = json.loads(response.data)
    assert (event["type"], event["object"]["code"], event["object"]["reason"]) == (
        "ERROR",
        410,
        "Expired",
    )
    emulator.faults.fail_next("watch", "pods", code=410)
    with pytest.raises(ApiException) as caught:
        list(watch.Watch().stream(core.list_namespaced_pod, NS, timeout_seconds=1))
    assert caught.value.status == 410


def test_reset_forgets_pending_faults(emulator: Emulator, core: client.CoreV1Api) -> None:
    emulator.faults.fail_next("get", times=5)
    emulator.faults.delay("get", 30)
    emulator.faults.reset()
    assert core.read_namespace(NS).metadata.name == NS


def test_unknown_verbs_are_refused(emulator: Emulator) -> None:
    with pytest.raises(ValueError, match="unknown verb"):
        emulator.faults.fail_next("explode")
    with pytest.raises(ValueError, match="times"):
        emulator.faults.delay("get", 1, times=0)


def test_delay_holds_the_matching_requests(emulator: Emulator, core: client.CoreV1Api) -> None:
    emulator.faults.delay("get", 0.3, plural="namespaces", times=2)
    core.list_namespaced_config_map(NS)  # another verb: not delayed, the delay stays pending
    for _ in range(2):
        started = time.monotonic()
        core.read_namespace(NS)
        assert time.monotonic() - started >= 0.3
    # Spent: a client timeout far below the delay is now met.
    core.read_namespace(NS, _request_timeout=(5, 0.25))


def test_drop_watches_breaks_open_streams_mid_way(
    emulator: Emulator, core: client.CoreV1Api
) -> None:
    core.create_namespaced_config_map(NS, config_map("a"))
    stream = watch.Watch().stream(core.list_namespaced_config_map, NS, timeout_seconds=60)
    assert next(stream)["object"].metadata.name == "a"
    assert emulator.faults.drop_watches() == 1
    with pytest.raises(urllib3.exceptions.ProtocolError):
        next(stream)
    # The server is fine: new requests and new watches work.
    core.create_namespaced_config_map(NS, config_map("b"))
    names = [
        e["object"].metadata.name
        for e in watch.Watch().stream(core.list_namespaced_config_map, NS, timeout_seconds=1)
    ]
    assert names == ["a", "b"]


def test_expire_forces_410_on_a_later_watch(emulator: Emulator, core: client.CoreV1Api) -> None:
    version = core.create_namespaced_config_map(NS, config_map("a")).metadata.resource_version
    core.create_namespaced_config_map(NS, config_map("b"))
    emulator.faults.expire()
    with pytest.raises(ApiException) as caught:
        list(
            watch.Watch().stream(
                core.list_namespaced_config_map, NS, resource_version=version, timeout_seconds=1
            )
        )
    assert caught.value.status == 410
    # Re-listing gives a version to watch from again.
    fresh = core.list_namespaced_config_map(NS).metadata.resource_version
    core.create_namespaced_config_map(NS, config_map("c"))
    events = watch.Watch().stream(
        core.list_namespaced_config_map, NS, resource_version=fresh, timeout_seconds=1
    )
    assert [e["object"].metadata.name for e in events] == ["c"]


def test_an_outage_refuses_connections_and_the_api_comes_back_with_its_objects(
    emulator: Emulator, core: client.CoreV1Api
) -> None:
    core.create_namespaced_config_map(NS, config_map("kept"))
    emulator.go_down()
    try:
        with pytest.raises(urllib3.exceptions.MaxRetryError):
            core.list_namespaced_config_map(NS, _request_timeout=2)
    finally:
        emulator.come_back()
    names = [m.metadata.name for m in core.list_namespaced_config_map(NS).items]
    assert names == ["kept"]
