"""Ctrl-C and SIGTERM while a run is orchestrated in this process's main thread.

Owns :class:`RunSignals`: the first signal stops the run gracefully, a second forces the stop,
a third raises a plain ``KeyboardInterrupt``; and :func:`sigterm_hook`: what else a SIGTERM may
mean, asked first (e.g. the Kubernetes orchestrator pod's Job deadline), inside a run or not.
Invariants: only the main thread's handlers that are Python's default (or this module's
stand-in for it, :func:`sigterm_hook`'s) are taken over, and given back once the run's steps are
done; a handler never writes to the store itself (a helper thread does: the main thread may
hold a lock the writes need); a forked child (a step's worker) has SIGTERM given back and no
hooks. A step's worker, forked or started by ``spawn`` or ``forkserver``
(``wharf.execution.worker_sigint``), has, if the run holds SIGINT, the Ctrl-C that stops the
run gracefully ignored (the terminal's Ctrl-C reaches the whole process group: a graceful stop
lets the worker's task finish) and the one that forces the run's stop doing what it did before
the run; it counts the run's signals received before it was started. A worker started outside a
run is left alone; so is a program a step runs (``subprocess``, exec'd): a Ctrl-C interrupts it
as at a shell.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from queue import SimpleQueue
from types import FrameType, TracebackType

from wharf.execution.interrupt import wake_main_thread
from wharf.execution.run_stop import ForcedStop, RunStopper
from wharf.execution.worker_sigint import DEFAULTS, WorkerSigint, hand_to_spawned

HANDLED = (signal.SIGINT, signal.SIGTERM)
SigtermHook = Callable[[], bool]
"""Asked first about a SIGTERM, in the main thread's signal handler: it may raise (into the main
thread, wherever it is), return True when it took the signal (nothing else is done), or False
(the signal does what it does without the hook)."""
_SIGTERM_HOOKS: list[SigtermHook] = []  # the main thread's only; the newest last
os.register_at_fork(after_in_child=_SIGTERM_HOOKS.clear)  # a child's SIGTERM: the default
_MARK = "wharf_stopped_run"
"""Attribute of the ``KeyboardInterrupt`` that ends a call after a Ctrl-C stopped its run."""


class _Helper:
    """One daemon thread per process that runs what a handler asks for (``SimpleQueue.put``
    is safe in a signal handler)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: SimpleQueue[Callable[[], None]] = SimpleQueue()
        self._thread: threading.Thread | None = None
        os.register_at_fork(after_in_child=self._forget)

    def ensure_started(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._serve, name="wharf-signals", daemon=True
                )
                self._thread.start()

    def post(self, job: Callable[[], None]) -> None:
        self._queue.put(job)

    def _serve(self) -> None:
        while True:
            job = self._queue.get()
            try:
                job()
            except Exception as exc:
                sys.stderr.write(f"wharf: could not stop the run: {exc}\n")

    def _forget(self) -> None:
        self._lock = threading.Lock()
        self._queue = SimpleQueue()
        self._thread = None


_HELPER = _Helper()


