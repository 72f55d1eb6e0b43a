"""The process kubelet's calls to the API server, through the official ``kubernetes`` client only.

Owns every request the kubelet makes: list and watch pods, bind a pod to the node, patch a pod's
status (a JSON merge patch of the whole ``status``, so lists such as ``containerStatuses`` are
replaced and a container's old state never lingers), finalise a deleted pod (delete with grace 0
and a uid precondition), read secrets and config maps. Objects come back as plain dicts exactly as
the server sent them (``_preload_content=False``), so no client model (de)serialisation quirk can
get in the way. Writes are retried with backoff on transient failures until they succeed, the pod
is gone, or the caller's ``abort`` event is set (then `Aborted` is raised).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import urllib3
from kubernetes import client, config, watch
from kubernetes.client import ApiException

LOG = logging.getLogger("tests.kube.kubelet")
RETRIED_STATUSES = frozenset({0, 408, 429, 500, 502, 503, 504})
TRANSPORT_ERRORS = (urllib3.exceptions.HTTPError, OSError)
MERGE_PATCH = "application/merge-patch+json"
REQUEST_TIMEOUT = (5, 30)  # (connect, read) seconds for every request but the watch

T = TypeVar("T")


class Aborted(Exception):
    """The caller's abort event was set while a request was being retried."""


def is_transient(error: BaseException) -> bool:
    """Whether a failed request is worth repeating as it is."""
    if isinstance(error, ApiException):
        return error.status in RETRIED_STATUSES
    return isinstance(error, TRANSPORT_ERRORS)


def retrying(call: Callable[[], T], abort: threading.Event, what: str) -> T:
    """``call()`` until it does not fail transiently; backoff 0.05 s doubling to 2 s."""
    delay = 0.05
    while True:
        if abort.is_set():
            raise Aborted(what)
        try:
            return call()
        except Exception as error:
            if not is_transient(error):
                raise
            LOG.warning("%s failed (%s); retrying in %.2f s", what, error, delay)
        if abort.wait(delay):
            raise Aborted(what)
        delay = min(delay * 2, 2.0)


def _json(response: Any) -> dict[str, Any]:
    data = json.loads(response.data or b"{}")
    return data if isinstance(data, dict) else {}


