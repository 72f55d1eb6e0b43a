"""Keep the garbage collector's full passes off what a process had built before a run began.

Owns: :func:`frozen_heap`.

A Python process that runs pipelines has imported and built a large heap before its first step
(SQLAlchemy, pydantic, the user's libraries and data). CPython's full collection walks every
tracked object, and the burst of objects a run creates (a dynamic run submitting hundreds of
steps) triggers such collections: measured 30-70 ms each, during which no thread of the process
runs, so every step waiting to start, every heartbeat and every hand-off of a scarce resource
waits too. :func:`gc.freeze` moves the objects that exist into a permanent generation that
collections skip; :func:`gc.unfreeze` gives them back when the last run of the process ends, so
cyclic garbage among them is still reclaimed, only later.

Invariants: freezing is process-wide, so runs of one process share it through a count: the
first run to enter freezes, the last to leave unfreezes; objects created during runs are
collected as usual (refcounting frees non-cyclic garbage at once, frozen or not).
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
