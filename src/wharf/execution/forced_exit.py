"""How a process whose run's stop was forced ends its ``multiprocessing`` pools at exit.

Owns :func:`arm` (called by a forced stop) and the ``atexit`` hook it arms. An inline step given
up on by a forced stop may leave pools behind whose workers the terminal's Ctrl-C killed while
they held the pool's queue lock: ``multiprocessing``'s own exit cleanup (its ``atexit``
``_exit_function``: each pool's terminate, which takes that lock, then a join of every worker)
would then wait forever, and further Ctrl-Cs with it. Once armed, this hook (registered after
``multiprocessing``'s, so run before it) ends every process pool still open in this process
without its queue locks: no worker is started again, every worker of the process (a pool's, or a
daemonic ``Process``, which ``multiprocessing`` would terminate anyway) is killed (SIGKILL) and
reaped, and the pools' own terminates are cancelled; a non-daemonic ``Process`` the step started
is terminated (SIGTERM, then SIGKILL), as the forced stop means. Invariants: nothing is done
unless a forced stop armed it in this very process (a forked child is never armed); every wait
is bounded.
"""

from __future__ import annotations

import atexit
import contextlib
import multiprocessing
import multiprocessing.pool as mp_pool
import multiprocessing.util as mp_util
import os
import signal
import threading
import time
from typing import Any

KILL_WAIT_SECONDS = 5.0
"""The longest the hook waits for the killed workers (and a pool's worker handler) to end."""

_ARMED = False


def arm() -> None:
    """A forced stop happened in this process: end its pools at exit without waiting on them."""
    global _ARMED
    _ARMED = True


def _disarm() -> None:
    global _ARMED
    _ARMED = False


def _pool_finalizers() -> list[Any]:
    """The pending terminates (``multiprocessing.util.Finalize``) of this process's open pools
    of processes (a ``ThreadPool``'s takes no lock its threads could die holding)."""
    terminate = mp_pool.Pool._terminate_pool.__func__  # type: ignore[attr-defined]
    found = []
    for finalizer in list(mp_util._finalizer_registry.values()):  # type: ignore[attr-defined]
        callback = getattr(finalizer, "_callback", None)
        args: tuple[Any, ...] = getattr(finalizer, "_args", ())
        if getattr(callback, "__func__", None) is not terminate or len(args) < 8:
            continue
        workers = args[3]
        if workers and not hasattr(workers[0], "terminate"):
            continue
        found.append(finalizer)
    return found


def _stop_pool(finalizer: Any) -> threading.Thread:
    """Stop a pool's handler threads from starting or feeding workers, and cancel its own
    terminate (which would take the queue lock); the pool's worker handler, to wait for."""
    worker_handler, task_handler, result_handler = finalizer._args[5:8]
    for handler in (worker_handler, task_handler, result_handler):
        handler._state = mp_pool.TERMINATE
    finalizer.cancel()
    return worker_handler  # type: ignore[no-any-return]


def _signal_children(daemonic: bool, signum: int, deadline: float) -> None:
    """Send ``signum`` to this process's live children of one kind (daemonic or not) and reap
    them, until none is left or ``deadline``; sent again to those still alive or started
    meanwhile (a pool's worker handler may start one more as it notices the others died)."""
    while time.monotonic() < deadline:
        children = [p for p in multiprocessing.active_children() if p.daemon is daemonic]
        if not children:
            return
        for child in children:
            if child.pid is not None:
                with contextlib.suppress(OSError):
                    os.kill(child.pid, signum)
        for child in children:
            child.join(max(0.0, deadline - time.monotonic()))


def _end_pools() -> None:
    """The ``atexit`` hook: once armed, end the open pools and the workers without their locks,
    then the step's other child processes."""
    if not _ARMED:
        return
    deadline = time.monotonic() + KILL_WAIT_SECONDS
    handlers = [_stop_pool(finalizer) for finalizer in _pool_finalizers()]
    _signal_children(True, signal.SIGKILL, deadline)
    for handler in handlers:  # woken by its workers' deaths, it ends without starting others
        if handler.is_alive() and handler is not threading.current_thread():
            handler.join(max(0.0, deadline - time.monotonic()))
    _signal_children(True, signal.SIGKILL, deadline)
    # The step's own non-daemonic children: SIGTERM (their default after a fork), SIGKILL for
    # those left. The forcing Ctrl-C reaches them too, but two Ctrl-Cs close together may reach
    # a child's handler as one, which only stops the run gracefully there.
    for signum in (signal.SIGTERM, signal.SIGKILL):
        _signal_children(False, signum, time.monotonic() + KILL_WAIT_SECONDS)


atexit.register(_end_pools)  # after multiprocessing.util's (imported above): runs before it
os.register_at_fork(after_in_child=_disarm)