@contextlib.contextmanager
def sigterm_hook(hook: SigtermHook) -> Iterator[None]:
    """While in the context, ask ``hook`` first about each SIGTERM of the main thread
    (:data:`SigtermHook`): a run's :class:`RunSignals` does, and outside a run a handler
    installed here over Python's default does, which ends the process as by default when no
    hook takes the signal. Nothing is installed over an application's own handler (its hook is
    then asked only inside a run, if ever); a no-op outside the main thread. The newest hook is
    asked first."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    installed = signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    if installed:
        signal.signal(signal.SIGTERM, _hooked_default)
    _SIGTERM_HOOKS.append(hook)
    try:
        yield
    finally:
        _SIGTERM_HOOKS.remove(hook)
        last = installed or not _SIGTERM_HOOKS  # the stand-in is not needed any more
        if last and signal.getsignal(signal.SIGTERM) is _hooked_default:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _hooks_take_sigterm() -> bool:
    """Ask the hooks, newest first, about a SIGTERM (one may raise); whether one took it."""
    return any(hook() for hook in reversed(list(_SIGTERM_HOOKS)))


def _hooked_default(signum: int, frame: FrameType | None) -> None:
    """SIGTERM outside a run while hooks are registered: theirs, else as by default."""
    if _hooks_take_sigterm():
        return
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


def _takes_over(signum: int, handler: object) -> bool:
    """Whether a run takes ``signum`` over from ``handler``: Python's default, the stand-in
    for it while SIGTERM hooks are registered, or (in a step's worker: a pipeline it runs) the
    handler of the run of the process that started it."""
    if handler is DEFAULTS[signum]:
        return True
    if signum == signal.SIGTERM and handler is _hooked_default:
        return True
    run = getattr(handler, "__self__", None)
    return isinstance(run, WorkerSigint) and run._pid != os.getpid()


class RunSignals(WorkerSigint):
    """SIGINT and SIGTERM for one run, between :meth:`install` and :meth:`restore`.

    A SIGTERM goes to the :func:`sigterm_hook` hooks first; one they take counts for nothing
    here.

    - the first SIGINT or SIGTERM prints one line to stderr and stops the run gracefully
      (:meth:`RunStopper.stop`: no new steps, running steps interrupted at their next safe
      point), its store writes done by a helper thread;
    - a second one forces: the handler raises :class:`ForcedStop` in the main thread, which
      stops waiting for the steps; the orchestrator then calls :meth:`RunStopper.force`;
    - a third one raises a plain ``KeyboardInterrupt`` (a way out if the forced stop hangs).

    Once the run is recorded, :meth:`raise_if_signalled` ends the call the way the signal
    asked: ``KeyboardInterrupt`` for SIGINT (uncaught, the interpreter prints no traceback for
    it and exits as killed by SIGINT, status 130 in a shell; caught, e.g. in a notebook, it is
    an ordinary ``KeyboardInterrupt``), ``SystemExit(143)`` for SIGTERM.
    """

    def __init__(self, stopper: RunStopper, run_name: str) -> None:
        super().__init__(os.getpid(), [], {})  # a forked child tells itself by the pid
        self._stopper = stopper
        self._run_name = run_name
        self._give_back_wake: Callable[[], None] | None = None
        self.forced = False
        """A second signal came while the steps ran: the orchestrator must force the stop."""

    def install(self) -> RunSignals:
        """Take over SIGINT and SIGTERM, only those whose handler is Python's default (or
        :func:`sigterm_hook`'s stand-in for it; a handler the application set, or an ignored
        signal, is left alone); a no-op outside the main thread."""
        if threading.current_thread() is not threading.main_thread():
            return self
        for handled in HANDLED:
            current = signal.getsignal(handled)
            if _takes_over(handled, current):
                self._previous[handled] = current
        if self._previous:
            _HELPER.ensure_started()
            for signum in self._previous:
                signal.signal(signum, self._handle)
        if signal.SIGINT in self._previous:
            hand_to_spawned()  # spawn and forkserver workers: see worker_sigint
        # A step of this run in the main thread (a dynamic pipeline's) that blocks in a system
        # call is woken by its interrupt, not only once the call returns.
        self._give_back_wake = wake_main_thread()
        return self

    def restore(self) -> None:
        """Give the signals back to the handlers they had before :meth:`install`."""
        for signum, previous in self._previous.items():
            stale = previous is _hooked_default and not _SIGTERM_HOOKS  # their context ended
            signal.signal(signum, signal.SIG_DFL if stale else previous)
        self._previous.clear()
        if self._give_back_wake is not None:
            self._give_back_wake()
            self._give_back_wake = None

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if os.getpid() != self._pid:  # a forked child (its SIGTERM: not given back yet)
            if signum == signal.SIGINT:
                self._in_child(frame)
            else:
                self._as_before(signum, frame)
            return
        if signum == signal.SIGTERM and _hooks_take_sigterm():
            return
        self.received.append(signum)
        count = len(self.received)
        name = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
        if count == 1:
            _say(
                f"Stopping run '{self._run_name}' ({name}): no new steps start, running steps "
                "are interrupted. Press Ctrl-C again to force."
            )
            _HELPER.post(self._stopper.stop)
        elif count == 2:
            _say(f"Forcing the stop of run '{self._run_name}' ({name}): isolated steps are killed.")
            self.forced = True
            raise ForcedStop()
        else:
            raise KeyboardInterrupt()

    def raise_if_signalled(self, status: str) -> None:
        """End the call as the first signal asked, once the run is recorded (``status``; the
        progress output has said how it ended)."""
        if not self.received:
            return
        if self.received[0] == signal.SIGTERM:
            raise SystemExit(128 + signal.SIGTERM)
        interrupt = KeyboardInterrupt(f"Run '{self._run_name}' {status} after Ctrl-C.")
        setattr(interrupt, _MARK, self._run_name)
        interrupt.__suppress_context__ = True
        _quiet_at_top_level()
        raise interrupt


def _give_back_in_child() -> None:
    """A forked child (an inline step's ``multiprocessing`` worker) does not orchestrate the
    run: SIGTERM, if the run took it over, does there what it did before the run (a worker's
    SIGTERM, from ``Pool.terminate``, ends it). SIGINT stays in the run's hands, which tell a
    child's Ctrl-C that forces the stop from the one before (:meth:`WorkerSigint._in_child`)."""
    run = getattr(signal.getsignal(signal.SIGTERM), "__self__", None)
    if isinstance(run, RunSignals):
        previous = run._previous.get(signal.SIGTERM, signal.SIG_DFL)
        with contextlib.suppress(ValueError):  # not the main thread: cannot happen after fork
            signal.signal(signal.SIGTERM, previous)


os.register_at_fork(after_in_child=_give_back_in_child)


def _say(line: str) -> None:
    """One line on stderr, from a signal handler: straight to the file descriptor (the main
    thread may be inside a write to ``sys.stderr``, which must not be re-entered)."""
    with contextlib.suppress(OSError):
        os.write(2, (line + "\n").encode(errors="replace"))


def _quiet_at_top_level() -> None:
    """Let the interpreter print no traceback for a marked ``KeyboardInterrupt`` that nobody
    caught (the line was printed already). Only the interpreter's own hook is replaced; every
    other exception still goes to it."""
    if sys.excepthook is not sys.__excepthook__:
        return
    original = sys.excepthook

    def hook(exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
        if isinstance(exc, KeyboardInterrupt) and hasattr(exc, _MARK):
            return
        original(exc_type, exc, tb)

    sys.excepthook = hook
