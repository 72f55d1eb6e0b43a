"""Helpers shared by the SQL repositories: paging, not-found errors, name checks, chunking.

Paging invariant (every ``list``): rows are ordered by ``created`` then ``id``, both in the
direction the :class:`PageRequest` asks for, so pages never overlap or skip rows even when many
rows share a creation time; ``total`` comes from one ``COUNT`` over the same filter.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any, TypeVar
from uuid import UUID

from sqlalchemy import (
    ColumnElement,
    Connection,
    FromClause,
    Row,
    Select,
    Table,
    func,
    select,
)

from wharf.core.enums import ExecutionStatus
from wharf.core.errors import EntityNotFoundError
from wharf.core.ids import id_prefix_bounds
from wharf.core.names import normalize_name
from wharf.sql.engine import Database
from wharf.store.models import MAX_PAGE_SIZE, Page, PageRequest

T = TypeVar("T")

DEFAULT_PAGE = PageRequest()
IN_CHUNK = 500
"""Ids per ``IN (...)`` list; well below every backend's bound-parameter limit."""


class SqlRepository:
    """Base of every repository: holds the :class:`Database` (engine + clock)."""

    def __init__(self, db: Database) -> None:
        self._db = db


def status_times(
    new: ExecutionStatus, start: datetime | None, end: datetime | None, now: datetime
) -> dict[str, datetime]:
    """The time columns a run or step moving to ``new`` gets: ``start_time`` when it first
    becomes running, ``end_time`` when it first finishes (each is set once, never moved)."""
    values = {}
    if new is ExecutionStatus.RUNNING and start is None:
        values["start_time"] = now
    if new.is_finished and end is None:
        values["end_time"] = now
    return values


def not_found(kind: str, entity_id: UUID) -> EntityNotFoundError:
    return EntityNotFoundError(f"No {kind} with id {entity_id}.")


def check_name(value: str, what: str) -> str:
    """``value`` as it is stored (NFC), or InputError if it breaks the one name rule
    (:mod:`wharf.core.names`: no edge whitespace, no control or invisible characters)."""
    return normalize_name(value, what)


def id_prefix_condition(table: Table, prefix: str) -> ColumnElement[bool]:
    """Rows whose id starts with ``prefix`` (hex digits): a range on the primary key, which
    orders as the hex form on every backend (native UUIDs compare bytewise on PostgreSQL,
    ``CHAR(32)`` hex compares as text elsewhere)."""
    low, high = id_prefix_bounds(prefix)
    return table.c.id.between(low, high)


def chunks(values: Sequence[T], size: int = IN_CHUNK) -> Iterator[Sequence[T]]:
    for start in range(0, len(values), size):
        yield values[start : start + size]


def missing_ids(conn: Connection, table: Table, ids: Iterable[UUID]) -> list[UUID]:
    """The ids among ``ids`` that have no row in ``table`` (used after a foreign-key failure)."""
    wanted = list(dict.fromkeys(ids))
    found: set[UUID] = set()
    for chunk in chunks(wanted):
        found.update(conn.execute(select(table.c.id).where(table.c.id.in_(chunk))).scalars())
    return [i for i in wanted if i not in found]


def first_missing(
    db: Database, checks: Sequence[tuple[str, Table, Iterable[UUID | None]]]
) -> EntityNotFoundError | None:
    """The not-found error for the first referenced id (``kind, table, ids``) that is absent."""

    def find(conn: Connection) -> EntityNotFoundError | None:
        for kind, table, ids in checks:
            absent = missing_ids(conn, table, [i for i in ids if i is not None])
            if absent:
                return not_found(kind, absent[0])
        return None

    return db.read(find)


def fetch_page(
    conn: Connection,
    stmt: Select[Any],
    table: Table,
    conditions: Sequence[ColumnElement[bool]],
    page: PageRequest,
    *,
    from_: FromClause | None = None,
) -> tuple[list[Row[Any]], int]:
    """One page of ``stmt`` (a select over ``table`` or ``from_``) and the total row count."""
    size = min(page.size, MAX_PAGE_SIZE)
    offset = (page.index - 1) * size
    count = select(func.count()).select_from(from_ if from_ is not None else table)
    total = conn.execute(count.where(*conditions)).scalar_one()
    if offset >= total:
        return [], total
    if page.sort == "asc":
        order = (table.c.created.asc(), table.c.id.asc())
    else:
        order = (table.c.created.desc(), table.c.id.desc())
    rows = conn.execute(stmt.where(*conditions).order_by(*order).limit(size).offset(offset)).all()
    return list(rows), total


def to_page(rows: Sequence[T], total: int, page: PageRequest) -> Page[T]:
    return Page(items=list(rows), index=page.index, size=page.size, total=total)


def list_page(
    db: Database,
    table: Table,
    conditions: Sequence[ColumnElement[bool]],
    page: PageRequest,
    to_record: Callable[[Row[Any]], T],
) -> Page[T]:
    """The common case: a page of whole rows of ``table`` mapped by ``to_record``."""

    def query(conn: Connection) -> Page[T]:
        rows, total = fetch_page(conn, select(table), table, conditions, page)
        return to_page([to_record(r) for r in rows], total, page)

    return db.read(query)
