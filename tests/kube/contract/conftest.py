"""The contract suite's target: the emulator, or the API server ``WHARF_KUBE_CONTRACT_KUBECONFIG`` names.

``target`` gives each test an ``ApiClient`` built from the target's own kubeconfig (never the
client's global default configuration), the official ``CoreV1Api``/``BatchV1Api`` on it, and a
fresh namespace of its own (deleted afterwards; on a bare kube-apiserver without a controller
manager it stays ``Terminating`` for ever, so names are unique per test). ``clocked_target`` is
the same on an emulator with a ``FakeClock`` (time-based controllers; skipped on a real server).
Tests marked ``emulator_only(reason)`` are skipped, with their reason, against a real server.

Two real-server checks are slow and opt-in: ``WHARF_KUBE_CONTRACT_COMPACTING=1`` says the server
runs with ``--etcd-compaction-interval=5s --watch-cache=false`` so a too-old watch (410) can be
provoked in seconds; ``WHARF_KUBE_CONTRACT_SLOW=1`` waits the minute a 1.20 server takes to send
a watch BOOKMARK.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

KUBECONFIG_ENV = "WHARF_KUBE_CONTRACT_KUBECONFIG"
COMPACTING_ENV = "WHARF_KUBE_CONTRACT_COMPACTING"
SLOW_ENV = "WHARF_KUBE_CONTRACT_SLOW"  # run real-server checks that take a minute (bookmarks)

MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"

FAKE_CLOCK_START = datetime(2026, 1, 5, 9, 0, 0, tzinfo=UTC)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "emulator_only(reason): needs what a bare kube-apiserver lacks (controller manager, "
        "kubelet, batch/v1 CronJob); skipped against a real server",
    )


def pytest_runtest_setup(item: pytest.Item) -> None:
    marker = item.get_closest_marker("emulator_only")
    if marker is not None and os.environ.get(KUBECONFIG_ENV):
        reason = marker.kwargs.get("reason") or (marker.args[0] if marker.args else "")
        pytest.skip(f"emulator only: {reason}")


@dataclass
class Target:
    """One test's view of the API server under test."""

    api_client: client.ApiClient
    is_emulator: bool
    namespace: str
    emulator: Any | None = None
    core: client.CoreV1Api = field(init=False)
    batch: client.BatchV1Api = field(init=False)

    def __post_init__(self) -> None:
        self.core = client.CoreV1Api(self.api_client)
        self.batch = client.BatchV1Api(self.api_client)

    # ------------------------------------------------------------------ calls

    @staticmethod
    def raw(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Call an API method and return the response body as parsed JSON (no model decoding)."""
        response = fn(*args, _preload_content=False, **kwargs)
        return json.loads(response.data)

    @staticmethod
    def error(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[int, dict[str, Any]]:
        """Call an API method that must fail; return the HTTP status and the Status body."""
        try:
            fn(*args, _preload_content=False, **kwargs)
        except ApiException as exc:
            body = json.loads(exc.body) if exc.body else {}
            return int(exc.status or 0), body
        raise AssertionError(f"{fn.__name__} succeeded but an error was expected")

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """A plain request through the target's ``ApiClient`` (for API versions the client has
        no class for, e.g. batch/v1beta1 CronJobs); returns the status and the parsed body."""
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        serialized = self.api_client.param_serialize(
            method, path, header_params=headers, body=body, auth_settings=["BearerToken"]
        )
        response = self.api_client.call_api(*serialized, _request_timeout=30)
        response.read()
        return response.status, json.loads(response.data) if response.data else None

    def server_version(self) -> tuple[int, int]:
        info = client.VersionApi(self.api_client).get_code()
        return int(info.major), int("".join(ch for ch in info.minor if ch.isdigit()))

    # ------------------------------------------------------------------ watches

    def watch_events(
        self,
        list_fn: Callable[..., Any],
        *args: Any,
        until: Callable[[dict[str, Any]], bool] | None = None,
        timeout_seconds: int = 5,
        **kwargs: Any,
    ) -> list[dict[str, Any]]:
        """Watch through ``kubernetes.watch.Watch`` and return ``{"type", "object"}`` raw events.

        Stops after the first event ``until`` accepts (it is included), or when the server ends
        the stream (``timeout_seconds``).
        """
        events: list[dict[str, Any]] = []
        watcher = watch.Watch()
        stream = watcher.stream(
            list_fn,
            *args,
            timeout_seconds=timeout_seconds,
            _request_timeout=timeout_seconds + 10,
            **kwargs,
        )
        for event in stream:
            raw = {"type": event["type"], "object": event["raw_object"]}
            events.append(raw)
            if until is not None and until(raw):
                watcher.stop()
                break
        return events

    def expire_watch_history(self, version: str) -> None:
        """Make watches from ``version`` too old (410), or skip the test where that is slow.

        The emulator forgets its event history at once. A real kube-apiserver answers 410 only
        for a version etcd has compacted away, and only when the watch does not come from its
        watch cache (whose window grows with the write rate): with ``WHARF_KUBE_CONTRACT_COMPACTING``
        set, the server is taken to run with ``--etcd-compaction-interval=5s --watch-cache=false``
        and this waits until etcd has compacted ``version``.
        """
        if self.emulator is not None:
            self.emulator.store.compact()
            return
        if not os.environ.get(COMPACTING_ENV):
            pytest.skip(
                "a real server answers 410 only once etcd compacted the version and its watch "
                "cache no longer holds it (minutes); set WHARF_KUBE_CONTRACT_COMPACTING=1 with a "
                "server started with --etcd-compaction-interval=5s --watch-cache=false"
            )

        def compacted() -> bool:
            try:
                self.core.list_namespaced_config_map(
                    self.namespace,
                    resource_version=version,
                    resource_version_match="Exact",
                    _preload_content=False,
                )
            except ApiException as exc:
                if exc.status == 410:
                    return True
                raise
            self.core.create_namespaced_config_map(  # a write, so etcd has something to compact
                self.namespace, {"metadata": {"generateName": "compaction-"}}
            )
            return False

        self.wait_for(compacted, timeout=60, what=f"etcd to compact revision {version}", poll=1.0)

    def now(self) -> datetime:
        """The emulator's clock (``clocked_target`` only)."""
        assert self.emulator is not None, "only the emulator has a clock to read"
        return self.emulator.clock.now()  # type: ignore[no-any-return]

    def advance(self, seconds: float) -> datetime:
        """Move the emulator's fake clock forward and run its time-based controllers."""
        assert self.emulator is not None, "only the emulator's clock can be moved"
        later = self.now() + timedelta(seconds=seconds)
        self.emulator.advance_to(later)
        return later

    @staticmethod
    def wait_for(
        condition: Callable[[], Any],
        *,
        timeout: float = 10.0,
        what: str = "condition",
        poll: float = 0.02,
    ) -> Any:
        """Poll ``condition`` until it returns something truthy; fail after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            result = condition()
            if result:
                return result
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout}s waiting for {what}")
            time.sleep(poll)

    def exists(self, read_fn: Callable[..., Any], name: str) -> bool:
        try:
            read_fn(name, self.namespace, _preload_content=False)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True

    # ------------------------------------------------------------------ manifests

    @staticmethod
    def pod_manifest(
        name: str,
        *,
        image: str = "busybox:1.36",
        labels: dict[str, str] | None = None,
        containers: list[dict[str, Any]] | None = None,
        **spec: Any,
    ) -> dict[str, Any]:
        metadata: dict[str, Any] = {"name": name}
        if labels:
            metadata["labels"] = labels
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": metadata,
            "spec": {
                "containers": containers or [{"name": "main", "image": image, "command": ["true"]}],
                **spec,
            },
        }

    @staticmethod
    def job_manifest(
        name: str,
        *,
        labels: dict[str, str] | None = None,
        template_labels: dict[str, str] | None = None,
        restart_policy: str | None = "Never",
        command: list[str] | None = None,
        **spec: Any,
    ) -> dict[str, Any]:
        pod_spec: dict[str, Any] = {
            "containers": [
                {"name": "main", "image": "busybox:1.36", "command": command or ["true"]}
            ]
        }
        if restart_policy is not None:
            pod_spec["restartPolicy"] = restart_policy
        template: dict[str, Any] = {"spec": pod_spec}
        if template_labels:
            template["metadata"] = {"labels": template_labels}
        metadata: dict[str, Any] = {"name": name}
        if labels:
            metadata["labels"] = labels
        return {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": metadata,
            "spec": {"template": template, **spec},
        }

    @staticmethod
    def config_map_manifest(
        name: str, data: dict[str, str] | None = None, labels: dict[str, str] | None = None
    ) -> dict[str, Any]:
        metadata: dict[str, Any] = {"name": name}
        if labels:
            metadata["labels"] = labels
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": data or {}}


def _client_from(kubeconfig: str) -> client.ApiClient:
    return config.new_client_from_config(config_file=kubeconfig, persist_config=False)


@contextmanager
def _target_on(api_client: client.ApiClient, emulator: Any | None = None) -> Iterator[Target]:
    """A ``Target`` with a fresh namespace of its own, deleted afterwards."""
    namespace = f"wharf-contract-{uuid.uuid4().hex[:10]}"
    core = client.CoreV1Api(api_client)
    core.create_namespace(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    )
    try:
        yield Target(api_client, emulator is not None, namespace, emulator)
    finally:
        with contextlib.suppress(ApiException):
            core.delete_namespace(namespace, _preload_content=False)


@pytest.fixture(scope="session")
def real_server_client() -> Iterator[client.ApiClient | None]:
    kubeconfig = os.environ.get(KUBECONFIG_ENV)
    if not kubeconfig:
        yield None
        return
    api_client = _client_from(kubeconfig)
    yield api_client
    api_client.close()


@pytest.fixture
def target(
    request: pytest.FixtureRequest, real_server_client: client.ApiClient | None
) -> Iterator[Target]:
    """The server under test: the real one when configured, else the ``emulator`` fixture's."""
    if real_server_client is not None:
        with _target_on(real_server_client) as real_target:
            yield real_target
        return
    emulator = request.getfixturevalue("emulator")
    api_client = _client_from(str(emulator.kubeconfig_path))
    try:
        with _target_on(api_client, emulator) as emulated_target:
            yield emulated_target
    finally:
        api_client.close()


@pytest.fixture
def clocked_target(real_server_client: client.ApiClient | None) -> Iterator[Target]:
    """An emulator on a ``FakeClock`` (at ``FAKE_CLOCK_START``): time moves by ``advance``."""
    if real_server_client is not None:
        pytest.skip("emulator only: moves the emulator's fake clock")
    from tests.kube.emulator import Emulator
    from tests.kube.emulator.clock import FakeClock

    with Emulator(clock=FakeClock(FAKE_CLOCK_START)) as emulator:
        api_client = _client_from(str(emulator.kubeconfig_path))
        try:
            with _target_on(api_client, emulator) as clocked:
                yield clocked
        finally:
            api_client.close()
