"""Capturing each step's stdout/stderr into the artifact store.

Inline steps share the process's ``sys.stdout``/``sys.stderr``; :func:`install_routing` wraps
both once with a stream that still writes to the console and also copies each write to the
capture buffer of the step running in the current thread (a ``ContextVar``). Rule for threads:
a thread started while a step runs, by the step's thread or by a thread that inherited the
step's log, inherits that log (``threading.Thread``s, a ``ThreadPoolExecutor``'s workers
among them); contextvars do not reach a new thread, so ``install_routing`` also wraps
``Thread.start`` to hand the starting thread's capture to the new one. What such a thread
prints after its step ended is in no step's log (only on the console); a thread started before
the step (a pool's worker made earlier) keeps what it inherited then. The processes such a
thread starts (``multiprocessing`` workers: fork, spawn, forkserver) print into the step's log
too, through a pipe (``wharf.execution.worker_logs``), until the step ends. Isolated steps
write to a file (named to them in ``STEP_LOG_ENV``) that the parent copies into the artifact
store when the process ends; a step whose parent is gone stores it itself (:class:`OwnLog`).
Both kinds of log are stored again through a short outage of the store as the run waits one out
(:func:`store_step_log`; an orphaned step's within its parent watch's grace); a log that cannot
be stored is a warning, never the step's failure.
Invariant: a step's log is written to its ``logs_uri`` exactly once, after the step ended (an
inline step a forced stop ended while blocked: by the forced stop, :class:`StepLog`).
"""

from __future__ import annotations

import functools
import io
import logging
import os
import posixpath
import shutil
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from contextvars import ContextVar
from typing import IO, Any, Protocol

from wharf.artifacts.store import ArtifactStore
from wharf.execution import worker_logs
from wharf.execution.interrupt import StepInterrupted
from wharf.execution.parent_watch import exit_with_group
from wharf.execution.routed_streams import RoutingStream
from wharf.execution.step_region import StepRegion
from wharf.execution.worker_logs import WorkerPipe, WorkerWriter

logger = logging.getLogger(__name__)

STEP_LOG_ENV = "WHARF_STEP_LOG_FILE"
"""The temporary file an isolated step's process writes its output to (set by its parent)."""

_INSTALL_LOCK = threading.Lock()


MEMORY_CHARS = 1 << 20
"""How much of a step's captured output is kept in memory; the rest goes to a temporary file."""


class _StepSink:
    """One step's capture, open while the step runs; written by its thread, by the threads
    started from it and (through :attr:`_workers`) by the processes they start. Past
    :data:`MEMORY_CHARS` it spills to a temporary file (UTF-8), so a step that prints a lot
    costs the orchestrating process no memory for it."""

    def __init__(self) -> None:
        self.buffer = io.StringIO()
        self._spill: IO[bytes] | None = None
        self._lock = threading.Lock()
        self._open = True
        self._workers: WorkerPipe | None = None
        self._takes_workers = True
        self.empty = True
        self.pid = os.getpid()
        """The process it captures for (a forked child holds a copy, not its own capture)."""

    def write(self, text: str) -> None:
        with self._lock:
            if not self._open or not text:
                return
            self.empty = False
            if self._spill is not None:
                self._spill.write(_encoded(text))
                return
            self.buffer.write(text)
            if self.buffer.tell() > MEMORY_CHARS:
                # closed by save(), or when the sink is collected
                self._spill = tempfile.TemporaryFile(prefix="wharf-step-log-")  # noqa: SIM115
                self._spill.write(_encoded(self.buffer.getvalue()))
                self.buffer = io.StringIO()

    def worker_fd(self) -> int | None:
        """The write end of the pipe a process the step starts writes to (made the first
        time); None once the step ended."""
        with self._lock:
            if not self._takes_workers:
                return None
            if self._workers is None:
                self._workers = WorkerPipe(self.write)
            return self._workers.fd

    def close(self) -> None:
        """Take what the step's workers wrote until now, then take nothing more."""
        with self._lock:
            self._takes_workers = False
            workers = self._workers
        if workers is not None:
            workers.finish()  # through write(), so before closing
        with self._lock:
            self._open = False

    def getvalue(self) -> str:
        """All that was captured."""
        with self._lock:
            if self._spill is None:
                return self.buffer.getvalue()
            self._spill.flush()
            self._spill.seek(0)
            text = self._spill.read().decode(errors="replace")
            self._spill.seek(0, os.SEEK_END)
            return text

    def save(self, store: ArtifactStore, uri: str) -> None:
        """Store what was captured at ``uri`` (from the temporary file a chunk at a time); may
        be called again (after a failed try) until :meth:`free`."""
        with self._lock:
            spill = self._spill
        if spill is None:
            write_log(store, uri, self.buffer.getvalue())
            return
        spill.seek(0)
        store.makedirs(posixpath.dirname(uri))
        with store.open(uri, "wb") as f:
            shutil.copyfileobj(spill, f, COPY_CHUNK_BYTES)

    def free(self) -> None:
        """Free the temporary file (once stored or given up)."""
        with self._lock:
            spill, self._spill = self._spill, None
        if spill is not None:
            spill.close()


