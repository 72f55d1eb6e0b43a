"""Column types that behave the same on SQLite, PostgreSQL and MySQL/MariaDB.

Invariants:
- :class:`UtcDateTime` always returns timezone-aware UTC datetimes with microseconds on every
  backend; naive values handed in are taken to be UTC already.
- :class:`JsonText` / :class:`NullableJsonText` store JSON as text, never a native JSON type,
  and refuse a document holding a lone surrogate (ValueError) before any driver sees it.
- :data:`UUID` is native on PostgreSQL and ``CHAR(32)`` hex elsewhere, so "ties broken by id"
  orders rows identically on all backends.
- :data:`LONG_TEXT` holds source code and other unbounded text (MySQL's ``TEXT`` stops at 64 KiB).
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import DateTime, Text, Uuid
from sqlalchemy.dialects import mysql
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator, TypeEngine

_MYSQL = ("mysql", "mariadb")


def is_mysql(dialect: Dialect) -> bool:
    return dialect.name in _MYSQL


# Variants rather than ``load_dialect_impl`` overrides: ``dialect.type_descriptor(Text())`` adapts
# to VARCHAR on psycopg, which would make the DDL differ from the migrations.
UUID: TypeEngine[uuid.UUID] = Uuid().with_variant(Uuid(native_uuid=False), *_MYSQL)
"""Native on PostgreSQL, ``CHAR(32)`` hex elsewhere -- also on MariaDB, whose native ``UUID``
type (10.7+) sorts differently from PostgreSQL and would make the column type, and how
SQLAlchemy binds values, depend on the server version. Hex strings sort like bytes."""
LONG_TEXT: TypeEngine[str] = Text().with_variant(mysql.LONGTEXT(), *_MYSQL)
_DATETIME: TypeEngine[datetime] = DateTime(timezone=True).with_variant(
    mysql.DATETIME(fsp=6), *_MYSQL
)


def as_utc(value: datetime | None) -> datetime | None:
    """``value`` as an aware UTC datetime; naive values are taken to be UTC already."""
    if value is None:
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class UtcDateTime(TypeDecorator[datetime]):
    """An instant, stored as UTC; ``TIMESTAMP WITH TIME ZONE`` on PostgreSQL, ``DATETIME(6)`` on
    MySQL/MariaDB (whose plain ``DATETIME`` drops microseconds)."""

    impl = _DATETIME
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        utc = as_utc(value)
        if utc is None:
            return None
        # PostgreSQL keeps the offset; SQLite and MySQL columns hold naive UTC wall time.
        return utc if dialect.name == "postgresql" else utc.replace(tzinfo=None)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        return as_utc(value)


_ENCODE = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
"""``json.dumps`` with these options, without building an encoder for every value."""


def _check_encodable(text: str) -> None:
    """Refuse a string no backend can store: one with a lone surrogate (JSON's ``"\\ud800"``
    decodes to one; ValueError, as for a value that is not JSON-serialisable)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        bad = ord(text[error.start])
        raise ValueError(f"a JSON value holds a lone surrogate (U+{bad:04X}), not text") from None


class JsonText(TypeDecorator[Any]):
    """Any JSON-serialisable value, stored as compact JSON text (``LONGTEXT`` on MySQL/MariaDB).

    Text rather than the native JSON types because MariaDB's JSON is an alias of ``LONGTEXT``
    that reflects back as such, and because nothing queries inside the documents: one
    representation keeps the three backends and the Alembic comparison identical.
    """

    impl = LONG_TEXT
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> str | None:
        # None is stored as JSON "null" so that a nullable column and a null value stay distinct.
        if value is None:
            return "null"
        if not value and type(value) is dict:  # the usual empty attributes or metadata
            return "{}"
        text = _ENCODE(value)
        if not text.isascii():
            _check_encodable(text)
        return text

    def process_result_value(self, value: str | None, dialect: Dialect) -> Any:
        return None if value is None else json.loads(value)


class NullableJsonText(JsonText):
    """An optional JSON document: None is stored as SQL ``NULL`` (``IS NULL`` finds it)."""

    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> str | None:
        return None if value is None else super().process_bind_param(value, dialect)
