"""The store checks made for a run's waiting isolated attempts: one sweep per run per interval.

Owns :class:`RunChecks`. Invariants: at most one sweep of a run is in progress, and sweeps
begin at least one interval apart, however many steps wait; one sweep is one
``fail_lost_heartbeats`` and one listing of the waiting steps that finished (by id: an earlier
attempt of the same step does not count); the first sweep after an outage only reads, so the
steps' heartbeats get one interval to arrive before anyone is judged lost.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from uuid import UUID

from wharf.core.enums import FINISHED_STATUSES
from wharf.core.paging import MAX_PAGE_SIZE
from wharf.execution import step_writes
from wharf.execution.services import RunServices
from wharf.store.models import PageRequest, StepRunFilter, StepRunRecord


class RunChecks:
    """The checks of one run's waiting steps, shared by them.

    While a run's isolated attempts run, the orchestrating process fails the run's steps
    whose heartbeat was lost and reads which of its waiting steps the store shows finished
    (their processes should be exiting). A waiting step whose check is due (its backend
    reported nothing for an interval) uses the latest sweep if it began less than an interval
    ago, else runs one; meanwhile the others wait for it and use its answer. A sweep that the
    store did not answer (an outage) is raised to the step that ran it and does not count as a
    sweep."""

    def __init__(
        self,
        services: RunServices,
        run_id: UUID,
        interval: float,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._services = services
        self.run_id = run_id
        self.interval = interval
        self._monotonic = monotonic
        self._sweeping = threading.Lock()  # one sweep at a time; waiters take its answer
        self._state = threading.Lock()  # the waiting steps
        self._waiting: dict[UUID, str] = {}  # step run id -> step name
        self._last: float | None = None  # when the last answered sweep began (monotonic)
        self._finished: frozenset[UUID] = frozenset()
        self._outage = False
        self.sweeps = 0
        """Sweeps the store answered so far."""

    def add(self, record: StepRunRecord) -> None:
        """``record``'s attempt is waiting: its step is checked from now on."""
        with self._state:
            self._waiting[record.id] = record.name

    def remove(self, record: StepRunRecord) -> None:
        with self._state:
            self._waiting.pop(record.id, None)

    @property
    def idle(self) -> bool:
        """Whether no step is waiting."""
        with self._state:
            return not self._waiting

    def finished(self, record: StepRunRecord) -> bool:
        """Whether the store shows ``record``'s step finished, as of a sweep that began less
        than an interval ago (run now if there is none). Raises the store's error if the sweep
        fails (the caller waits a transient one out and asks again)."""
        with self._sweeping:
            last = self._last
            if last is None or self._monotonic() - last >= self.interval:
                self._sweep()
            return record.id in self._finished

    def _sweep(self) -> None:
        """Under ``_sweeping``: fail the run's lost steps (unless just after an outage) and
        read which of the waiting steps finished."""
        began = self._monotonic()
        with self._state:
            waiting = dict(self._waiting)
        services = self._services
        try:
            if not self._outage:
                step_writes.fail_lost_heartbeats(services, services.clock(), self.run_id)
            finished = self._finished_of(waiting) if waiting else frozenset()
        except BaseException:
            self._outage = True
            raise
        self._outage = False
        self._finished = finished
        self._last = began
        self.sweeps += 1

    def _finished_of(self, waiting: dict[UUID, str]) -> frozenset[UUID]:
        """The ids of those of ``waiting`` that the store shows finished."""
        query = StepRunFilter(
            run_id=self.run_id,
            names=tuple(sorted(set(waiting.values()))),
            statuses=tuple(sorted(FINISHED_STATUSES, key=lambda s: s.value)),
        )
        found: set[UUID] = set()
        index = 1
        while True:
            page = self._services.store.steps.list(
                query, PageRequest(index=index, size=MAX_PAGE_SIZE)
            )
            found.update(step.id for step in page.items if step.id in waiting)
            if len(page.items) < MAX_PAGE_SIZE:
                return frozenset(found)
            index += 1