class KubeletApi:
    """One API client for the whole kubelet (urllib3's pool is thread-safe)."""

    def __init__(self, kubeconfig: Path) -> None:
        self.api_client = config.new_client_from_config(config_file=str(kubeconfig))
        self.core = client.CoreV1Api(self.api_client)
        self._watch: watch.Watch | None = None
        self._watch_lock = threading.Lock()
        self._shut_down = False

    def shutdown(self) -> None:
        """End the current watch stream promptly (its socket is shut down); no new one starts."""
        with self._watch_lock:
            self._shut_down = True
            watcher = self._watch
        if watcher is not None:
            watcher.stop()

    def close(self) -> None:
        self.shutdown()
        self.api_client.close()

    # ---- pods: list and watch -------------------------------------------------------------

    def list_pods(self, namespace: str | None) -> tuple[list[dict[str, Any]], str]:
        """Every pod (in ``namespace``, or all) and the list's resourceVersion."""
        options: dict[str, Any] = {"_preload_content": False, "_request_timeout": REQUEST_TIMEOUT}
        if namespace is None:
            response = self.core.list_pod_for_all_namespaces(**options)
        else:
            response = self.core.list_namespaced_pod(namespace, **options)
        listing = _json(response)
        return list(listing.get("items") or []), str(listing["metadata"]["resourceVersion"])

    def watch_pods(
        self, namespace: str | None, resource_version: str, timeout_seconds: int
    ) -> Iterator[dict[str, Any]]:
        """Raw watch events (``{"type", "object"}``) from ``resource_version`` until the server
        ends the stream; an ERROR event (such as 410 Expired) raises `ApiException`."""
        core = self.core

        # A wrapper returning Any (no model type to find) makes Watch hand back raw dicts and turn
        # ERROR events into ApiException.
        def list_pods(**kwargs: Any) -> Any:
            if namespace is None:
                return core.list_pod_for_all_namespaces(**kwargs)
            return core.list_namespaced_pod(namespace, **kwargs)

        watcher = watch.Watch()
        with self._watch_lock:
            if self._shut_down:
                return
            self._watch = watcher
        try:
            for event in watcher.stream(
                list_pods,
                resource_version=resource_version,
                timeout_seconds=timeout_seconds,
                allow_watch_bookmarks=True,
                _request_timeout=(10, timeout_seconds + 30),
            ):
                if isinstance(event, dict):
                    yield {"type": event.get("type"), "object": event.get("raw_object")}
        finally:
            with self._watch_lock:
                self._watch = None

    # ---- pods: writes ---------------------------------------------------------------------

    def bind(self, namespace: str, name: str, node_name: str) -> bool:
        """Bind an unscheduled pod to ``node_name``; False when it is gone or bound already."""
        binding = client.V1Binding(
            metadata=client.V1ObjectMeta(name=name, namespace=namespace),
            target=client.V1ObjectReference(api_version="v1", kind="Node", name=node_name),
        )
        try:
            self.core.create_namespaced_pod_binding(
                name,
                namespace,
                binding,
                _preload_content=False,
                _request_timeout=REQUEST_TIMEOUT,
            )
        except ApiException as error:
            if error.status in (404, 409):
                return False
            raise
        return True

    def patch_status(
        self, namespace: str, name: str, status: dict[str, Any], abort: threading.Event
    ) -> bool:
        """Merge-patch the pod's status subresource; False when the pod no longer exists."""

        def patch() -> bool:
            try:
                self.core.patch_namespaced_pod_status(
                    name,
                    namespace,
                    {"status": status},
                    _content_type=MERGE_PATCH,
                    _preload_content=False,
                    _request_timeout=REQUEST_TIMEOUT,
                )
            except ApiException as error:
                if error.status == 404:
                    return False
                raise
            return True

        return retrying(patch, abort, f"status of pod {namespace}/{name}")

    def finalise_deletion(
        self, namespace: str, name: str, uid: str, abort: threading.Event
    ) -> None:
        """Delete the pod with grace 0 (what a kubelet does once its containers are stopped)."""
        options = client.V1DeleteOptions(
            grace_period_seconds=0, preconditions=client.V1Preconditions(uid=uid)
        )

        def delete() -> None:
            try:
                self.core.delete_namespaced_pod(
                    name,
                    namespace,
                    grace_period_seconds=0,
                    body=options,
                    _preload_content=False,
                    _request_timeout=REQUEST_TIMEOUT,
                )
            except ApiException as error:
                if error.status not in (404, 409):  # gone, or another pod under that name now
                    raise

        retrying(delete, abort, f"finalising deletion of pod {namespace}/{name}")

    # ---- secrets and config maps ----------------------------------------------------------

    def read_secret(
        self, namespace: str, name: str, abort: threading.Event
    ) -> dict[str, Any] | None:
        return self._read(self.core.read_namespaced_secret, namespace, name, abort)

    def read_config_map(
        self, namespace: str, name: str, abort: threading.Event
    ) -> dict[str, Any] | None:
        return self._read(self.core.read_namespaced_config_map, namespace, name, abort)

    def _read(
        self, reader: Callable[..., Any], namespace: str, name: str, abort: threading.Event
    ) -> dict[str, Any] | None:
        def read() -> dict[str, Any] | None:
            try:
                response = reader(
                    name, namespace, _preload_content=False, _request_timeout=REQUEST_TIMEOUT
                )
                return _json(response)
            except ApiException as error:
                if error.status == 404:
                    return None
                raise

        return retrying(read, abort, f"reading {namespace}/{name}")
