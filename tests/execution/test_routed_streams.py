"""The stream an inline step prints to offers what the console stream offers, and every write,
text or bytes, reaches the console as it would without Wharf and is copied to the sink."""

from __future__ import annotations

import io

from wharf.execution.routed_streams import RoutingStream


class Copy:
    def __init__(self) -> None:
        self.parts: list[str] = []

    def write(self, text: str) -> None:
        self.parts.append(text)


def console() -> io.TextIOWrapper:
    return io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict", write_through=True)


def test_text_and_bytes_reach_the_console_and_the_copy() -> None:
    original, copy = console(), Copy()
    stream = RoutingStream(original, lambda: copy, lambda: None)
    stream.write("text é\n")
    assert stream.buffer.write(b"raw \xff\xfe bytes\n") == len(b"raw \xff\xfe bytes\n")
    stream.buffer.flush()
    stream.flush()
    assert original.buffer.getvalue() == "text é\n".encode() + b"raw \xff\xfe bytes\n"  # type: ignore[attr-defined]
    assert copy.parts == ["text é\n", "raw \\xff\\xfe bytes\n"]


def test_without_a_sink_nothing_is_copied() -> None:
    original = console()
    stream = RoutingStream(original, lambda: None, lambda: None)
    stream.buffer.write(b"console only\n")
    assert original.buffer.getvalue() == b"console only\n"  # type: ignore[attr-defined]


def test_what_the_console_stream_offers_is_offered() -> None:
    original = console()
    stream = RoutingStream(original, lambda: None, lambda: None)
    assert stream.writable()
    assert stream.errors == "strict"
    assert stream.encoding == "utf-8"
    assert stream.buffer is stream.buffer
    assert stream.buffer.writable()
    stream.reconfigure(line_buffering=True)
    assert original.line_buffering
    assert stream.line_buffering


def test_a_console_stream_of_text_alone_gets_bytes_as_text() -> None:
    original, copy = io.StringIO(), Copy()
    stream = RoutingStream(original, lambda: copy, lambda: None)
    stream.buffer.write(b"bytes \xff\n")
    assert original.getvalue() == "bytes \\xff\n"
    assert copy.parts == ["bytes \\xff\n"]