def _encoded(text: str) -> bytes:
    return text.encode("utf-8", "backslashreplace")


_SINK: ContextVar[_StepSink | None] = ContextVar("wharf_log_sink", default=None)
_INHERITED_SINK = "_wharf_step_log_sink"
"""The attribute of a ``threading.Thread`` holding the capture it inherited when started."""


def _step_sink() -> _StepSink | None:
    """The capture of the step this thread runs, or else the one the thread inherited."""
    sink: _StepSink | None = _SINK.get()
    if sink is None:
        sink = getattr(threading.current_thread(), _INHERITED_SINK, None)
    if sink is not None and sink.pid != os.getpid():  # copied into a forked child
        return None
    return sink


def _current_sink() -> _StepSink | WorkerWriter | None:
    """Where what this thread prints goes besides the console: its step's capture, or in a
    worker of an inline step the pipe to that step's."""
    sink = _step_sink()
    return sink if sink is not None else worker_logs.process_sink()


def _adopt_handed(handle: Any) -> None:
    """In a ``spawn``/``forkserver`` worker of an inline step: print into its step's pipe
    (``handle``, a ``multiprocessing.reduction.DupFd``) as well as to the console."""
    worker_logs.adopt(handle.detach())
    install_routing()


def _inheriting_capture(start: Callable[[threading.Thread], None]) -> Callable[..., None]:
    """``Thread.start`` that first hands the starting thread's capture (if any) to the thread."""

    @functools.wraps(start)
    def start_inheriting_capture(thread: threading.Thread) -> None:
        sink = _step_sink()
        if sink is not None:
            setattr(thread, _INHERITED_SINK, sink)
        start(thread)

    return start_inheriting_capture


_threads_inherit = False


def _flush_worker_line() -> None:
    """In a worker of an inline step: send the end of its unfinished line to the step's log."""
    worker = worker_logs.process_sink()
    if worker is not None:
        worker.flush()


def install_routing() -> None:
    """Route this process's stdout/stderr through per-step capture, and let new threads and
    processes inherit their starter's capture (idempotent)."""
    global _threads_inherit
    worker_logs.install(_current_sink, _adopt_handed)
    with _INSTALL_LOCK:
        if not _threads_inherit:
            setattr(threading.Thread, "start", _inheriting_capture(threading.Thread.start))  # noqa: B010
            _threads_inherit = True
        if not isinstance(sys.stdout, RoutingStream):
            sys.stdout = RoutingStream(sys.stdout, _current_sink, _flush_worker_line)
        if not isinstance(sys.stderr, RoutingStream):
            sys.stderr = RoutingStream(sys.stderr, _current_sink, _flush_worker_line)


def write_to_step_log(text: str) -> bool:
    """Write ``text`` to the log of the step this thread runs only, not to the console (what
    the console shows elsewhere, e.g. a traceback its caller prints); False if no step runs."""
    sink = _current_sink()
    if sink is None:
        return False
    sink.write(text)
    return True


@contextmanager
def capture_output() -> Iterator[_StepSink]:
    """Collect what this thread, and the threads it starts, print while the block runs (its
    ``getvalue()``)."""
    install_routing()
    sink = _StepSink()
    token = _SINK.set(sink)
    try:
        yield sink
    finally:
        sink.close()
        _SINK.reset(token)


