"""Whether a run was asked to stop, as the engine asks once its steps are done.

Owns :class:`StopCheck`. At step boundaries the engine does not need to ask: the store refuses
to create a step run in a stopping or stopped run (``RunStoppingError``); this check reads the
run's status for what the store cannot tell: how a run whose last steps ended meanwhile should
end. Invariant: once a stop has been seen it stays seen (a stopping run never runs again).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime
from uuid import UUID

from wharf.core.enums import ExecutionStatus
from wharf.execution.outages import retry_through_outage
from wharf.execution.services import utc_now
from wharf.store.ports import Store

STOP_STATUSES = frozenset({ExecutionStatus.STOPPING, ExecutionStatus.STOPPED})


class StopCheck:
    def __init__(
        self,
        store: Store,
        run_id: UUID,
        *,
        patience: float = 0.0,
        clock: Callable[[], datetime] = utc_now,
        sleep: Callable[[float], object] = time.sleep,
    ) -> None:
        """``patience``: how long a read waits out a store outage (0: not at all; the run loop
        gives the run's liveness timeout)."""
        self._store = store
        self._run_id = run_id
        self._stopping = False
        self._lock = threading.Lock()
        self._patience, self._clock, self._sleep = patience, clock, sleep

    def requested(self) -> bool:
        """True once the run is stopping or stopped."""
        with self._lock:
            if not self._stopping:
                status = retry_through_outage(
                    lambda: self._store.runs.get_status(self._run_id),
                    what=f"read the status of run {self._run_id}",
                    patience=self._patience,
                    clock=self._clock,
                    sleep=self._sleep,
                )
                self._stopping = status in STOP_STATUSES
            return self._stopping
