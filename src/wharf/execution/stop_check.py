"""Whether a run was asked to stop, as the engine asks once its steps are done.

``wharf runs stop`` (from any process) moves the run to stopping. At step boundaries the engine
does not need to ask: the store refuses to create a step run in a stopping or stopped run
(``RunStoppingError``), in the very write that would start the step. This check reads the run's
status for what the store cannot tell: how a run whose last steps ended meanwhile should end.

Invariant: once a stop has been seen it stays seen (a stopping run never runs again).
"""

from __future__ import annotations

import threading
from uuid import UUID

from wharf.core.enums import ExecutionStatus
from wharf.store.ports import Store

STOP_STATUSES = frozenset({ExecutionStatus.STOPPING, ExecutionStatus.STOPPED})


class StopCheck:
    def __init__(self, store: Store, run_id: UUID) -> None:
        self._store = store
        self._run_id = run_id
        self._stopping = False
        self._lock = threading.Lock()

    def requested(self) -> bool:
        """True once the run is stopping or stopped."""
        with self._lock:
            if not self._stopping:
                self._stopping = self._store.runs.get_status(self._run_id) in STOP_STATUSES
            return self._stopping