class ThroughOutage(Protocol):
    """Calls ``call`` again while the artifact store cannot be reached (``what`` names it in
    the log), running ``before_again`` before each repeat
    (``wharf.execution.artifact_outages.through_artifact_outage`` bound to a run)."""

    def __call__(
        self,
        call: Callable[[], None],
        what: str,
        *,
        before_again: Callable[[], object] | None = None,
    ) -> None: ...


def once(
    call: Callable[[], None], what: str, *, before_again: Callable[[], object] | None = None
) -> None:
    """A :class:`ThroughOutage` that tries once (a log stored outside any run)."""
    call()


def store_step_log(
    store: ArtifactStore,
    uri: str,
    save: Callable[[], None],
    name: str,
    through_outage: ThroughOutage = once,
) -> None:
    """Store step ``name``'s log with ``save()`` (a whole write at ``uri``), again through an
    outage of the store as ``through_outage`` waits one out (a failed try's leftovers removed
    first; the step's stop ends that wait); a failure to store is then logged, never raised:
    the step's end is recorded, only its log is lost."""
    try:
        through_outage(
            save, f"store the log of step '{name}'", before_again=lambda: store.rmtree(uri)
        )
    except OSError as exc:  # the artifact store went away
        logger.warning("Step '%s': its log could not be stored: %s", name, exc)
    except StepInterrupted:  # its stop ended the wait for the store
        logger.warning(
            "Step '%s': its log could not be stored: the artifact store could not be "
            "reached when the step was stopped.",
            name,
        )


class StepLog:
    """An inline attempt's capture, stored at its ``logs_uri`` once (:meth:`store`): by its own
    thread when the attempt ends, or first by a forced stop that ended the step while its code
    was blocked (:func:`store_log_of_ended_step`): what it printed until then is not lost, and
    anything it prints after is in no step's log."""

    def __init__(
        self,
        store: ArtifactStore,
        uri: str | None,
        name: str,
        through_outage: ThroughOutage = once,
    ) -> None:
        self.sink = _StepSink()
        self._store, self._uri, self._name = store, uri, name
        self._through_outage = through_outage
        self._stored = False
        self._lock = threading.Lock()

    def store(self) -> None:
        """Close the capture and store what it holds (nothing for a silent step), once, again
        through an outage of the store as ``through_outage`` waits one out (a failed try's
        leftovers removed first; the step's stop ends that wait); a failure to store is then
        logged (the step's end is recorded: only its log is lost)."""
        with self._lock:
            if self._stored:
                return
            self._stored = True
            self.sink.close()
            uri = self._uri
            if not uri or self.sink.empty:  # a silent step costs no file
                self.sink.free()
                return
            try:
                store_step_log(
                    self._store,
                    uri,
                    lambda: self.sink.save(self._store, uri),
                    self._name,
                    self._through_outage,
                )
            finally:
                self.sink.free()


_STEP_LOGS: dict[object, StepLog] = {}
"""The captures of the inline attempts in flight in this process, by step run id."""
_STEP_LOGS_LOCK = threading.Lock()


@contextmanager
def step_log(step_run_id: object, log: StepLog) -> Iterator[StepLog]:
    """Make ``log`` the capture of the step run ``step_run_id`` in flight here, until the block
    ends (:func:`store_log_of_ended_step` finds it meanwhile)."""
    with _STEP_LOGS_LOCK:
        _STEP_LOGS[step_run_id] = log
    try:
        yield log
    finally:
        with _STEP_LOGS_LOCK:
            _STEP_LOGS.pop(step_run_id, None)


@contextmanager
def capturing(log: StepLog) -> Iterator[None]:
    """Collect into ``log`` what this thread, and the threads it starts, print in the block."""
    install_routing()
    token = _SINK.set(log.sink)
    try:
        yield
    finally:
        log.sink.close()
        _SINK.reset(token)


def store_log_of_ended_step(step_run_id: object) -> None:
    """A step run of this process was ended by another thread (a forced stop) while its code
    may still be blocked: store what it printed so far (nothing if it is not an inline attempt
    in flight here, or its log was stored already)."""
    with _STEP_LOGS_LOCK:
        log = _STEP_LOGS.get(step_run_id)
    if log is not None:
        log.store()


