"""Ctrl-C while the ``kubernetes`` orchestrator creates a run's orchestrator Job.

Owns :class:`CtrlCDeferred`: during the few API calls that create the run's Secret and Job
(``orchestrator_submit``), a first Ctrl-C waits for the cluster's answer instead of cutting the
call, so that the submitter knows whether the Job exists; a second one stops waiting. And
:func:`ctrl_c_ignored`, while the submitter says how the run goes on.

Invariants: only Python's default SIGINT handler, in the main thread, is ever replaced (a
handler of the caller's own, or another thread, sees no change), and it is given back on exit.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from types import FrameType, TracebackType
from typing import Any


class CtrlCDeferred:
    """A context in which a first Ctrl-C is recorded (:attr:`pressed`) and said on stderr
    rather than raised, and a second raises ``KeyboardInterrupt`` at once (a way out of a call
    that hangs). ``waiting_for``: what the call in progress waits for, as the line says it."""

    def __init__(self, waiting_for: str) -> None:
        self.pressed = False
        self._waiting_for = waiting_for
        self._previous: Any = None
        self._installed = False

    def __enter__(self) -> CtrlCDeferred:
        main = threading.current_thread() is threading.main_thread()
        if main and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            self._previous = signal.signal(signal.SIGINT, self._handle)
            self._installed = True
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._installed:
            signal.signal(signal.SIGINT, self._previous)
            self._installed = False

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.pressed:
            raise KeyboardInterrupt
        self.pressed = True
        _say(f"Ctrl-C: waiting for {self._waiting_for} (Ctrl-C again to stop waiting).")


@contextlib.contextmanager
def ctrl_c_ignored() -> Iterator[None]:
    """SIGINT ignored (in the main thread; elsewhere nothing changes), then given back to the
    handler it had."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        if previous is not None:  # None: a handler set outside Python, which stays ignored
            signal.signal(signal.SIGINT, previous)


def _say(line: str) -> None:
    """One line on stderr, from a signal handler: straight to the file descriptor (the main
    thread may be inside a write to ``sys.stderr``, which must not be re-entered)."""
    with contextlib.suppress(OSError):
        os.write(2, (line + "\n").encode(errors="replace"))
