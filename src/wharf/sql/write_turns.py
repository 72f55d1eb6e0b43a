"""One SQLite writer at a time per database file in this process, urgent writers first.

Owns :class:`WriteTurns` and :func:`turns_for`. Writers queue here before ``BEGIN IMMEDIATE``
because SQLite's busy handler sleeps and polls, so a writer that loses a race waits far longer
than the write ahead of it takes. Readers never take a turn; other processes still meet this one
in SQLite's busy handler.

Invariants:
- at most one write transaction per file (by real path) per process at a time, shared by every
  engine of the process that opens the file;
- a turn is reentrant per thread;
- an urgent writer (:func:`wharf.sql.urgency.is_urgent`) goes next, the others in arrival order;
- a forked child starts with every turn free (``os.register_at_fork``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from wharf.sql.per_file import PerFile
from wharf.sql.urgency import is_urgent


class WriteTurns:
    """The write turns of one SQLite file in this process."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Every turn free and nobody waiting: a new object, or a forked child's (whose other
        threads, holding or awaiting turns in the parent, did not come along)."""
        self._lock = threading.Lock()
        self._urgent = threading.Condition(self._lock)
        self._others = threading.Condition(self._lock)
        self._owner: int | None = None
        self._depth = 0
        self._urgent_waiting = 0

    @contextmanager
    def turn(self) -> Iterator[None]:
        """Hold the file's write turn for the block (urgent callers go first)."""
        me = threading.get_ident()
        with self._lock:
            if self._owner == me:
                self._depth += 1
            elif is_urgent():
                self._urgent_waiting += 1
                try:
                    while self._owner is not None:
                        self._urgent.wait()
                finally:
                    self._urgent_waiting -= 1
                self._owner = me
            else:
                while self._owner is not None or self._urgent_waiting:
                    self._others.wait()
                self._owner = me
        try:
            yield
        finally:
            with self._lock:
                if self._depth:
                    self._depth -= 1
                else:
                    self._owner = None
                    if self._urgent_waiting:
                        self._urgent.notify()
                    else:
                        self._others.notify()


turns_for: PerFile[WriteTurns] = PerFile(lambda _path: WriteTurns(), WriteTurns.reset)
"""The process's turns for the SQLite file at a path (every turn free in a forked child)."""
