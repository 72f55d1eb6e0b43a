"""Interrupting a step function that runs in another thread of this process.

Owns :class:`InterruptibleRegion` (wraps exactly the user function call) and
:class:`StepInterrupted` (a ``BaseException``, so a user's ``except Exception`` does not
swallow it, while ``finally`` blocks and context managers still run), and
:func:`wake_main_thread` (an interrupt of the main thread also makes a system call it blocks
in return, with :data:`WAKE_SIGNAL`; any other thread blocked in a system call or a lock
sees its interrupt only once it runs Python code again: such waits of Wharf's are bounded,
:data:`UNWOKEN_WAIT_SECONDS`). Invariant: an interrupt is delivered only inside the
region, so Wharf's own bookkeeping (publishing outputs, final status) is never cut in half.
"""

from __future__ import annotations

import ctypes
import signal
import threading
from collections.abc import Callable
from types import FrameType, TracebackType
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


WAKE_SIGNAL = signal.SIGUSR1
"""The signal that wakes the main thread from a blocking system call (a read, a sleep, a wait)
when a step running there is interrupted: the interrupt is raised once the thread runs Python
code again, which a blocked call would otherwise delay until it returns on its own."""


def _ignore_wake(signum: int, frame: FrameType | None) -> None:
    """Runs in the main thread: the interrupt sent to it is raised as this returns."""


def wake_main_thread() -> Callable[[], None] | None:
    """Let interrupts of a step in the main thread wake it with :data:`WAKE_SIGNAL` (a step's
    own process, a run orchestrated in the main thread); call only from the main thread. The
    signal is taken only if its handler is the default one. Returns what gives it back, or
    None if it was not taken."""
    if threading.current_thread() is not threading.main_thread():
        return None
    if signal.getsignal(WAKE_SIGNAL) is not signal.SIG_DFL:
        return None
    signal.signal(WAKE_SIGNAL, _ignore_wake)

    def give_back() -> None:
        if signal.getsignal(WAKE_SIGNAL) is _ignore_wake:
            signal.signal(WAKE_SIGNAL, signal.SIG_DFL)

    return give_back


UNWOKEN_WAIT_SECONDS = 0.25
"""The longest a thread that no signal wakes (any but the main thread) should block in one
wait where it may be interrupted (e.g. a run's orchestrating thread waiting for its steps):
an interrupt sent to it is raised only once it runs Python code again, so such a wait is a
loop of waits this long (``Condition.wait(UNWOKEN_WAIT_SECONDS)``)."""

WAKE_REPEAT_SECONDS = 0.5
"""How often a wake is repeated while the interrupted thread stays in its region: a signal that
lands just before the thread enters a blocking call is handled only once that call returns."""


def _wakes(thread_id: int) -> bool:
    """Whether interrupts of ``thread_id`` wake it: the main thread, with the wake on (never
    otherwise: the signal's default action would end the process)."""
    return (
        thread_id == threading.main_thread().ident and signal.getsignal(WAKE_SIGNAL) is _ignore_wake
    )


def _keep_waking(thread_id: int, left: threading.Event) -> None:
    """Wake ``thread_id`` now and again until it leaves its region (``left``)."""
    while _wakes(thread_id):
        signal.pthread_kill(thread_id, WAKE_SIGNAL)
        if left.wait(WAKE_REPEAT_SECONDS):
            return


class InterruptibleRegion:
    """Where a step's user code may be interrupted (:meth:`interrupt`).

    ``interrupt()`` raises :class:`StepInterrupted` asynchronously in the worker thread while
    the thread is inside the region; leaving the region clears an interrupt that was sent but
    not yet delivered. An interrupt that comes before the thread entered the region is kept:
    entering raises it, so the user function never starts (a step of a fail-fast run whose
    thread was slower to start than a failing sibling); one that comes after the region was
    left (and before a retry enters it again) does nothing.

    ``raises``: what an interrupt raises in the thread (the run loop's wait for a run's steps
    is such a region too, interrupted with ``ForcedStop`` by a forced stop asked elsewhere)."""

    def __init__(self, raises: type[BaseException] = StepInterrupted) -> None:
        self._raises = raises
        self._lock = threading.Lock()
        self._thread_id: int | None = None
        self._sent = False
        self._left = False
        self._left_event = threading.Event()
        """Set when the thread leaves the region (ends the repeated wakes of an interrupt)."""
        self.reason: str | None = None

    def __enter__(self) -> InterruptibleRegion:
        with self._lock:
            if self._sent:  # interrupted before it started: the user code never runs
                raise self._raises(self.reason)
            self._thread_id = threading.get_ident()
            self._left = False  # a retry enters the step's region again
            self._left_event = threading.Event()
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
            self._left_event.set()

    @property
    def interrupted(self) -> bool:
        return self._sent

    def wait_left(self, timeout: float) -> bool:
        """Whether the thread left the region (or never entered it: interrupted first) within
        ``timeout`` seconds."""
        with self._lock:
            left = self._left_event
            if self._left or (self._sent and self._thread_id is None):
                return True
        return left.wait(timeout)

    def interrupt(self, reason: str) -> bool:
        """Ask the step to stop; True if its user code got the signal or will never start."""
        with self._lock:
            if self._left or self._sent:
                return False
            self._sent = True
            self.reason = reason
            if self._thread_id is not None:
                _set_async_exc(self._thread_id, self._raises)
                if _wakes(self._thread_id):
                    waker = threading.Thread(
                        target=_keep_waking,
                        args=(self._thread_id, self._left_event),
                        name="wharf-wake",
                        daemon=True,
                    )
                    waker.start()
            return True
