"""SIGINT in a step's worker: a process an inline step starts (a ``multiprocessing`` pool's
worker, a ``Process``) while its run holds SIGINT (``wharf.execution.signals``).

The terminal's Ctrl-C reaches the whole process group, the run's process and its workers alike.
Owns :class:`WorkerSigint`: a worker counts its Ctrl-Cs with the signals its run had when the
worker was started; one that stops the run gracefully is ignored (the worker's task finishes),
the one that forces the stop, and any after it, does what SIGINT did before the run (Python's
default raises ``KeyboardInterrupt``). A forked worker inherits the run's handler (a
:class:`WorkerSigint`, which tells a child by its pid) with the fork; a ``spawn`` or
``forkserver`` worker (an exec'd interpreter) is handed the count inside the ``Process`` object
it unpickles before it runs any work (:func:`hand_to_spawned`), as ``multiprocessing`` hands it
its own descriptors.

Invariants: a spawned worker takes over only Python's default handler, and hands the count on to
its own spawned workers; a process started while no run holds SIGINT in the starting process,
once the run's stop was forced, or running another interpreter (``multiprocessing.
set_executable``, which may lack Wharf) is left alone. Until it has unpickled its ``Process``
object (while it starts, importing the main module) a spawned worker has Python's default.
"""

from __future__ import annotations

import multiprocessing.context as mp_context
import os
import signal
from types import FrameType
from typing import Any

from wharf.execution import spawn_handover

DEFAULTS: dict[int, object] = {
    signal.SIGINT: signal.default_int_handler,
    signal.SIGTERM: signal.SIG_DFL,
}
"""Python's own handlers of the signals a run takes over."""
FORCING = 2
"""The count of signals (the run's and the worker's own) at which a worker's Ctrl-C forces."""


class WorkerSigint:
    """SIGINT in a step's worker: ``pid``, the process that started it (never the worker's own
    pid: a worker is told from the run's process by it); ``received``, the run's signals when it
    was started (SIGINT or SIGTERM: each counts); ``previous``, the handlers before the run."""

    def __init__(self, pid: int, received: list[int], previous: dict[int, Any]) -> None:
        self._pid = pid
        self._previous = previous
        self.received = received

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        """A spawned worker's SIGINT handler."""
        self._in_child(frame)

    def _in_child(self, frame: FrameType | None) -> None:
        """A Ctrl-C in a worker, counted with the signals the run had when the worker was
        started (:attr:`received`): one that stops the run gracefully is ignored, so the worker
        goes on with its task (a pool's ``map`` whose workers it killed would never return, and
        the step never end); one that forces the stop does what it did before the run (Python's
        default raises ``KeyboardInterrupt``), as do those after it."""
        self.received.append(signal.SIGINT)
        if len(self.received) >= FORCING:
            self._as_before(signal.SIGINT, frame)

    def _as_before(self, signum: int, frame: FrameType | None) -> None:
        """Give ``signum`` back to its handler before the run and let it do what it did then (a
        forked child's SIGTERM, if it came before the at-fork hook gave it back, too)."""
        previous = self._previous.get(signum, DEFAULTS[signum])
        signal.signal(signum, previous)
        if previous is signal.SIG_DFL:
            os.kill(os.getpid(), signum)  # delivered as this returns: ends the child
        elif callable(previous):
            previous(signum, frame)  # Python's default for SIGINT raises KeyboardInterrupt


def holding() -> WorkerSigint | None:
    """What holds this process's SIGINT for a run (the run's handler, or a worker's), if any."""
    owner = getattr(signal.getsignal(signal.SIGINT), "__self__", None)
    return owner if isinstance(owner, WorkerSigint) else None


class _HandedCount:
    """The run's signals on their way to a ``spawn``/``forkserver`` worker inside its
    ``Process`` object, read as the object is sent (the worker adopts them as it unpickles
    it)."""

    def __init__(self, holder: WorkerSigint) -> None:
        self._holder = holder

    def __reduce__(self) -> tuple[Any, ...]:
        if mp_context.get_spawning_popen() is None:  # pickled for another reason than a start
            return (_nothing, ())
        return (_adopt, (os.getpid(), list(self._holder.received)))


def _nothing() -> None:
    return None


def _adopt(starter: int, received: list[int]) -> None:
    """In a new spawned worker (its main thread, before any work): count its Ctrl-Cs with the
    run's ``received``, unless the run's stop was forced already."""
    taken = signal.getsignal(signal.SIGINT) is not signal.default_int_handler  # not Python's
    if taken or len(received) >= FORCING:
        return
    worker = WorkerSigint(starter, received, {signal.SIGINT: signal.default_int_handler})
    signal.signal(signal.SIGINT, worker._handle)
    hand_to_spawned()


def hand_to_spawned() -> None:
    """From now on, hand each ``spawn``/``forkserver`` worker this process (or a child it
    forks) starts while a run holds its SIGINT the run's signals so far. Idempotent."""
    spawn_handover.hand_over("run sigint", _handed_count)


def _handed_count() -> _HandedCount | None:
    holder = holding()
    return _HandedCount(holder) if holder is not None else None
