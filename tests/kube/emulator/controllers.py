"""The emulator's controllers: Job, CronJob, garbage collector, namespace finaliser, TTL.

``Controllers(store, clock)`` plays kube-controller-manager for the emulator. ``attach()``
subscribes it to the store; every committed change is then handled right after the write that
made it (in the writing thread, before that write returns to a single-threaded caller), so a
Job's pod exists as soon as the Job does and a deleted owner's dependents are gone when the
delete returns. ``tick(now)`` does the time-based work: activeDeadlineSeconds, delayed pod
replacements (``job_backoff_seconds``), ttlSecondsAfterFinished and CronJob schedules. With a
FakeClock, ``Emulator.advance_to(t)`` calls it; with the SystemClock a ticker thread does.
The Job and CronJob controllers record Events on state transitions (``controllers_events``).

Reactions are serialised: events go into one queue drained by one thread at a time (a write made
while handling an event is handled after it, never recursively); a failing reaction is logged
and does not fail the write that triggered it. The controllers never stop processes: pods bound
to a node are deleted with their grace period and the kubelet stops them.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any

from tests.kube.emulator.controllers_common import is_deleting, log
from tests.kube.emulator.controllers_cron import CronJobController
from tests.kube.emulator.controllers_events import EventRecorder
from tests.kube.emulator.controllers_gc import GarbageCollector, NamespaceFinalizer
from tests.kube.emulator.controllers_jobs import JobController
from tests.kube.emulator.resources import (
    CRONJOBS,
    JOBS,
    PODS,
    RESOURCES,
    ResourceType,
    resource_of_kind,
)

if TYPE_CHECKING:
    from tests.kube.emulator.clock import Clock
    from tests.kube.emulator.store import ObjectStore, WatchEvent


class Controllers:
    """All controllers of the emulator, fed by store events and clock ticks."""

    def __init__(
        self, store: ObjectStore, clock: Clock, *, job_backoff_seconds: float = 0.0
    ) -> None:
        """``job_backoff_seconds``: the delay before the first replacement of a failed Job pod
        (doubling per further failure). A real controller uses 10; the default 0 replaces at once.
        """
        self._store = store
        self._clock = clock
        self.jobs = JobController(
            store,
            backoff_seconds=job_backoff_seconds,
            events=EventRecorder(store, clock, "job-controller"),
        )
        self.cronjobs = CronJobController(
            store, events=EventRecorder(store, clock, "cronjob-controller")
        )
        self.gc = GarbageCollector(store)
        self.namespaces = NamespaceFinalizer(store)
        self._work = threading.RLock()
        self._queue_lock = threading.Lock()
        self._queue: collections.deque[WatchEvent] = collections.deque()
        self._draining = False
        self._attached = False

    def attach(self) -> None:
        """Subscribe to the store and reconcile what is already in it."""
        if self._attached:
            return
        self._attached = True
        self._store.subscribe(self._on_event)
        self.resync()

    def tick(self, now: datetime) -> None:
        """Run the time-based controllers as of ``now``."""
        with self._work:
            self._guard("job tick", lambda: self.jobs.tick(now))
            self._guard("cronjob tick", lambda: self.cronjobs.tick(now))
        self._drain()

    def resync(self) -> None:
        """Reconcile every object as if it had just been added (used on attach)."""
        with self._work:
            now = self._clock.now()
            for rtype in RESOURCES:
                for obj in self._store.list(rtype, None)["items"]:
                    if is_deleting(obj):  # pending foreground/orphan deletion or namespace
                        self._guard("deletion", partial(self._resume_deletion, rtype, obj))
            for job in self._store.list(JOBS, None)["items"]:
                self._guard("job", partial(self.jobs.sync, job, now))
            for cronjob in self._store.list(CRONJOBS, None)["items"]:
                self._guard("cronjob", partial(self.cronjobs.sync_status, cronjob))
        self._drain()

    # ---- event intake ------------------------------------------------------------------------

    def _on_event(self, event: WatchEvent) -> None:
        if event.type not in ("ADDED", "MODIFIED", "DELETED"):
            return
        with self._queue_lock:
            self._queue.append(event)
        self._drain()

    def _drain(self) -> None:
        """Handle queued events unless another frame or thread is already doing so."""
        with self._queue_lock:
            if self._draining:
                return
            self._draining = True
        try:
            while True:
                with self._queue_lock:
                    if not self._queue:
                        self._draining = False
                        return
                    event = self._queue.popleft()
                with self._work:
                    self._guard(f"{event.type} event", partial(self._handle, event))
        except BaseException:
            with self._queue_lock:
                self._draining = False
            raise

    def _handle(self, event: WatchEvent) -> None:
        obj = event.object
        rtype = event.rtype or _rtype_of(obj)
        if rtype is None:
            return
        now = self._clock.now()
        kind = event.type
        if rtype == PODS:
            self.jobs.pod_event(kind, obj, now)
        elif rtype == JOBS:
            if kind == "DELETED":
                self.jobs.job_deleted(obj)
            else:
                self.jobs.sync(obj, now)
            self.cronjobs.job_event(obj)
        elif rtype == CRONJOBS and kind != "DELETED":
            self.cronjobs.sync_status(obj)
        self.gc.on_event(kind, rtype, obj, event.old_object)
        self.namespaces.on_event(kind, rtype, obj)

    def _resume_deletion(self, rtype: ResourceType, obj: dict[str, Any]) -> None:
        self.gc.on_event("MODIFIED", rtype, obj)
        self.namespaces.on_event("MODIFIED", rtype, obj)

    @staticmethod
    def _guard(what: str, action: Callable[[], object]) -> None:
        try:
            action()
        except Exception:
            log.exception("controller failure while handling %s", what)


def _rtype_of(obj: dict[str, Any]) -> ResourceType | None:
    found = resource_of_kind(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
    if found is not None:
        return found
    return next((r for r in RESOURCES if r.kind == obj.get("kind")), None)
