"""Whether a run was asked to stop, as the engine asks before it starts a step.

``wharf runs stop`` (from any process) moves the run to stopping; the engine reads the run's
status before each step starts, so no new step starts after that. Over a workspace server a read
is an HTTP request, a large share of a short step's cost, so a read may stand for
``interval`` seconds (by the run's clock): a stop then takes effect at the first step boundary
at most ``interval`` after it was requested. Running steps learn of it from their heartbeats
either way. ``interval = 0`` (the embedded store's) reads before every step.

Invariant: once a stop has been seen it stays seen (a stopping run never runs again).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime
from uuid import UUID

from wharf.core.enums import ExecutionStatus
from wharf.store.ports import Store

STOP_STATUSES = frozenset({ExecutionStatus.STOPPING, ExecutionStatus.STOPPED})


class StopCheck:
    def __init__(
        self,
        store: Store,
        run_id: UUID,
        clock: Callable[[], datetime],
        interval: float = 0.0,
    ) -> None:
        self._store = store
        self._run_id = run_id
        self._clock = clock
        self._interval = interval
        self._read_at: datetime | None = None
        self._stopping = False
        self._lock = threading.Lock()

    def requested(self) -> bool:
        """True once the run is stopping or stopped."""
        with self._lock:
            if self._stopping:
                return True
            now = self._clock()
            if (
                self._read_at is not None
                and self._interval > 0
                and (now - self._read_at).total_seconds() < self._interval
            ):
                return False
            status = self._store.runs.get_status(self._run_id)
            self._read_at = now
            self._stopping = status in STOP_STATUSES
            return self._stopping
