"""One object per SQLite database file in this process, made on first use and reset in a
forked child.

Owns :class:`PerFile`: the registry behind the write turns (:mod:`.write_turns`) and the WAL
checkpointers (:mod:`.checkpoints`), which every engine of the process opened on one file shares.

Invariants: files are told apart by real path (two spellings of one file get one object); a
forked child has one thread, so whatever the parent's other threads held or ran at the fork
(a lock, a checkpoint thread) is gone there: the child resets every object in place (engines it
inherited keep theirs) and gets a free registry lock (``os.register_at_fork``).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class PerFile(Generic[T]):
    def __init__(self, make: Callable[[str], T], reset_in_child: Callable[[T], None]) -> None:
        self._make = make
        self._reset_in_child = reset_in_child
        self._by_path: dict[str, T] = {}
        self._lock = threading.Lock()
        os.register_at_fork(after_in_child=self._after_fork_in_child)

    def __call__(self, path: str) -> T:
        """The process's object for the file at ``path``."""
        key = os.path.realpath(path)
        with self._lock:
            found = self._by_path.get(key)
            if found is None:
                found = self._by_path[key] = self._make(key)
            return found

    def _after_fork_in_child(self) -> None:
        self._lock = threading.Lock()
        for item in self._by_path.values():
            self._reset_in_child(item)
