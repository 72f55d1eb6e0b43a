"""Fault injection for the emulator: failed and delayed requests, answers lost after the request
was applied, dropped watches, forced 410s.

``Faults`` is consulted by the HTTP layer before each API request (``before(verb, resource)``),
which sleeps for a matching delay and raises a matching failure, and once it applied one
(``answer_lost(verb, resource)``), whether to cut its connection without an answer (as a reset
connection or a client timeout after the server applied the request). A rule matches a request by
verb (``create``, ``get``, ``list``, ``watch``, ``update``, ``patch``, ``delete``,
``deletecollection``) and, optionally, by resource: ``"pods"`` matches requests on pods
themselves, ``"pods/status"`` or ``"pods/log"`` only that subresource. Each rule fires ``times``
times, oldest rule first, then is gone. A 410 on ``watch`` arrives as a real server sends it: HTTP
200 and a single ``ERROR`` event carrying the ``Expired`` Status. Open watch streams register here so that
``drop_watches()`` can cut them mid-stream. Thread-safe: one lock guards the rules and streams.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeVar

from tests.kube.emulator.errors import ApiError

if TYPE_CHECKING:
    from tests.kube.emulator.store import ObjectStore

VERBS = frozenset(
    {"create", "get", "list", "watch", "update", "patch", "delete", "deletecollection"}
)

# The reason a real server gives with each failure code.
REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}

RETRY_AFTER_SECONDS = 1


class DroppableStream(Protocol):
    """An open streaming response that can be cut without its terminating chunk."""

    def drop(self) -> None: ...


@dataclass
class _Rule:
    verb: str
    resource: str | None
    times: int

    def matches(self, verb: str, resource: str) -> bool:
        return self.verb == verb and self.resource in (None, resource)


@dataclass
class _FailRule(_Rule):
    code: int
    reason: str | None


@dataclass
class _DelayRule(_Rule):
    seconds: float


_R = TypeVar("_R", bound=_Rule)


class Faults:
    """Faults to inject into the emulator's API; see the module docstring."""

    def __init__(self, store: ObjectStore) -> None:
        self._store = store
        self._lock = threading.Lock()
        self._failures: list[_FailRule] = []
        self._delays: list[_DelayRule] = []
        self._lost: list[_Rule] = []
        self._streams: set[DroppableStream] = set()

    # -- what tests call -----------------------------------------------------------------------

    def fail_next(
        self,
        verb: str,
        plural: str | None = None,
        code: int = 503,
        times: int = 1,
        reason: str | None = None,
    ) -> None:
        """Fail the next ``times`` requests of ``verb`` (on ``plural``) with ``code``."""
        _check(verb, times)
        with self._lock:
            self._failures.append(_FailRule(verb, plural, times, code, reason))

    def delay(self, verb: str, seconds: float, plural: str | None = None, times: int = 1) -> None:
        """Hold the next ``times`` requests of ``verb`` (on ``plural``) for ``seconds``."""
        _check(verb, times)
        with self._lock:
            self._delays.append(_DelayRule(verb, plural, times, seconds))

    def lose_answer(self, verb: str, plural: str | None = None, times: int = 1) -> None:
        """Apply the next ``times`` requests of ``verb`` (on ``plural``), then cut their
        connection without an answer: the client cannot tell whether they were applied."""
        _check(verb, times)
        with self._lock:
            self._lost.append(_Rule(verb, plural, times))

    def drop_watches(self) -> int:
        """Cut every open watch stream abruptly (no terminating chunk); returns how many."""
        with self._lock:
            streams = list(self._streams)
            self._streams.clear()
        for stream in streams:
            stream.drop()
        return len(streams)

    def expire(self) -> None:
        """Compact the store: a later watch from an older resourceVersion gets 410 Expired."""
        self._store.compact()

    def pending_failures(self) -> int:
        """How many injected failures have not fired yet."""
        with self._lock:
            return sum(rule.times for rule in self._failures)

    def pending_lost_answers(self) -> int:
        """How many answers to lose are still due."""
        with self._lock:
            return sum(rule.times for rule in self._lost)

    def pending_delays(self) -> int:
        """How many injected delays have not started yet (0: each delayed request arrived)."""
        with self._lock:
            return sum(rule.times for rule in self._delays)

    def reset(self) -> None:
        """Forget every pending failure and delay."""
        with self._lock:
            self._failures.clear()
            self._delays.clear()
            self._lost.clear()

    # -- what the HTTP layer calls -------------------------------------------------------------

    def before(self, verb: str, resource: str) -> None:
        """Apply the faults due for this request: sleep for a delay, raise a failure."""
        with self._lock:
            delay = _take(self._delays, verb, resource)
            failure = _take(self._failures, verb, resource)
        if delay is not None:
            time.sleep(delay.seconds)
        if failure is not None:
            raise _failure_error(failure.code, failure.reason, verb, resource)

    def answer_lost(self, verb: str, resource: str) -> bool:
        """Whether the answer to this request, applied already, is to be lost."""
        with self._lock:
            return _take(self._lost, verb, resource) is not None

    def open_stream(self, stream: DroppableStream) -> None:
        with self._lock:
            self._streams.add(stream)

    def close_stream(self, stream: DroppableStream) -> None:
        with self._lock:
            self._streams.discard(stream)


def _check(verb: str, times: int) -> None:
    if verb not in VERBS:
        raise ValueError(f"unknown verb {verb!r}; one of {sorted(VERBS)}")
    if times < 1:
        raise ValueError("times must be at least 1")


def _take(rules: list[_R], verb: str, resource: str) -> _R | None:
    for rule in rules:
        if rule.matches(verb, resource):
            rule.times -= 1
            if rule.times == 0:
                rules.remove(rule)
            return rule
    return None


def _failure_error(code: int, reason: str | None, verb: str, resource: str) -> ApiError:
    reason = reason or REASONS.get(code, "InternalError")
    message = f"injected fault: {verb} {resource} failed with {code} {reason}"
    details: dict[str, object] | None = None
    if code == 429:
        message = "the server has received too many requests and has asked us to try again later"
        details = {"retryAfterSeconds": RETRY_AFTER_SECONDS}
    return ApiError(code, reason, message, details)
