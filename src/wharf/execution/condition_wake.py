"""Waking a thread blocked in ``threading.Condition.wait`` so that an interrupt sent to it is
raised.

An exception sent to a thread (``PyThreadState_SetAsyncExc``) is raised only once the thread
runs Python code again; a thread waiting on a lock never does until the lock is released. Most
of Python's waits are ``Condition.wait`` (``Event.wait``, ``queue.Queue.get``, a
``concurrent.futures`` result, a ``multiprocessing`` pool's ``map``): :func:`wake_condition_wait`
releases that thread's own waiter lock, as ``notify`` would for it alone, so its wait returns and
the pending exception is raised there. Invariant: only the waiter of the given thread's innermost
frame is released, under the condition's lock, and only once (it is taken off the waiters, as
``notify`` does); other waiters of the condition see nothing.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any

_CONDITION_WAIT = threading.Condition.wait.__code__
LOCK_SECONDS = 0.1
"""How long a wake waits for the condition's lock (its holder may be about to notify anyway)."""


def wake_condition_wait(thread_id: int, still: Callable[[], bool] = lambda: True) -> bool:
    """Wake ``thread_id`` if it is blocked in ``threading.Condition.wait`` (its innermost Python
    frame) and ``still()`` holds once that wait is known to be pending (the thread cannot have
    gone on meanwhile: e.g. it has not left the region its interrupt is for); whether it was."""
    frame = sys._current_frames().get(thread_id)
    if frame is None or frame.f_code is not _CONDITION_WAIT:
        return False
    local: dict[str, Any] = frame.f_locals
    condition, waiter = local.get("self"), local.get("waiter")
    if not isinstance(condition, threading.Condition) or waiter is None:
        return False
    if not condition.acquire(timeout=LOCK_SECONDS):
        return False
    try:
        waiters = condition._waiters  # type: ignore[attr-defined]
        if waiter not in waiters or not still():  # notified or timed out meanwhile, or not wanted
            return False
        waiters.remove(waiter)
        waiter.release()
        return True
    finally:
        condition.release()
