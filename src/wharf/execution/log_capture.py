"""Capturing each step's stdout/stderr into the artifact store.

Inline steps share the process's ``sys.stdout``/``sys.stderr``; :func:`install_routing` wraps
both once with a stream that still writes to the console and also copies each write to the
capture buffer of the step running in the current thread (a ``ContextVar``). Isolated steps
write to a file that the parent copies into the artifact store when the process ends.
Invariant: a step's log is written to its ``logs_uri`` exactly once, after the step ended.
"""

from __future__ import annotations

import io
import posixpath
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TextIO

from wharf.artifacts.store import ArtifactStore

_SINK: ContextVar[io.StringIO | None] = ContextVar("wharf_log_sink", default=None)
_INSTALL_LOCK = threading.Lock()


class _RoutingStream(io.TextIOBase):
    def __init__(self, original: TextIO) -> None:
        self.original = original

    def write(self, text: str) -> int:
        sink = _SINK.get()
        if sink is not None:
            sink.write(text)
        return self.original.write(text)

    def flush(self) -> None:
        self.original.flush()

    def isatty(self) -> bool:
        return self.original.isatty()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.original, "encoding", "utf-8")

    def fileno(self) -> int:
        return self.original.fileno()


def install_routing() -> None:
    """Route this process's stdout/stderr through per-step capture (idempotent)."""
    with _INSTALL_LOCK:
        if not isinstance(sys.stdout, _RoutingStream):
            sys.stdout = _RoutingStream(sys.stdout)
        if not isinstance(sys.stderr, _RoutingStream):
            sys.stderr = _RoutingStream(sys.stderr)


@contextmanager
def capture_output() -> Iterator[io.StringIO]:
    """Collect what this thread prints while the block runs."""
    install_routing()
    buffer = io.StringIO()
    token = _SINK.set(buffer)
    try:
        yield buffer
    finally:
        _SINK.reset(token)


def write_log(store: ArtifactStore, uri: str, text: str | bytes) -> None:
    data = text.encode() if isinstance(text, str) else text
    store.makedirs(posixpath.dirname(uri))
    with store.open(uri, "wb") as f:
        f.write(data)


def read_log(store: ArtifactStore, uri: str) -> str:
    with store.open(uri, "rb") as f:
        data: bytes = f.read()
    return data.decode(errors="replace")
