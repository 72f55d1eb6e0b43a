"""One shared, resumable list-and-watch over the objects of a label selector (pods or Jobs).

Owns :class:`ObjectWatch` and the keys it groups objects by (:func:`job_name_of_pod`,
:func:`name_of`).

Invariants: every change is made and every reader reads under one ``threading.Condition``
(which several watches may share), and ``on_change`` is told which key changed (None: possibly
any); no change is missed and nothing is polled per object; an object deleted while watched
leaves a tombstone for its key (:meth:`ObjectWatch.deleted`); :meth:`ObjectWatch.close` ends the
thread promptly by shutting its open response down.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from kubernetes.client import ApiException

logger = logging.getLogger(__name__)

KubeObject = dict[str, Any]
ListCall = Callable[..., Any]
"""A ``list_namespaced_*`` method of the official client (called without decoding)."""
KeyOf = Callable[[KubeObject], str | None]

JOB_NAME_LABELS = ("batch.kubernetes.io/job-name", "job-name")
WATCH_TIMEOUT_SECONDS = 60
FIRST_BACKOFF_SECONDS = 0.1
MAX_BACKOFF_SECONDS = 5.0
CONNECT_TIMEOUT_SECONDS = 10.0
READ_SLACK_SECONDS = 15.0
"""How long past its ``timeoutSeconds`` a silent watch is given before its connection is
considered dead."""
MIN_QUIET_WATCH_SECONDS = 1.0
"""A watch that ends sooner without an event is retried after a backoff."""
EXPIRED = 410
REFUSALS = (401, 403, 404)
"""Answers that mean the watch is not allowed or not possible, not a passing failure."""


class _ExpiredError(Exception):
    """The watch's resourceVersion is too old: list again."""


def job_name_of_pod(pod: KubeObject) -> str | None:
    """The name of the Job that owns ``pod`` (its job-name label, else its owner reference)."""
    metadata = pod.get("metadata") or {}
    labels = metadata.get("labels") or {}
    for label in JOB_NAME_LABELS:
        if labels.get(label):
            return str(labels[label])
    for owner in metadata.get("ownerReferences") or []:
        if owner.get("kind") == "Job":
            return str(owner.get("name"))
    return None


def name_of(obj: KubeObject) -> str | None:
    name = (obj.get("metadata") or {}).get("name")
    return None if name is None else str(name)


