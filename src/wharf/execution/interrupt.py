"""Interrupting a step function that runs in another thread of this process.

Owns :class:`InterruptibleRegion` (wraps exactly the user function call) and
:class:`StepInterrupted` (a ``BaseException``, so a user's ``except Exception`` does not
swallow it, while ``finally`` blocks and context managers still run). Invariant: an interrupt
is delivered only inside the region, so Wharf's own bookkeeping (publishing outputs, final
status) is never cut in half.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Protocol


class StepInterrupted(BaseException):
    """Raised inside a step function that was asked to stop."""


class Interruptible(Protocol):
    """What a run's stop interrupts: a step's region, or a step's wait for its resources."""

    def interrupt(self, reason: str) -> bool: ...


def _set_async_exc(thread_id: int, exc: type[BaseException] | None) -> None:
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread_id), ctypes.py_object(exc) if exc else ctypes.c_void_p(0)
    )


class InterruptibleRegion:
    """Where a step's user code may be interrupted (:meth:`interrupt`).

    ``interrupt()`` raises :class:`StepInterrupted` asynchronously in the worker thread while
    the thread is inside the region; leaving the region clears an interrupt that was sent but
    not yet delivered. An interrupt that comes before the thread entered the region is kept:
    entering raises it, so the user function never starts (a step of a fail-fast run whose
    thread was slower to start than a failing sibling); one that comes after the region was
    left (and before a retry enters it again) does nothing."""

    def __init__(self, wake: Callable[[int], None] | None = None) -> None:
        """``wake``: called with the id of the thread an interrupt was sent to, to make a
        system call it blocks in return (the interrupt is raised only once Python code runs
        in the thread again; a step's own process wakes its main thread with a signal)."""
        self._lock = threading.Lock()
        self._thread_id: int | None = None
        self._sent = False
        self._left = False
        self._wake = wake
        self.reason: str | None = None

    def __enter__(self) -> InterruptibleRegion:
        with self._lock:
            if self._sent:  # interrupted before it started: the user code never runs
                raise StepInterrupted(self.reason)
            self._thread_id = threading.get_ident()
            self._left = False  # a retry enters the step's region again
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        with self._lock:
            if self._sent and self._thread_id is not None:
                _set_async_exc(self._thread_id, None)
            self._thread_id = None
            self._left = True

    @property
    def interrupted(self) -> bool:
        return self._sent

    def interrupt(self, reason: str) -> bool:
        """Ask the step to stop; True if its user code got the signal or will never start."""
        with self._lock:
            if self._left or self._sent:
                return False
            self._sent = True
            self.reason = reason
            if self._thread_id is not None:
                _set_async_exc(self._thread_id, StepInterrupted)
                if self._wake is not None:
                    self._wake(self._thread_id)
            return True
