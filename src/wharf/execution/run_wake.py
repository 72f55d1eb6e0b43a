"""Waking a run's orchestrating process from another process of the same user on this machine,
so that it hears at once of a stop recorded elsewhere (``wharf runs stop``), not at its next
heartbeat (up to a heartbeat interval later: 15 s by default).

Owns :class:`RunWake` (what the run's heartbeat waits on between beats: woken by :meth:`poke`
from its own process, or by a datagram on a Unix socket named after the run in this user's
marker directory, ``started_here``) and :func:`wake_run` (sends that datagram: the process that
records the stop, after recording it). Invariants: a wake carries nothing the orchestrator
trusts: it only makes the run's heartbeat beat now, which reads the stop from the store; only
this user reaches the socket (its directory is this user's, 0700); a wake that finds no
listener (another machine's run, or another user's, a socket path too long to bind, no Unix
sockets) does nothing, and the orchestrator hears of the stop at its next beat as before; a
listener removes its own socket file, and, as it starts, the socket files no process listens on
any more (left by processes killed, or ended by ``os._exit``), never a live one's.
"""

from __future__ import annotations

import contextlib
import logging
import os
import selectors
import socket
import stat
import sys
import threading
from pathlib import Path
from uuid import UUID

from wharf.execution import started_here

logger = logging.getLogger(__name__)

SUN_PATH_MAX = 107 if sys.platform.startswith("linux") else 103
"""The longest path a Unix socket can be bound to (``sun_path`` with its closing NUL)."""
_SUFFIX = ".wake"


def socket_path(run_id: UUID, *, make: bool = False) -> Path | None:
    """Where the orchestrating process of ``run_id`` listens for wakes; None where no socket
    can be (no Unix sockets, this user's marker directory is not trusted, or is too long).
    ``make``: make the directory if it is missing."""
    if not hasattr(socket, "AF_UNIX"):
        return None
    folder = started_here.own_directory(make=make)
    if folder is None:
        return None
    path = folder / f"{run_id}{_SUFFIX}"
    return path if len(os.fsencode(path)) <= SUN_PATH_MAX else None


def wake_run(run_id: UUID) -> bool:
    """Make the orchestrating process of ``run_id`` beat at once, if one of this user listens
    on this machine; whether a wake was sent. Never raises: a wake is only a shortcut."""
    path = socket_path(run_id)
    if path is None:
        return False
    try:
        if not stat.S_ISSOCK(os.lstat(path).st_mode):
            return False
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sender:
            sender.setblocking(False)  # a full queue already holds a wake
            sender.sendto(b"w", os.fspath(path))
    except OSError as exc:  # none listens (a process gone), or its queue is full
        logger.debug("Could not wake the orchestrator of run %s: %s", run_id, exc)
        return False
    return True


class RunWake:
    """What a run's heartbeat waits on between beats: :meth:`wait` returns early when woken,
    by :meth:`poke` (this process) or by :func:`wake_run` (another process). Without a
    socket (see :func:`socket_path`) only :meth:`poke` wakes it."""

    def __init__(self, run_id: UUID) -> None:
        self._run_id = run_id
        self._lock = threading.Lock()
        """Held to poke and to close: a poke never writes to a closed (reused) descriptor."""
        self._closed = False
        self._own_r, self._own_w = socket.socketpair()
        self._own_r.setblocking(False)
        self._own_w.setblocking(False)
        self._selector = selectors.DefaultSelector()  # any descriptor number (not select's)
        self._selector.register(self._own_r, selectors.EVENT_READ)
        self._listener: socket.socket | None = None
        self._path: Path | None = None
        self._inode: tuple[int, int] | None = None
        """The (device, inode) of the socket file bound here: only that one is removed."""

    @classmethod
    def listen(cls, run_id: UUID) -> RunWake:
        """A wake that :func:`wake_run` reaches, where a socket can be bound (else only
        :meth:`poke` wakes it)."""
        wake = cls(run_id)
        wake._bind()
        return wake

    def _bind(self) -> None:
        path = socket_path(self._run_id, make=True)
        if path is None:
            return
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            with contextlib.suppress(FileNotFoundError):  # left by a process of the run gone
                path.unlink()
            listener.bind(os.fspath(path))
            info = os.lstat(path)
        except OSError as exc:
            listener.close()
            logger.debug("Run %s hears of stops at its beats only: %s", self._run_id, exc)
            return
        listener.setblocking(False)
        self._selector.register(listener, selectors.EVENT_READ)
        self._listener, self._path, self._inode = listener, path, (info.st_dev, info.st_ino)
        remove_stale(path.parent, keep=path)

    @property
    def listening(self) -> bool:
        """Whether :func:`wake_run` reaches this wake."""
        return self._listener is not None

    def poke(self) -> None:
        """Wake :meth:`wait` (from any thread; nothing once closed)."""
        with self._lock, contextlib.suppress(OSError):  # full: a wake is pending already
            if not self._closed:
                self._own_w.send(b"w")

    def wait(self, seconds: float) -> bool:
        """Wait up to ``seconds``; whether woken meanwhile (every wake pending is consumed:
        several make one)."""
        ready = self._selector.select(max(seconds, 0.0))
        for key, _ in ready:
            if isinstance(key.fileobj, socket.socket):  # only sockets are registered
                _drain(key.fileobj)
        return bool(ready)

    def close(self) -> None:
        """Stop listening: close the sockets and remove the socket file if it is still this
        one's (a process that took the run over may have bound its own since). Call once no
        thread waits; idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if self._listener is not None and self._path is not None:
            with contextlib.suppress(OSError):
                info = os.lstat(self._path)
                if (info.st_dev, info.st_ino) == self._inode:
                    self._path.unlink()
            self._listener.close()
        self._listener = None
        self._selector.close()
        self._own_r.close()
        self._own_w.close()


def _drain(source: socket.socket) -> None:
    """Read every datagram waiting on ``source`` (a non-blocking socket)."""
    with contextlib.suppress(OSError):
        while source.recv(64):
            pass


def remove_stale(folder: Path, *, keep: Path | None = None) -> list[Path]:
    """Remove the wake sockets in ``folder`` that no process listens on any more (but
    ``keep``); those removed. A file of a live listener is never removed: binding makes the file
    and the listening socket at once, so one that refuses a connection has no listener left."""
    removed: list[Path] = []
    try:
        names = [name for name in os.listdir(folder) if name.endswith(_SUFFIX)]
    except OSError:
        return removed
    for name in names:
        path = folder / name
        if path == keep:
            continue
        try:
            if not stat.S_ISSOCK(os.lstat(path).st_mode):
                continue
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as probe:
                probe.connect(os.fspath(path))
        except ConnectionRefusedError:
            with contextlib.suppress(OSError):
                path.unlink()
                removed.append(path)
        except OSError:  # gone meanwhile, or not ours to judge
            continue
    return removed
