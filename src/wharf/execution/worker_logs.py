"""What the processes an inline step starts print (a ``multiprocessing`` pool's workers), in
the step's log as well as on the console.

An inline step's capture (``wharf.execution.log_capture``) lives in the pipeline's process; a
process its code starts prints to the console it inherited (fd 1 and 2, shared by every step,
as the environment is). So the capture gets, when its step first starts a process, a pipe
(:class:`WorkerPipe`) whose read end a thread of this process copies into the capture; the
worker writes what it prints to the write end too (:class:`WorkerWriter`, the worker's
:func:`process_sink`). How the write end reaches the worker: ``fork`` (``os.fork``, whoever
calls it): an at-fork hook finds the forking thread's capture (:func:`install`); ``spawn`` and
``forkserver``: it travels with the ``Process`` object the worker unpickles, as
``multiprocessing`` hands its own descriptors to a new worker (``reduction.DupFd``), unless the
worker runs another interpreter (``multiprocessing.set_executable``), which may lack Wharf.

Invariants: a worker writes to the pipe of the step whose thread (or a thread inheriting its
capture) started it, and its own workers to the same one; a pipe's read end is only ever open in
the pipeline's process (every forked child closes all of them, and every write end but its own),
so a worker outliving its step, the pipe closed, gets EPIPE and prints on to the console only;
:meth:`WorkerPipe.finish` (at the step's end) delivers all the pipe held then and no more.
POSIX only (``os.register_at_fork``); elsewhere workers print to the console only.
"""

from __future__ import annotations

import codecs
import contextlib
import fcntl
import logging
import multiprocessing.context as mp_context
import multiprocessing.reduction as mp_reduction
import os
import select
import struct
import termios
import threading
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from wharf.execution import spawn_handover

logger = logging.getLogger(__name__)

CHUNK_BYTES = 1 << 16


class WorkerSink(Protocol):
    """A capture a worker can be started for: the write end its workers write to (None: its
    workers print to the console only)."""

    def worker_fd(self) -> int | None: ...


_LOCK = threading.Lock()
"""Guards :data:`_OPEN` and :data:`_FORKING`; held across every fork (a pipe is never made
while a process forks, so no child holds a descriptor it does not know of)."""
_OPEN: set[int] = set()
"""Every descriptor of every :class:`WorkerPipe` open in this process."""
_FORKING: dict[int, int | None] = {}
"""Thread id -> the write end the child it forks now inherits, while it forks."""
_PROCESS_SINK: WorkerWriter | None = None
"""In a worker of an inline step: where everything the worker prints goes too."""


def process_sink() -> WorkerWriter | None:
    """In a worker of an inline step, the pipe to its step's log; None elsewhere."""
    return _PROCESS_SINK


class WorkerWriter:
    """A worker's end of its step's pipe. Whole lines go at once, each write of at most
    ``PIPE_BUF`` bytes (so one worker's line is never torn by another's, as ``print``'s
    separate write of its newline would); the end of an unfinished line waits for its newline
    or a :meth:`flush` (``multiprocessing`` flushes the standard streams as a worker exits, and
    the routing stream's ``flush`` flushes this). Once the pipe is closed (the step ended)
    writes are dropped."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._lock = threading.Lock()
        self._broken = False
        self._unfinished = ""

    def write(self, text: str) -> None:
        if self._broken or not text:
            return
        with self._lock:
            text = self._unfinished + text
            cut = text.rfind("\n") + 1
            if len(text) - cut > select.PIPE_BUF:  # a long line: no use waiting
                cut = len(text)
            self._unfinished = text[cut:]
            self._send(text[:cut])

    def flush(self) -> None:
        with self._lock:
            text, self._unfinished = self._unfinished, ""
            self._send(text)

    def _send(self, text: str) -> None:
        try:
            for chunk in _whole_lines(text.encode("utf-8", "backslashreplace")):
                view = memoryview(chunk)
                while view:
                    view = view[os.write(self.fd, view) :]
        except OSError:  # EPIPE: the step ended; EBADF: closed by the worker's own code
            self._broken = True

    def worker_fd(self) -> int | None:
        return None if self._broken else self.fd


def _whole_lines(data: bytes) -> Iterator[bytes]:
    """``data`` in pieces of whole lines of at most ``PIPE_BUF`` bytes each (a pipe writes
    such a piece at once), but for a longer line, alone."""
    piece = b""
    for line in data.splitlines(keepends=True):
        if piece and len(piece) + len(line) > select.PIPE_BUF:
            yield piece
            piece = b""
        piece += line
    if piece:
        yield piece


class WorkerPipe:
    """One step's pipe from its workers: a thread hands what they write to ``deliver`` (as
    text) until :meth:`finish`."""

    def __init__(self, deliver: Callable[[str], None]) -> None:
        self._deliver = deliver
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        with _LOCK:  # no fork meanwhile: see _LOCK
            self._read, self.fd = os.pipe()  # not inherited by a program a worker executes
            try:
                self._stop_read, self._stop_write = os.pipe()
            except OSError:
                os.close(self._read)
                os.close(self.fd)
                raise
            _OPEN.update((self._read, self.fd, self._stop_read, self._stop_write))
        os.set_blocking(self._read, False)
        self._finish_lock = threading.Lock()
        self._finished = False
        self._thread = threading.Thread(target=self._pump, name="wharf-worker-output", daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        poller = select.poll()
        poller.register(self._read, select.POLLIN)
        poller.register(self._stop_read, select.POLLIN)
        while True:
            ready = {fd for fd, _ in poller.poll()}
            if self._stop_read in ready:
                return
            self._take(CHUNK_BYTES)

    def _take(self, most: int) -> int:
        """Deliver up to ``most`` bytes the pipe holds; how many (0: none now)."""
        try:
            data = os.read(self._read, most)
        except BlockingIOError:
            return 0
        if data:
            try:
                self._deliver(self._decoder.decode(data))
            except Exception as exc:  # the pipe must still be emptied, or its writers block
                logger.warning("Output of a step's worker lost: %s", exc)
        return len(data)

    def finish(self) -> None:
        """Stop copying, deliver what the pipe holds now (what workers wrote before the step
        ended) and close it; idempotent, and a second caller returns once it is done."""
        with self._finish_lock:
            if self._finished:
                return
            self._finished = True
            os.write(self._stop_write, b"\0")
            self._thread.join()
            left = _pending(self._read)
            while left > 0:
                taken = self._take(min(left, CHUNK_BYTES))
                if not taken:
                    break
                left -= taken
            self._deliver(self._decoder.decode(b"", final=True))
            with _LOCK:
                for fd in (self._read, self.fd, self._stop_read, self._stop_write):
                    _OPEN.discard(fd)
                    os.close(fd)


def _pending(fd: int) -> int:
    """How many bytes the pipe ``fd`` holds now."""
    try:
        answer = fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0")
    except OSError:  # no FIONREAD on pipes here: what one read gives
        return CHUNK_BYTES
    count: int = struct.unpack("i", answer)[0]
    return count


class _HandedFd:
    """A write end on its way to a ``spawn``/``forkserver`` worker inside its ``Process``
    object: ``multiprocessing`` duplicates it into the worker, which adopts it as it unpickles
    the object, before it runs any work."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def __reduce__(self) -> tuple[Any, ...]:
        if mp_context.get_spawning_popen() is None:  # pickled for another reason than a start
            return (_nothing, ())
        assert _adopt is not None
        return (_adopt, (mp_reduction.DupFd(self.fd),))


