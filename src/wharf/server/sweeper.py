"""The workspace server's periodic lost-orchestrator sweep (``wharf.store.lost_runs``).

A run whose orchestrating process stopped beating ends failed within its heartbeat deadline
plus one sweep interval, even when no client reads runs meanwhile. One daemon thread per app,
started by its lifespan and stopped (joined) at shutdown; a failed sweep is logged and retried
at the next interval.
"""

from __future__ import annotations

import threading

from wharf.store.lost_runs import sweep_quietly
from wharf.store.ports import StepRunRepository, Store

SWEEP_INTERVAL_SECONDS = 10.0


class LostRunSweeper:
    def __init__(
        self,
        store: Store,
        interval: float = SWEEP_INTERVAL_SECONDS,
        *,
        steps: StepRunRepository | None = None,
    ) -> None:
        """``steps``: the step runs that release the requests of steps a sweep ends."""
        self._store = store
        self._steps = steps
        self._interval = interval
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="wharf-run-sweeper", daemon=True)

    def start(self) -> LostRunSweeper:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stopped.wait(self._interval):
            sweep_quietly(self._store, steps=self._steps)

    def close(self) -> None:
        self._stopped.set()
        if self._thread.is_alive():
            self._thread.join()
