"""Checkpoints of a SQLite file's write-ahead log, run by a thread of their own
(:class:`WalCheckpoints`, :func:`checkpoints_for`), so that no writer's commit pays for a
checkpoint (it would hold the write lock meanwhile).

Invariants:
- one checkpointer per file (by real path) per process; a forked child starts with none running
  and free locks (``os.register_at_fork``): a fork waits for a checkpoint under way, since a
  thread inside SQLite may hold SQLite's process-wide mutexes (its allocator's), which the child
  would inherit held (its first SQLite call, on any file, would wait for ever);
- recording a commit never waits; a failed checkpoint is logged, never raised to a writer;
- the thread exits after :data:`IDLE_SECONDS` without commits; it never creates a database file.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from pathlib import Path

logger = logging.getLogger(__name__)

AUTOCHECKPOINT_PAGES = 10_000
"""SQLite's own threshold on every connection: reached only if this module's checkpoints fall
behind (40 MB of log at 4 KiB pages)."""
COMMITS_PER_CHECKPOINT = 64
"""About SQLite's default 1,000 pages at the 10-20 pages a commit of the store writes."""
MAX_DELAY_SECONDS = 1.0
IDLE_SECONDS = 30.0
BUSY_TIMEOUT_SECONDS = 30.0


class WalCheckpoints:
    """Background checkpoints of one SQLite file's write-ahead log.

    Checkpoints run in ``PASSIVE`` mode after ``commits_per_checkpoint`` commits or ``max_delay``
    seconds, whichever comes first, never at exit (that would make every short process sync the
    files). Engines raise SQLite's own auto-checkpoint threshold to a safety net
    (:data:`AUTOCHECKPOINT_PAGES`).
    """

    def __init__(
        self,
        path: str,
        *,
        commits_per_checkpoint: int = COMMITS_PER_CHECKPOINT,
        max_delay: float = MAX_DELAY_SECONDS,
        idle: float = IDLE_SECONDS,
    ) -> None:
        self.path = path
        self.commits_per_checkpoint = commits_per_checkpoint
        self.max_delay = max_delay
        self.idle = idle
        self.checkpoints = 0
        """Checkpoints run so far (from either thread)."""
        self.reset()

    def reset(self) -> None:
        """No commit pending and no thread: a new object, or a forked child's (the parent's
        checkpoint thread did not come along; the next commit starts one)."""
        self._pending = 0
        self._changed = threading.Condition(threading.Lock())
        self._thread: threading.Thread | None = None

    def committed(self) -> None:
        """Record one committed write transaction on the file."""
        with self._changed:
            self._pending += 1
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="wharf-wal-checkpoints", daemon=True
                )
                self._thread.start()
            elif self._pending == 1 or self._pending >= self.commits_per_checkpoint:
                self._changed.notify()

    def _run(self) -> None:
        while True:
            with self._changed:
                if not self._changed.wait_for(lambda: self._pending > 0, timeout=self.idle):
                    self._thread = None  # under the lock: the next commit starts another
                    return
                self._changed.wait_for(
                    lambda: self._pending >= self.commits_per_checkpoint, timeout=self.max_delay
                )
                self._pending = 0
            self._checkpoint()

    def _checkpoint(self) -> None:
        with _checkpointing:  # one at a time in the process, and none across a fork
            if not os.path.exists(self.path):
                return  # the file is gone (a removed temporary store): nothing to checkpoint
            try:
                uri = f"{Path(self.path).absolute().as_uri()}?mode=rw"
                connection = sqlite3.connect(
                    uri, uri=True, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None
                )
                try:
                    connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                finally:
                    connection.close()
            except sqlite3.Error as exc:
                logger.warning("Could not checkpoint the SQLite log of %s: %s", self.path, exc)
                return
            self.checkpoints += 1


_by_path: dict[str, WalCheckpoints] = {}
_registry = threading.Lock()
_checkpointing = threading.Lock()
"""Held by every checkpoint's SQLite calls, and by a forking thread across the fork."""


def checkpoints_for(path: str) -> WalCheckpoints:
    """The process's checkpointer for the SQLite file at ``path`` (two spellings of one file,
    one checkpointer)."""
    key = os.path.realpath(path)
    with _registry:
        found = _by_path.get(key)
        if found is None:
            found = _by_path[key] = WalCheckpoints(key)
        return found


def _before_fork() -> None:
    """Wait for a checkpoint under way (at most its busy timeout and its I/O), and start none
    until the fork is done. Other threads' SQLite calls (an engine's) are their owners' to keep
    off a fork."""
    _checkpointing.acquire()


def _after_fork_in_parent() -> None:
    _checkpointing.release()


def _after_fork_in_child() -> None:
    """The child has one thread: whatever the parent's others held or ran is gone."""
    global _registry, _checkpointing
    _registry = threading.Lock()
    _checkpointing = threading.Lock()
    for checkpoints in _by_path.values():
        checkpoints.reset()


os.register_at_fork(
    before=_before_fork, after_in_parent=_after_fork_in_parent, after_in_child=_after_fork_in_child
)