def _nothing() -> None:
    return None


def adopt(fd: int) -> None:
    """In a new worker: what this process prints goes to ``fd``, its step's pipe, too."""
    global _PROCESS_SINK
    _PROCESS_SINK = WorkerWriter(fd)


_adopt: Callable[[Any], None] | None = None
_installed = False


def install(current: Callable[[], WorkerSink | None], adopt_handed: Callable[[Any], None]) -> None:
    """Hand each new process started here the pipe of the capture ``current()`` returns in the
    thread starting it. ``adopt_handed`` (a module-level function: it is pickled by name) runs
    in a ``spawn``/``forkserver`` worker with a ``reduction.DupFd`` of the write end: it must
    call :func:`adopt` with the descriptor and route the worker's output to
    :func:`process_sink`. Idempotent; the first call's arguments hold."""
    global _adopt, _installed
    with _LOCK:
        if _installed or not hasattr(os, "register_at_fork"):
            return
        _installed, _adopt = True, adopt_handed
    os.register_at_fork(
        before=lambda: _before_fork(current),
        after_in_parent=_after_fork_in_parent,
        after_in_child=_after_fork_in_child,
    )
    spawn_handover.hand_over("worker output", lambda: _handed_fd(current))


def _handed_fd(current: Callable[[], WorkerSink | None]) -> _HandedFd | None:
    """The pipe of the capture ``current()`` returns, to hand a spawned worker; None if none."""
    fd = _worker_fd(current)
    return _HandedFd(fd) if fd is not None else None


def _worker_fd(current: Callable[[], WorkerSink | None]) -> int | None:
    try:
        sink = current()
        return sink.worker_fd() if sink is not None else None
    except (OSError, RuntimeError) as exc:  # out of descriptors or threads: console only
        logger.warning("A worker's output will not be in its step's log: %s", exc)
        return None


def _before_fork(current: Callable[[], WorkerSink | None]) -> None:
    fd = _worker_fd(current)
    _LOCK.acquire()
    _FORKING[threading.get_ident()] = fd


def _after_fork_in_parent() -> None:
    _FORKING.pop(threading.get_ident(), None)
    _LOCK.release()


def _after_fork_in_child() -> None:
    """The child's one thread is the one that forked: keep the write end it was handed, close
    every other descriptor of a pipe (above all the read ends: see the module's invariants)."""
    global _LOCK, _PROCESS_SINK
    fd = _FORKING.get(threading.get_ident())
    for other in _OPEN - {fd}:
        with contextlib.suppress(OSError):
            os.close(other)
    _OPEN.clear()
    _FORKING.clear()
    _LOCK = threading.Lock()  # held by the parent's forking thread when the process was copied
    _PROCESS_SINK = WorkerWriter(fd) if fd is not None else None  # a lock of its own
