"""Where Wharf's log lines go when the application did not say: stderr, as text or JSON lines.

Owns :func:`configure_logging` (called when a pipeline is about to run) and the ``text``
(``HH:MM:SS [wharf] message``) and ``json`` formats (one object per line, a progress event's
fields as top-level keys). Invariant: its handler on the ``wharf`` logger is there only while
the application has configured no logging itself, so a line is never printed twice.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
from datetime import UTC, datetime
from typing import Any, TextIO

from wharf.execution.progress import ProgressEvent

WHARF_LOGGER = "wharf"
_CONFIGURING = threading.Lock()
"""Pipelines called at once from several threads add one handler, not one each."""


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is when a line is emitted (it may be replaced)."""

    wharf_own = True

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, value: TextIO) -> None:
        pass


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(message)s", datefmt="%H:%M:%S")

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 (logging's name)
        level = f"{record.levelname}: " if record.levelno >= logging.WARNING else ""
        return f"{record.asctime} [wharf] {level}{record.message}"


class JsonFormatter(logging.Formatter):
    """One JSON object per record; a progress event's fields are top-level keys."""

    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        event = getattr(record, "wharf_event", None)
        if isinstance(event, ProgressEvent):
            data.update(event.fields())
        else:
            data["event"] = "log"
        if record.exc_info:
            data["exception"] = self.formatException(record.exc_info)
        return json.dumps(data, default=str)


def _own_handlers(wharf: logging.Logger) -> list[logging.Handler]:
    return [h for h in wharf.handlers if getattr(h, "wharf_own", False)]


def configure_logging(verbosity: str | None, fmt: str) -> None:
    """Send Wharf's log to stderr in ``fmt`` (``text`` or ``json``) at ``verbosity`` (a level
    name; None: INFO), unless the application configured logging itself.

    One handler of its own goes on the ``wharf`` logger, writing to the current
    ``sys.stderr``, only while the application has configured no logging (no handler on the
    root logger, none but this one on ``wharf``); once it has, the handler is taken away
    again. The level (``WHARF_LOGGING_VERBOSITY``) applies to the ``wharf`` logger either
    way."""
    with _CONFIGURING:
        _configure(logging.getLogger(WHARF_LOGGER), verbosity, fmt)


def _configure(wharf: logging.Logger, verbosity: str | None, fmt: str) -> None:
    own = _own_handlers(wharf)
    foreign = [h for h in wharf.handlers if h not in own]
    if logging.getLogger().handlers or foreign:
        for handler in own:  # the application has its own output now
            wharf.removeHandler(handler)
        if verbosity is not None:
            wharf.setLevel(verbosity)
        elif own:
            wharf.setLevel(logging.NOTSET)  # the level was ours too
        return
    handler = own[0] if own else _StderrHandler()
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    if not own:
        wharf.addHandler(handler)
    wharf.setLevel(verbosity or logging.INFO)
