"""Run a test's body in a forked child of the test process, while a parent thread holds a lock.

The child runs only ``body`` and leaves with ``os._exit``, so none of pytest's teardown runs
twice. A child that hangs (a lock held at the fork by a parent thread that did not come along)
is killed after ``timeout`` seconds, which only a broken test reaches.
"""

from __future__ import annotations

import os
import signal
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager

HUNG = -1
SAFETY_TIMEOUT = 30.0


@contextmanager
def held_by_another_thread(hold: Callable[[], AbstractContextManager[object]]) -> Iterator[None]:
    """While the block runs, another thread of this process is inside ``hold()``."""
    held, release = threading.Event(), threading.Event()

    def inside() -> None:
        with hold():
            held.set()
            release.wait(SAFETY_TIMEOUT)

    holder = threading.Thread(target=inside)
    holder.start()
    try:
        assert held.wait(SAFETY_TIMEOUT)
        yield
    finally:
        release.set()
        holder.join()


def exit_code_in_fork(body: Callable[[], None], timeout: float = SAFETY_TIMEOUT) -> int:
    """0 if ``body`` returned in the child, 1 if it raised, :data:`HUNG` if it never ended."""
    with warnings.catch_warnings():
        # Python 3.12 warns that forking a process with threads may deadlock the child: that
        # is the very hazard these tests check Wharf guards against.
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:
        code = 0
        try:
            body()
        except BaseException:
            traceback.print_exc()
            code = 1
        os._exit(code)
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return HUNG
        time.sleep(0.005)
