"""Keep the garbage collector's full passes off what a process had built before a run began.

Owns: :func:`frozen_heap`. A full collection walks every tracked object with no thread running,
and the burst of objects a run creates triggers such collections; :func:`gc.freeze` moves the
existing heap into a permanent generation they skip, and :func:`gc.unfreeze` gives it back when
the process's last run ends (cyclic garbage among it is still reclaimed, only later).

Invariants: freezing is process-wide and counted: the first run to enter freezes, the last to
leave unfreezes; objects created during runs are collected as usual.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_runs = 0


@contextmanager
def frozen_heap() -> Iterator[None]:
    """Freeze the heap as it is for the duration of the block (nesting and threads allowed)."""
    global _runs
    with _lock:
        _runs += 1
        if _runs == 1:
            gc.freeze()
    try:
        yield
    finally:
        with _lock:
            _runs -= 1
            if _runs == 0:
                gc.unfreeze()
