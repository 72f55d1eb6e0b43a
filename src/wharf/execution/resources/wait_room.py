"""The wait room: where this process's steps that wait for an allocation learn that their
request left the queue.

Owns :class:`WaitRoom` and :class:`Ticket`; the room also carries the process's
:class:`~wharf.execution.resources.holders_first.HoldersFirst` gate (:attr:`WaitRoom.holders`).
Invariants: no lost wake-up (a waiter enters before it reads its request's status, and a
wake-up stays on its ticket); one check at a time; a failing check is logged, never raised
(waiters still poll by renewing their lease).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Protocol, runtime_checkable
from uuid import UUID

from wharf.core.enums import ResourceRequestStatus
from wharf.execution.resources.holders_first import HoldersFirst

if TYPE_CHECKING:  # the RM's models load only when a step actually asks for resources
    from wharf.resource_manager.contract.models import (
        Page as RMPage,
    )
    from wharf.resource_manager.contract.models import (
        PageRequest as RMPageRequest,
    )
    from wharf.resource_manager.contract.models import (
        RequestFilter,
        ResourceRequestInfo,
    )

logger = logging.getLogger(__name__)

IDS_PER_LIST = 200
"""Request ids per ``list`` call of a check: bounds the SQL ``IN`` list, and over HTTP the
URL (repeated ``id`` parameters, about 8 KB)."""

REMEMBERED = 1024
"""Most requests the room remembers as having left the queue before anyone waited for them."""

WATCH_SECONDS = 0.5
"""While anyone waits, the room also checks this often (see :class:`WaitRoom`)."""
MAX_WATCH_SECONDS = 20.0
"""The watch backs off up to this while the Resource Manager cannot be reached."""

LEFT_QUEUE = tuple(s for s in ResourceRequestStatus if s is not ResourceRequestStatus.PENDING)
"""A waiter is woken when its request reaches any of these (allocated, or ended/reclaimed)."""


class RequestState(Protocol):
    """What a waiter needs to know of its request (an RM answer or the RM's own model)."""

    @property
    def id(self) -> UUID: ...
    @property
    def status(self) -> ResourceRequestStatus: ...
    @property
    def status_reason(self) -> str | None: ...


@runtime_checkable
class AnnouncesLeftQueue(Protocol):
    """A requests client that calls a listener with the requests leaving the queue (the
    in-process Resource Manager's)."""

    def on_left_queue(self, listener: Callable[[Sequence[RequestState]], None]) -> None: ...


@runtime_checkable
class MarksUnannounced(Protocol):
    """A requests client that can tell whether anything may have left the queue without its
    announcements (the in-process Resource Manager's): equal markers, nothing did."""

    def unannounced_marker(self) -> Hashable: ...


class Ticket:
    """One waiter's place in the room; :meth:`wait` returns its request once it left the queue."""

    __slots__ = ("_lease_until", "_request", "_woken", "request_id")

    def __init__(self, request_id: UUID, lease_until: float | None = None) -> None:
        self.request_id = request_id
        self._request: RequestState | None = None
        self._woken = threading.Event()
        self._lease_until = lease_until

    def lease_left(self) -> float | None:
        """Seconds left of the lease the request was created with, if this process created it
        pending and nobody has waited for it yet (else None: unknown)."""
        if self._lease_until is None:
            return None
        return self._lease_until - time.monotonic()

    def wait(self, timeout: float) -> RequestState | None:
        """Block up to ``timeout`` seconds; the request if it left the queue, else None."""
        self._woken.wait(max(0.0, timeout))
        return self._request

    def interrupt(self) -> None:
        """End the current and every later :meth:`wait` at once (its waiter was stopped)."""
        self._woken.set()

    def wake(self, request: RequestState) -> None:
        if self._request is None:
            self._request = request
            self._woken.set()


class WaitRoom:
    """The waiters of this process, by request id.

    A waiter enters with its request id and is woken with its request once the room learns
    that it left the queue: from an in-process Resource Manager after each of its commits
    (:meth:`wake_left`), or from a check (:meth:`check`: one ``list`` per
    :data:`IDS_PER_LIST` waiters) after a release of this process and, while anyone waits,
    every :data:`WATCH_SECONDS` on a watch thread. Requests that left the queue before their
    waiter entered are remembered (a bounded number), so that waiter does not wait at all.

    ``watch_seconds``: while the room is occupied, a daemon thread checks this often, for
    what no release of this process announces (a step process or another process released,
    a lease lapsed, an admin cancelled); None: only :meth:`check` calls wake anyone.
    """

    def __init__(
        self,
        lookup: Callable[[Sequence[UUID]], Iterable[ResourceRequestInfo]],
        *,
        watch_seconds: float | None = WATCH_SECONDS,
        unannounced: Callable[[], Hashable | None] | None = None,
    ) -> None:
        self._lookup = lookup
        """Those of the given requests that are no longer pending (any subset is fine: only
        registered ids in one of :data:`LEFT_QUEUE` statuses wake anyone)."""
        self._watch_seconds = watch_seconds
        self._unannounced = unannounced
        """A marker that changes whenever a request may have left the queue unannounced
        (None: unknown); the watch skips its lookup while it stays the same."""
        self._lock = threading.Lock()
        self._emptied = threading.Condition(self._lock)
        self._tickets: dict[UUID, Ticket] = {}
        self._left_early: OrderedDict[UUID, RequestState] = OrderedDict()
        """Requests known to have left the queue before a waiter entered (oldest first)."""
        self._created_pending: OrderedDict[UUID, float] = OrderedDict()
        """Requests this process created pending, with the monotonic end of their first lease."""
        self._checking = threading.Lock()
        self._failing = False
        self.watcher: threading.Thread | None = None
        """The watch thread while the room is occupied (exposed so tests can join it)."""
        self.holders = HoldersFirst(queued=self._waiting_now)
        """Steps of this process that hold an allocation go before the creation of steps
        that will wait for one (see :mod:`wharf.execution.resources.holders_first`)."""

    @property
    def waiting(self) -> int:
        with self._lock:
            return len(self._tickets)

    def _waiting_now(self) -> int:
        """:attr:`waiting` without the lock (a hint for the holders' gate: a count read while
        a waiter enters or leaves is as good as the one just before or after)."""
        return len(self._tickets)

    @contextmanager
    def enter(self, request_id: UUID) -> Iterator[Ticket]:
        """Register a waiter for ``request_id`` for the block (enter before reading status)."""
        with self._lock:
            ticket = Ticket(request_id, self._created_pending.pop(request_id, None))
            self._tickets[request_id] = ticket
            known = self._left_early.pop(request_id, None)
            if known is not None:
                ticket.wake(known)  # its waiter will not wait: no watch needed for it
            elif self._watch_seconds is not None and self.watcher is None:
                self.watcher = threading.Thread(
                    target=self._watch, name="wharf-wait-room", daemon=True
                )
                self.watcher.start()
        try:
            yield ticket
        finally:
            with self._lock:
                if self._tickets.get(request_id) is ticket:
                    del self._tickets[request_id]
                if not self._tickets:
                    self._emptied.notify_all()

    def check(self) -> bool:
        """Capacity may have been freed: wake the waiters whose request left the queue.
        False if the lookup failed (logged, never raised: waiters still poll on their own)."""
        with self._checking:
            with self._lock:
                ids = list(self._tickets)
            found: list[ResourceRequestInfo] = []
            try:
                for start in range(0, len(ids), IDS_PER_LIST):
                    found.extend(self._lookup(ids[start : start + IDS_PER_LIST]))
            except Exception as exc:
                if not self._failing:  # once per outage, not at every watch
                    logger.warning(
                        "Could not check which waiting steps got their resources: %s", exc
                    )
                self._failing = True
                return False
            self._failing = False
        with self._lock:
            for request in found:
                ticket = self._tickets.get(request.id)
                if ticket is not None and request.status in LEFT_QUEUE:
                    ticket.wake(request)
        return True

    def wake_left(self, requests: Sequence[RequestState]) -> None:
        """Wake the waiters of those ``requests`` that left the queue (told by the RM); the
        others are remembered for a waiter that has not entered yet."""
        with self._lock:
            for request in requests:
                if request.status not in LEFT_QUEUE:
                    continue
                ticket = self._tickets.get(request.id)
                if ticket is not None:
                    ticket.wake(request)
                else:
                    self._remember(request)

    def left_before_waiting(self, request: RequestState) -> None:
        """``request`` is known not to be pending (e.g. it was created allocated): a waiter
        that enters for it later is woken at once."""
        if request.status in LEFT_QUEUE:
            with self._lock:
                self._remember(request)

    def created(self, request: RequestState, lease_seconds: float) -> None:
        """This process just created ``request`` with a lease of ``lease_seconds``: a waiter
        that enters for it learns what it left (:meth:`Ticket.lease_left`), or is woken at
        once if it is not pending."""
        if request.status in LEFT_QUEUE:
            self.left_before_waiting(request)
            return
        with self._lock:
            self._created_pending[request.id] = time.monotonic() + lease_seconds
            while len(self._created_pending) > REMEMBERED:
                self._created_pending.popitem(last=False)

    def _remember(self, request: RequestState) -> None:
        self._left_early[request.id] = request
        while len(self._left_early) > REMEMBERED:
            self._left_early.popitem(last=False)

    def _watch(self) -> None:
        """Check every ``watch_seconds`` (backing off while the RM fails) until the room is
        empty; then leave, so an idle process keeps no thread."""
        assert self._watch_seconds is not None
        pause = self._watch_seconds
        checked: Hashable | None = None
        while True:
            with self._lock:
                if self._tickets:
                    self._emptied.wait(pause)
                if not self._tickets:
                    self.watcher = None
                    return
            marker = self._marker()
            if marker is not None and marker == checked:
                continue  # everything that left the queue since the last lookup was announced
            ok = self.check()
            if ok:
                checked = marker  # read before the lookup: a later change is seen next time
            pause = self._watch_seconds if ok else min(MAX_WATCH_SECONDS, 2 * pause)

    def _marker(self) -> Hashable | None:
        if self._unannounced is None:
            return None
        try:
            return self._unannounced()
        except Exception:  # the lookup will tell (and log) what is wrong
            return None


def left_queue_of(
    list_requests: Callable[[RequestFilter, RMPageRequest], RMPage[ResourceRequestInfo]],
) -> Callable[[Sequence[UUID]], list[ResourceRequestInfo]]:
    """A wait room's lookup over a requests client's ``list``: those of the given requests
    that are no longer pending, in one call."""

    def lookup(ids: Sequence[UUID]) -> list[ResourceRequestInfo]:
        from wharf.resource_manager.contract.models import PageRequest, RequestFilter

        query = RequestFilter(ids=tuple(ids), status=LEFT_QUEUE)
        return list_requests(query, PageRequest(size=len(ids))).items

    return lookup
