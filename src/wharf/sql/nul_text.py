"""Text holding a NUL character (U+0000) is refused on every backend: :func:`refuse_nul` and
:func:`install`.

PostgreSQL cannot store NUL in text while SQLite and MySQL/MariaDB keep it, so a run named
``'a\\x00b'`` was stored on two databases and refused on the third. Every statement's string
parameters are checked before they reach the driver (SQLAlchemy's ``before_cursor_execute`` and
:mod:`wharf.sql.direct`), and the same :class:`InputError` is raised everywhere; nothing is
written. JSON documents are unaffected: their encoder writes NUL as ``\\u0000``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import Engine, event

from wharf.core.errors import InputError

_NUL = "\x00"
MESSAGE = "A value cannot be stored: a text holds a NUL character (U+0000)."


def _has_nul(values: Any) -> bool:
    if isinstance(values, Mapping):
        values = values.values()
    return any(isinstance(v, str) and _NUL in v for v in values)


def refuse_nul(parameters: Any, *, many: bool = False) -> None:
    """InputError if a string among ``parameters`` (one set of a statement's parameters, a
    mapping or a sequence; a sequence of sets if ``many``) holds NUL."""
    if parameters is None:
        return
    sets = parameters if many else (parameters,)
    if any(_has_nul(values) for values in sets):
        raise InputError(MESSAGE)


def install(engine: Engine) -> None:
    """Check every statement ``engine`` sends (executemany included)."""

    @event.listens_for(engine, "before_cursor_execute")
    def _check(
        _conn: Any, _cursor: Any, _sql: str, parameters: Any, _context: Any, executemany: bool
    ) -> None:
        refuse_nul(parameters, many=executemany)
