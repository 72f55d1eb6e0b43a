"""Interrupting a step function that runs in another thread of this process.

An :class:`InterruptibleRegion` wraps exactly the user function call. ``interrupt()`` raises
:class:`StepInterrupted` asynchronously in the worker thread, but only while the thread is
inside the region; leaving the region clears an interrupt that was sent but not yet delivered,
so Wharf's own bookkeeping (publishing outputs, final status) is never cut in half.
``StepInterrupted`` derives from ``BaseException`` so that a user's ``except Exception`` does
not swallow it, while ``finally`` blocks and context managers still run.
"""

from __future__ import annotations

import ctypes
import threading
from types import TracebackType


class StepInterrupted(BaseException):
    """Raised inside a step function that was asked to stop."""


def _set_async_exc(thread_id: int, exc: type[BaseException] | None) -> None:
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread_id), ctypes.py_object(exc) if exc else ctypes.c_void_p(0)
    )


class InterruptibleRegion:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._thread_id: int | None = None
        self._sent = False
        self.reason: str | None = None

    def __enter__(self) -> InterruptibleRegion:
        with self._lock:
            self._thread_id = threading.get_ident()
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

    @property
    def interrupted(self) -> bool:
        return self._sent

    def interrupt(self, reason: str) -> bool:
        """Ask the step to stop; True if it was running its user code and got the signal."""
        with self._lock:
            if self._thread_id is None or self._sent:
                return False
            self._sent = True
            self.reason = reason
            _set_async_exc(self._thread_id, StepInterrupted)
            return True
