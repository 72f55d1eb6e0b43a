"""One SQLite writer at a time per database file in this process, urgent writers first.

Owns :class:`WriteTurns` and :func:`turns_for`.

SQLite lets one connection write at a time. A connection that finds the file locked waits in
SQLite's busy handler, which sleeps and polls (1, 2, 5, 10, 15, 20, 25 ms ...): a writer that
loses a race waits far longer than the writer ahead of it takes (a step's creation that collided
once slept ≈ 55 ms), and every engine open on the file competes blindly (the embedded Resource
Manager's tables share the store's file). So the writers of one process take turns here before
they begin: a turn passes the moment the previous write transaction ends, and a thread marked
urgent (:func:`wharf.sql.urgency.is_urgent`: a step that holds an allocation, doing its
bookkeeping) goes next. Readers never take a turn (WAL readers do not block writers), and
other processes still meet this one in SQLite's busy handler.

Invariants:
- at most one write transaction per file per process runs at a time: turns are per file (by
  real path), shared by every engine of the process that opens it;
- a turn is reentrant per thread, so a write inside a write never waits for itself;
- an urgent writer goes next; the others go in arrival order while no urgent writer waits.
  Urgent stretches are short and few (one at each end of an allocation), so nobody starves;
- a forked child starts with every turn free: the threads that held or awaited turns in the
  parent did not come along, so their locks are made anew in the child (``os.register_at_fork``).
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
