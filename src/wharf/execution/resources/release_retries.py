"""Releases that met an unreachable Resource Manager, retried in the background.

Owns :class:`ReleaseRetries`. A step's request is released when the step ends; if the RM cannot
be reached then (a restart, a partition, every replica down), the request would hold its
resources for nobody until its lease lapses (the liveness timeout: 76 s at the default
heartbeat) while other steps wait for them. A release is safe to repeat, so it is retried on
one daemon thread, started when one is due and ending when none is left, backing off up to
:data:`MAX_DELAY_SECONDS`, for :data:`RELEASE_PATIENCE_SECONDS` at most (then the lease lapses
on its own). Invariant: the step's bookkeeping never waits for it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from uuid import UUID

from wharf.core.errors import WharfError
from wharf.execution.outages import transient

logger = logging.getLogger(__name__)

RELEASE_PATIENCE_SECONDS = 120.0
"""Longest a release is retried: longer than a lease at the default heartbeat (76 s)."""
FIRST_DELAY_SECONDS = 0.5
MAX_DELAY_SECONDS = 5.0


class ReleaseRetries:
    """Retries ``release(request_id)`` for each request :meth:`add` is given, until it gets an
    answer other than an outage or its patience runs out."""

    def __init__(
        self, release: Callable[[UUID], object], *, patience: float = RELEASE_PATIENCE_SECONDS
    ) -> None:
        self._release = release
        self._patience = patience
        self._lock = threading.Lock()
        self._due: dict[UUID, float] = {}
        """Request id -> when to give up (monotonic seconds)."""
        self._thread: threading.Thread | None = None

    def add(self, request_id: UUID) -> None:
        """Retry releasing ``request_id`` in the background."""
        with self._lock:
            self._due.setdefault(request_id, time.monotonic() + self._patience)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="wharf-release-retries", daemon=True
                )
                self._thread.start()

    def pending(self) -> int:
        """Releases still being retried."""
        with self._lock:
            return len(self._due)

    def _run(self) -> None:
        delay = FIRST_DELAY_SECONDS
        while True:
            time.sleep(delay)  # a backoff between tries, not a synchronisation
            with self._lock:
                due = list(self._due.items())
            for request_id, give_up in due:
                if self._settled(request_id, give_up):
                    with self._lock:
                        self._due.pop(request_id, None)
            with self._lock:
                if not self._due:
                    self._thread = None
                    return
            delay = min(MAX_DELAY_SECONDS, delay * 2)

    def _settled(self, request_id: UUID, give_up: float) -> bool:
        try:
            self._release(request_id)
        except WharfError as exc:
            if transient(exc) and time.monotonic() < give_up:
                return False
            logger.warning("Could not release resource request %s: %s", request_id, exc)
            return True
        logger.info("Released resource request %s once the Resource Manager answered.", request_id)
        return True
