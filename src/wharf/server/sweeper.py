"""The workspace server's periodic lost-orchestrator sweep (``wharf.store.lost_runs``).

A run whose orchestrating process stopped beating ends failed within its heartbeat deadline
plus one sweep interval, even when no client reads runs meanwhile. One daemon thread per app,
started by its lifespan and stopped (joined) at shutdown; a failed sweep is logged and retried
at the next interval.
"""

from __future__ import annotations

import threading

from wharf.store.lost_runs import ReleaseEnded, sweep_quietly
from wharf.store.ports import Store

SWEEP_INTERVAL_SECONDS = 10.0


class LostRunSweeper:
    def __init__(
        self,
        store: Store,
        interval: float = SWEEP_INTERVAL_SECONDS,
        *,
        release: ReleaseEnded | None = None,
    ) -> None:
        """``release``: told of each step a sweep ended (releases its request)."""
        self._store = store
        self._release = release
        self._interval = interval
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="wharf-run-sweeper", daemon=True)

    def start(self) -> LostRunSweeper:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stopped.wait(self._interval):
            sweep_quietly(self._store, release=self._release)

    def close(self) -> None:
        self._stopped.set()
        if self._thread.is_alive():
            self._thread.join()
