"""The ``sys.stdout``/``sys.stderr`` an inline step prints to: the process's own stream, each
write also copied to where the writing thread's output belongs (its step's capture, or the pipe
of a worker of an inline step), as ``wharf.execution.log_capture`` decides.

Owns :class:`RoutingStream` and its binary side, :class:`RoutingBuffer` (``sys.stdout.buffer``,
which code writing bytes uses). Invariant: everything the console stream offers stays offered
(``name``, ``errors``, ``reconfigure`` ... are the console stream's), and every write reaches the
console stream exactly as it would without Wharf; the copy is text, with bytes that are not
valid in the stream's encoding written out (``\\xff``).
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any, Protocol, TextIO


class Sink(Protocol):
    def write(self, text: str) -> None: ...


CurrentSink = Callable[[], Sink | None]
"""Where the calling thread's output is copied (None: nowhere)."""


class RoutingStream(io.TextIOBase):
    """A text stream that writes to ``original`` and copies each write to ``current_sink()``;
    ``flush`` calls ``before_flush()`` first (which sends a worker's unfinished line)."""

    def __init__(
        self, original: TextIO, current_sink: CurrentSink, before_flush: Callable[[], None]
    ) -> None:
        self.original = original
        self.current_sink = current_sink
        self._before_flush = before_flush
        self._buffer = RoutingBuffer(self)

    def write(self, text: str) -> int:
        sink = self.current_sink()
        if sink is not None:
            sink.write(text)
        return self.original.write(text)

    def flush(self) -> None:
        self._before_flush()
        self.original.flush()

    def isatty(self) -> bool:
        return self.original.isatty()

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.original, "encoding", None) or "utf-8"

    def fileno(self) -> int:
        return self.original.fileno()

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        return getattr(self.original, "errors", None)

    @property
    def newlines(self) -> Any:  # type: ignore[override]
        return getattr(self.original, "newlines", None)

    @property
    def buffer(self) -> RoutingBuffer:
        return self._buffer

    def __getattr__(self, name: str) -> Any:
        """What else the console stream offers (``name``, ``reconfigure``, ...)."""
        if name == "original":  # not set yet (a copy made without __init__)
            raise AttributeError(name)
        return getattr(self.original, name)


class RoutingBuffer(io.RawIOBase):
    """``RoutingStream.buffer``: bytes written to the console stream's own buffer (where it has
    one), each write also copied, decoded, to the writing thread's sink."""

    def __init__(self, stream: RoutingStream) -> None:
        self._stream = stream

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        chunk = bytes(data)
        sink = self._stream.current_sink()
        if sink is not None:
            sink.write(chunk.decode(self._stream.encoding, "backslashreplace"))
        original = getattr(self._stream.original, "buffer", None)
        if original is None:  # a console stream of text alone: give it the same text
            self._stream.original.write(chunk.decode(self._stream.encoding, "backslashreplace"))
            return len(chunk)
        written: int | None = original.write(chunk)
        return len(chunk) if written is None else written

    def flush(self) -> None:
        original = getattr(self._stream.original, "buffer", None)
        if original is not None:
            original.flush()

    def fileno(self) -> int:
        return self._stream.fileno()

    def isatty(self) -> bool:
        return self._stream.isatty()