class ObjectWatch:
    """The latest state of every object of one kind in one namespace that matches a label
    selector, kept by one daemon thread and grouped by a key (a pod by the name of the Job
    that owns it, a Job may have several; a Job by its own name).

    It lists once, then watches from the list's resourceVersion with ``timeoutSeconds``; a
    watch that ends or is cut resumes from the last resourceVersion it saw, and a 410 Expired
    (an ``ERROR`` event or the HTTP status) makes it list again. Failed requests are retried
    with a growing backoff. Objects are kept as the plain dicts the API server sends.

    ``list_call``: e.g. ``core.list_namespaced_pod``; ``key``: how objects are grouped;
    ``condition``: shared with other watches so that a waiter wakes on a change of any."""

    def __init__(
        self,
        list_call: ListCall,
        namespace: str,
        label_selector: str,
        key: KeyOf,
        *,
        condition: threading.Condition | None = None,
        on_change: Callable[[str | None], None] | None = None,
        what: str = "objects",
        timeout_seconds: int = WATCH_TIMEOUT_SECONDS,
    ) -> None:
        self._list = list_call
        self.namespace = namespace
        self.label_selector = label_selector
        self._key = key
        self.condition = condition or threading.Condition()
        self._on_change = on_change
        self.what = what
        self._timeout_seconds = timeout_seconds
        self._objects: dict[str, dict[str, KubeObject]] = {}  # key -> uid -> object
        self._tombstones: set[str] = set()
        self._version: str | None = None
        self._synced = False
        self._stopping = threading.Event()
        self._response: Any = None
        self._response_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.refused: str | None = None
        """Why the server refuses this watch (401, 403, 404: it will not heal by itself), while
        it does; the watch keeps retrying."""
        self.lists = 0
        """How many times the objects were listed (the first list, then after each 410)."""
        self.watches = 0
        """How many watch requests were made."""

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> ObjectWatch:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name=f"kube-watch-{self.what}", daemon=True
            )
            self._thread.start()
        return self

    def close(self, timeout: float = 5.0) -> None:
        """Stop watching; returns once the thread ended (or ``timeout`` passed)."""
        self._stopping.set()
        self._interrupt()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)
        with self.condition:
            self._changed(None)

    @property
    def closed(self) -> bool:
        return self._stopping.is_set()

    # -- what readers call (under ``condition``, or they take it) ------------------------------

    @property
    def synced(self) -> bool:
        """Whether the first list has arrived."""
        return self._synced

    def objects(self, key: str) -> list[KubeObject]:
        """The objects of ``key``, oldest first (by creation time, then name)."""
        with self.condition:
            found = list(self._objects.get(key, {}).values())
        return sorted(found, key=_creation_order)

    def deleted(self, key: str) -> bool:
        """Whether an object of ``key`` was seen deleted and none of that key is left."""
        with self.condition:
            return key in self._tombstones and not self._objects.get(key)

    def forget(self, key: str) -> None:
        """Drop what is known of ``key`` (its objects are of no more interest)."""
        with self.condition:
            self._objects.pop(key, None)
            self._tombstones.discard(key)

    def wait_until(self, predicate: Callable[[], bool], timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for ``predicate`` (evaluated under the condition
        after every change) to hold; whether it does."""
        deadline = time.monotonic() + timeout
        with self.condition:
            while not predicate():
                left = deadline - time.monotonic()
                if left <= 0 or self.closed:
                    return predicate()
                self.condition.wait(left)
            return True

    # -- the watch thread ----------------------------------------------------------------------

    def _run(self) -> None:
        backoff = FIRST_BACKOFF_SECONDS
        while not self._stopping.is_set():
            try:
                if self._version is None:
                    self._relist()
                started = time.monotonic()
                if self._watch_once() or time.monotonic() - started >= MIN_QUIET_WATCH_SECONDS:
                    backoff = FIRST_BACKOFF_SECONDS
                else:  # answered at once with nothing: do not spin on such a server
                    self._stopping.wait(backoff)
                    backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)
            except _ExpiredError:
                self._version = None  # list again at once
            except ApiException as exc:
                if exc.status == EXPIRED:
                    self._version = None
                    continue
                if self._stopping.is_set():
                    break
                if exc.status in REFUSALS:
                    with self.condition:
                        self.refused = _brief(exc)
                        self._changed(None)
                logger.warning("Watching %s failed (%s); retrying", self.what, _brief(exc))
                self._stopping.wait(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)
            except Exception as exc:  # a cut connection, a refused one, a bad answer
                if self._stopping.is_set():
                    break
                logger.debug("Watch of %s interrupted (%s); resuming", self.what, _brief(exc))
                self._stopping.wait(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)

    def _relist(self) -> None:
        self.lists += 1
        response = self._list(
            self.namespace,
            label_selector=self.label_selector,
            _preload_content=False,
            _request_timeout=(CONNECT_TIMEOUT_SECONDS, CONNECT_TIMEOUT_SECONDS * 6),
        )
        listing = json.loads(response.data)
        objects: dict[str, dict[str, KubeObject]] = {}
        for item in listing.get("items") or []:
            key = self._key(item)
            if key is not None:
                objects.setdefault(key, {})[_uid(item)] = item
        with self.condition:
            gone = {k for k in self._objects if not objects.get(k)}
            self._tombstones |= gone
            self._tombstones -= set(objects)
            self._objects = objects
            self._version = str(listing["metadata"]["resourceVersion"])
            self._synced = True
            self.refused = None
            self._changed(None)

    def _watch_once(self) -> int:
        """One watch request, until the server ends it; how many events it brought."""
        self.watches += 1
        events = 0
        response = self._list(
            self.namespace,
            label_selector=self.label_selector,
            watch=True,
            resource_version=self._version,
            timeout_seconds=self._timeout_seconds,
            allow_watch_bookmarks=True,
            _preload_content=False,
            _request_timeout=(
                CONNECT_TIMEOUT_SECONDS,
                self._timeout_seconds + READ_SLACK_SECONDS,
            ),
        )
        with self._response_lock:
            self._response = response
        if self.refused is not None:
            with self.condition:
                self.refused = None
        finished = False
        try:
            if self._stopping.is_set():
                return events
            for line in _lines(response):
                self._apply(json.loads(line))
                events += 1
                if self._stopping.is_set():
                    return events
            finished = True
            return events
        finally:
            with self._response_lock:
                self._response = None
            if finished:  # the server ended it: the connection can serve the next request
                response.release_conn()
            else:  # cut short: the connection is closed, so the server sees the watch end
                response.close()

    def _apply(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        obj = event.get("object") or {}
        if kind == "ERROR":
            if obj.get("code") == EXPIRED:
                raise _ExpiredError()
            raise ApiException(status=obj.get("code"), reason=obj.get("message"))
        version = (obj.get("metadata") or {}).get("resourceVersion")
        with self.condition:
            if version:
                self._version = str(version)
            if kind in ("ADDED", "MODIFIED", "DELETED"):
                key = self._key(obj)
                if key is not None:
                    self._record(kind, key, obj)
                    self._changed(key)

    def _record(self, kind: str, key: str, obj: KubeObject) -> None:
        group = self._objects.setdefault(key, {})
        if kind == "DELETED":
            group.pop(_uid(obj), None)
            if not group:
                del self._objects[key]
                self._tombstones.add(key)
        else:
            group[_uid(obj)] = obj
            self._tombstones.discard(key)

    def _changed(self, key: str | None) -> None:
        """Under the condition: wake its waiters and tell ``on_change`` (None: any key)."""
        self.condition.notify_all()
        if self._on_change is not None:
            self._on_change(key)

    def _interrupt(self) -> None:
        with self._response_lock:
            response = self._response
        if response is not None:
            try:
                response.shutdown()
            except Exception:  # already closed: nothing to interrupt
                logger.debug("closing a watch response failed", exc_info=True)


def _lines(response: Any) -> Iterator[bytes]:
    """The newline-separated lines of a streamed answer, as they arrive."""
    pending = b""
    for chunk in response.stream(amt=None, decode_content=False):
        pending += chunk
        *complete, pending = pending.split(b"\n")
        for line in complete:
            if line.strip():
                yield line
    if pending.strip():
        yield pending


def _uid(obj: KubeObject) -> str:
    metadata = obj.get("metadata") or {}
    return str(metadata.get("uid") or metadata.get("name"))


def _creation_order(obj: KubeObject) -> tuple[str, str]:
    metadata = obj.get("metadata") or {}
    return (str(metadata.get("creationTimestamp") or ""), str(metadata.get("name") or ""))


def _brief(exc: BaseException) -> str:
    if isinstance(exc, ApiException):
        return f"{exc.status} {exc.reason}"
    return " ".join(str(exc).split())[:200] or type(exc).__name__
