"""A step process notices when the process that started it (its orchestrator) is gone.

Owns :class:`ParentWatch`. Invariant: an isolated step never outlives its run's orchestrator
(else a killed pipeline process would leave its step processes, and with them the
multiprocessing fork server and resource tracker, running for ever): ``on_gone`` is called once,
and a process still alive ``grace`` seconds later exits at once, with the rest of the process
group it leads (:func:`exit_with_group`).
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import threading
from collections.abc import Callable
from multiprocessing.connection import wait

logger = logging.getLogger(__name__)

POLL_SECONDS = 0.5
"""How often the parent pid is compared, where no sentinel pipe exists."""
DEFAULT_GRACE_SECONDS = 30.0
"""How long a step may take to end after its orchestrator is gone."""
EXIT_CODE = 4


class ParentWatch:
    """Watches for the end of this process's orchestrator, without polling where possible.

    A step forked by the fork server holds the read end of a pipe whose write end only the
    orchestrator holds (``multiprocessing.parent_process().sentinel``): it becomes readable
    (EOF) the moment the orchestrator dies. A step started as a new interpreter is the
    orchestrator's child: its parent pid changes when the orchestrator dies (polled). Then
    ``on_gone`` is called (the step interrupts its user code and records itself stopped); if
    the process is still alive ``grace`` seconds later (user code stuck in native code, or
    ignoring the interrupt), it exits the process at once."""

    def __init__(
        self,
        on_gone: Callable[[int], object],
        grace: float = DEFAULT_GRACE_SECONDS,
        *,
        exit_process: Callable[[int], None] | None = None,
    ) -> None:
        """``on_gone(pid)`` is called once, from the watch's thread, with the pid of the
        orchestrator that is gone."""
        self._on_gone = on_gone
        self._grace = grace
        self._exit = exit_process or exit_with_group
        self._done = threading.Event()
        parent = multiprocessing.parent_process()
        self._sentinel: int | None = parent.sentinel if parent is not None else None
        self._pid = (parent.pid if parent is not None else None) or os.getppid()
        self._thread = threading.Thread(target=self._run, name="wharf-parent-watch", daemon=True)

    @property
    def parent_pid(self) -> int:
        return self._pid

    def start(self) -> ParentWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        """The step ended by itself: nothing more to watch (the thread is a daemon)."""
        self._done.set()

    def _parent_gone(self) -> bool:
        """Block until the parent is gone (True) or :meth:`stop` was called (False)."""
        if self._sentinel is not None:
            while not self._done.is_set():
                if wait([self._sentinel], POLL_SECONDS):
                    return True
            return False
        while not self._done.wait(POLL_SECONDS):
            if os.getppid() != self._pid:
                return True
        return False

    def _run(self) -> None:
        if not self._parent_gone():
            return
        logger.warning("The orchestrating process (pid %d) is gone; stopping this step.", self._pid)
        try:
            self._on_gone(self._pid)
        except Exception:
            logger.exception("Could not stop the step after its orchestrator ended.")
        if not self._done.wait(self._grace):
            logger.error("The step did not end within %.0f s; exiting.", self._grace)
            self._exit(EXIT_CODE)


def exit_with_group(code: int) -> None:
    """Exit at once; a process that leads a process group (a step's process does: its pool's
    workers are in it) is killed with the whole group instead, since an immediate exit skips
    the handlers that would end them and they would outlive the step."""
    if hasattr(os, "killpg") and os.getpgid(0) == os.getpid():
        try:
            os.killpg(os.getpid(), signal.SIGKILL)
        except OSError as exc:
            logger.warning("Could not end the step's other processes: %s", exc)
    os._exit(code)