def write_log(store: ArtifactStore, uri: str, text: str | bytes) -> None:
    data = text.encode("utf-8", "backslashreplace") if isinstance(text, str) else text
    store.makedirs(posixpath.dirname(uri))
    with store.open(uri, "wb") as f:
        f.write(data)


COPY_CHUNK_BYTES = 1 << 20


def copy_log(store: ArtifactStore, uri: str, path: str | os.PathLike[str]) -> None:
    """Store the log file at ``path`` at ``uri``, a chunk at a time: a step that printed
    gigabytes costs its orchestrator no more memory than one chunk."""
    store.makedirs(posixpath.dirname(uri))
    with open(path, "rb") as source, store.open(uri, "wb") as f:
        shutil.copyfileobj(source, f, COPY_CHUNK_BYTES)


def read_log(store: ArtifactStore, uri: str) -> str:
    with store.open(uri, "rb") as f:
        data: bytes = f.read()
    return data.decode(errors="replace")


class OwnLog:
    """An isolated step's output file, seen from the step's own process.

    Its parent copies the file into the artifact store and deletes it once the process ended
    (``wharf.execution.subprocesses.collect_logs``); a parent that is gone (killed) cannot, so
    the step's process does it, once, at its end: :meth:`orphan` says the parent is gone,
    :meth:`destination` where the log belongs (once known), :meth:`store_if_orphaned` stores
    what the process wrote up to then, through a short outage of the store as ``through_outage``
    waits one out (:func:`store_step_log`, its stop :attr:`waits`), and deletes the file. The
    wait is bounded by the parent watch's grace: the watch's exit (:meth:`store_then_exit`) ends
    it, so the process outlives its orchestrator by no more than the grace and one try."""

    def __init__(self, path: str | None) -> None:
        self._path = path or None
        self._store: ArtifactStore | None = None
        self._uri: str | None = None
        self._name = "?"
        self._through_outage: ThroughOutage = once
        self._orphaned = False
        self._done = False
        self._lock = threading.Lock()
        self.waits = StepRegion()
        """Ends the wait for the store (:meth:`StepRegion.end_waits`): pass it as the stop of
        the ``through_outage`` given to :meth:`destination`."""

    def destination(
        self,
        store: ArtifactStore,
        uri: str | None,
        name: str = "?",
        through_outage: ThroughOutage = once,
    ) -> None:
        """Where step ``name``'s log belongs, and how its store waits through an outage."""
        self._store, self._uri, self._name = store, uri, name
        self._through_outage = through_outage

    def orphan(self) -> None:
        self._orphaned = True

    def store_if_orphaned(self) -> None:
        """Once the parent is gone: store the file at the step's ``logs_uri`` (if known by
        then) and delete it. Safe to call from any thread, more than once."""
        with self._lock:
            self._store_once()

    def _store_once(self) -> None:
        """:meth:`store_if_orphaned`, its lock held."""
        if not self._orphaned or self._done or self._path is None:
            return
        self._done = True
        for stream in (sys.stdout, sys.stderr):
            with suppress(OSError, ValueError):  # closed or broken: nothing to flush
                stream.flush()
        path, store, uri = self._path, self._store, self._uri
        try:
            if store is not None and uri:
                save = functools.partial(copy_log, store, uri, path)
                store_step_log(store, uri, save, self._name, self._through_outage)
        except Exception as exc:  # the step's end is recorded: only its log is lost
            logger.warning("The step's log could not be stored: %s", exc)
        finally:
            with suppress(FileNotFoundError):
                os.unlink(path)

    def store_then_exit(self, code: int) -> None:
        """``ParentWatch``'s way out of a step that did not end in time: end a wait for the
        store in progress (its try in flight gets :data:`LAST_TRY_SECONDS`), store if no one
        did, then exit (with its process group: ``parent_watch.exit_with_group``)."""
        self.waits.end_waits("the step's time to end after its orchestrator was gone ran out")
        if self._lock.acquire(timeout=LAST_TRY_SECONDS):
            try:
                self._store_once()
            finally:
                self._lock.release()
        else:
            logger.warning("The step's log could not be stored before its process exits.")
        exit_with_group(code)


LAST_TRY_SECONDS = 10.0
"""How long the parent watch's exit waits for a store of the log in flight (one try: the S3
client's connect timeouts) before the process exits without it."""
