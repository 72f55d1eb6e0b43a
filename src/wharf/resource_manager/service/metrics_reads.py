"""The database reads behind ``/metrics``: what requests hold, how many are in each status, how
many were asked to give capacity back, and how long admissions took.

Owns: :class:`MetricsReads` (a small read-only engine of its own) and :class:`TableFigures`.

Invariants: only SELECTs in read transactions, never the scheduling lock nor the scheduling cache,
so a scrape decides nothing; quantities are in each resource's base unit; admission times are
bucketed in the database (one row whatever the number of requests).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, Connection, case, extract, func, literal_column, select, text

from wharf.core.enums import ResourceRequestStatus as S
from wharf.resource_manager.service import tables as t
from wharf.sql.engine import Database, create_sql_engine, mask_url

HOLDING = (S.ALLOCATED.value, S.PREEMPTING.value)


@dataclass(frozen=True)
class TableFigures:
    """Committed figures: ``held`` maps (pool id, class, resource) to the base quantity held by
    allocated and preempting requests; ``admit_buckets`` counts admissions at or under each
    bound, in the order of the bounds asked for."""

    held: dict[tuple[str, str, str], int]
    status_counts: dict[str, int]
    preemptions: int
    admitted: int
    admit_seconds_total: float
    admit_buckets: list[int]


def _admit_seconds(dialect: str) -> ColumnElement[Any]:
    c = t.requests.c
    if dialect == "sqlite":
        return (func.julianday(c.allocated_at) - func.julianday(c.created_at)) * 86400.0
    if dialect == "postgresql":
        return extract("epoch", c.allocated_at - c.created_at)
    micro: ColumnElement[Any] = literal_column("MICROSECOND")
    return func.timestampdiff(micro, c.created_at, c.allocated_at) / 1_000_000.0


class MetricsReads:
    def __init__(self, url: str) -> None:
        self._db = Database(create_sql_engine(url), mask_url(url))

    def ping(self) -> None:
        """StoreUnavailableError unless the database answers."""
        self._db.read(lambda conn: conn.execute(text("SELECT 1")).scalar())

    def figures(self, bounds: Sequence[float]) -> TableFigures:
        return self._db.read(lambda conn: _figures(conn, bounds))

    def close(self) -> None:
        self._db.dispose()


def _figures(conn: Connection, bounds: Sequence[float]) -> TableFigures:
    r = t.requests.c
    # Allocations are JSON on their request's row: summed here, over holding requests only.
    held: dict[tuple[str, str, str], int] = {}
    for (entries,) in conn.execute(select(r.allocations).where(r.status.in_(HOLDING))):
        for entry in entries:
            key = (str(entry["pool_id"]), entry["class_name"], entry["resource"])
            held[key] = held.get(key, 0) + int(entry["base_quantity"])
    rows = conn.execute(select(r.status, func.count()).group_by(r.status))
    counts: dict[str, int] = {status: int(n) for status, n in rows}
    preemptions = conn.execute(
        select(func.count()).where(r.preemption_initiated_by_id.is_not(None))
    ).scalar_one()
    seconds = _admit_seconds(conn.dialect.name)
    columns = [func.count(), func.sum(seconds)]
    columns += [func.sum(case((seconds <= bound, 1), else_=0)) for bound in bounds]
    row = conn.execute(select(*columns).where(r.allocated_at.is_not(None))).one()
    return TableFigures(
        held=held,
        status_counts=counts,
        preemptions=int(preemptions),
        admitted=int(row[0] or 0),
        admit_seconds_total=float(row[1] or 0.0),
        admit_buckets=[int(v or 0) for v in row[2:]],
    )
