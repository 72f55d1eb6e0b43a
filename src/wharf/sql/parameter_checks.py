"""What no backend may be sent, refused alike on every one before the driver sees it:
:func:`check_parameters` and :func:`install`.

- Text holding a NUL character (U+0000): PostgreSQL cannot store it while SQLite and MySQL/MariaDB
  keep it. JSON documents are unaffected: their encoder writes NUL as ``\\u0000``.
- One write carrying more than :data:`MAX_STATEMENT_BYTES` of text and bytes: MariaDB drops the
  connection on a statement over its ``max_allowed_packet`` (16 MiB by default), which read as
  the database being unavailable, while SQLite and PostgreSQL stored it.

Every statement's parameters are checked (SQLAlchemy's ``before_cursor_execute`` and
:mod:`wharf.sql.direct`; each row of an ``executemany`` on its own) and the same
:class:`InputError` is raised everywhere; nothing is written.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import Engine, event

from wharf.core.errors import InputError

_NUL = "\x00"
NUL_MESSAGE = "A value cannot be stored: a text holds a NUL character (U+0000)."
MAX_STATEMENT_BYTES = 15 * 1024 * 1024
"""The most text and bytes one write may carry: below MariaDB's default 16 MiB packet, with room
for the statement itself."""
_MIB = 1024 * 1024


def _check_one(values: Any) -> None:
    if isinstance(values, Mapping):
        values = values.values()
    size = 0
    for value in values:
        if isinstance(value, str):
            if _NUL in value:
                raise InputError(NUL_MESSAGE)
            size += len(value) if value.isascii() else len(value.encode("utf-8", "surrogatepass"))
        elif isinstance(value, bytes | bytearray | memoryview):
            size += len(value)
    if size > MAX_STATEMENT_BYTES:
        raise InputError(
            f"A value cannot be stored: one write would carry {size / _MIB:.1f} MiB, more than "
            f"the {MAX_STATEMENT_BYTES // _MIB} MiB the store takes at once (keep large data in "
            "artifacts, not in parameters, metadata or reasons)."
        )


def check_parameters(parameters: Any, *, many: bool = False) -> None:
    """InputError if ``parameters`` (one set of a statement's parameters, a mapping or a
    sequence; a sequence of sets if ``many``) hold text with NUL or are too large."""
    if parameters is None:
        return
    for values in parameters if many else (parameters,):
        _check_one(values)


def install(engine: Engine) -> None:
    """Check every statement ``engine`` sends (executemany included)."""

    @event.listens_for(engine, "before_cursor_execute")
    def _check(
        _conn: Any, _cursor: Any, _sql: str, parameters: Any, _context: Any, executemany: bool
    ) -> None:
        check_parameters(parameters, many=executemany)
