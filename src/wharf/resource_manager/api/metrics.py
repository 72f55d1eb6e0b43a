"""``/metrics``: the Resource Manager's state in the Prometheus text format, read from the
database (so every worker and replica reports the same figures) and the service.

Owns: :class:`MetricsReader`.

Series (quantities in each resource's base unit: mCPU, bytes, GPUs):
- ``wharf_rm_queue_length{pool}``: pending requests queued in the pool, as one read-only
  scheduling cycle over the committed state sees them (the scheduler's own view, as
  ``/v1/pools/{id}/queue``; a scrape decides nothing and takes no write lock);
- ``wharf_rm_allocated{pool,class,resource}`` and ``wharf_rm_capacity{...}`` (``+Inf`` for
  unlimited): what allocated and preempting requests hold, and what the classes offer;
- ``wharf_rm_requests{status}``: requests per status;
- ``wharf_rm_time_to_admit_seconds``: histogram of creation -> allocation over every admitted
  request;
- ``wharf_rm_preemptions_total`` (requests ever asked to give capacity back) and
  ``wharf_rm_expiries_total`` (leases that lapsed while holding capacity).

Figures are the committed state: a lease that lapsed counts as expired once a scheduling
transaction expired it (any call that schedules, or the sweeper within one sweep interval).

Invariants: request rows are never deleted, so the counters never go down; the figures are
recomputed at most every ``metrics_cache_seconds`` per worker, one computation at a time; the
reader owns a small engine of its own and only reads.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector, CollectorRegistry
from sqlalchemy import ColumnElement, Connection, case, extract, func, literal_column, select, text

from wharf.core.enums import ResourceRequestStatus as S
from wharf.resource_manager.service import ResourceManagerService
from wharf.resource_manager.service import tables as t
from wharf.sql.engine import Database, create_sql_engine, mask_url

BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600)
HOLDING = (S.ALLOCATED.value, S.PREEMPTING.value)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _admit_seconds(dialect: str) -> ColumnElement[Any]:
    c = t.requests.c
    if dialect == "sqlite":
        return (func.julianday(c.allocated_at) - func.julianday(c.created_at)) * 86400.0
    if dialect == "postgresql":
        return extract("epoch", c.allocated_at - c.created_at)
    micro: ColumnElement[Any] = literal_column("MICROSECOND")
    return func.timestampdiff(micro, c.created_at, c.allocated_at) / 1_000_000.0


class _Snapshot(Collector):
    def __init__(self, families: list[Metric]) -> None:
        self._families = families

    def collect(self) -> Iterator[Metric]:
        return iter(self._families)


class MetricsReader:
    def __init__(
        self,
        url: str,
        service: ResourceManagerService,
        cache_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._db = Database(create_sql_engine(url), mask_url(url))
        self._service = service
        self._cache_seconds = cache_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._cached: tuple[float, bytes] | None = None

    def ping(self) -> None:
        """StoreUnavailableError unless the database answers."""
        self._db.read(lambda conn: conn.execute(text("SELECT 1")).scalar())

    def render(self) -> bytes:
        with self._lock:
            now = self._clock()
            if self._cached is not None and now - self._cached[0] < self._cache_seconds:
                return self._cached[1]
            registry = CollectorRegistry(auto_describe=False)
            registry.register(_Snapshot(self._families()))
            body = generate_latest(registry)
            self._cached = (now, body)
            return body

    def close(self) -> None:
        self._db.dispose()

    def _families(self) -> list[Metric]:
        pools = self._service.pools.list()
        names = {pool.id: pool.name for pool in pools}
        queue = GaugeMetricFamily(
            "wharf_rm_queue_length", "Pending requests queued in the pool.", labels=["pool"]
        )
        capacity = GaugeMetricFamily(
            "wharf_rm_capacity",
            "Capacity per pool, class and resource (base units; +Inf: unlimited).",
            labels=["pool", "class", "resource"],
        )
        lengths = self._service.pools.queue_lengths()
        for pool in pools:
            queue.add_metric([pool.name], lengths.get(pool.id, 0))
            for item in pool.classes:
                for resource, quantity in sorted(item.capacity.items()):
                    value = float("inf") if quantity is None else quantity
                    capacity.add_metric([pool.name, item.name, resource], value)
        return [queue, capacity, *self._db.read(lambda conn: self._from_tables(conn, names))]

    def _from_tables(self, conn: Connection, names: dict[Any, str]) -> list[Metric]:
        r = t.requests.c
        allocated = GaugeMetricFamily(
            "wharf_rm_allocated",
            "Quantity held by allocated and preempting requests (base units).",
            labels=["pool", "class", "resource"],
        )
        # Allocations are JSON on their request's row: summed here, over holding requests only.
        held: dict[tuple[str, str, str], int] = {}
        for (entries,) in conn.execute(select(r.allocations).where(r.status.in_(HOLDING))):
            for entry in entries:
                key = (entry["pool_id"], entry["class_name"], entry["resource"])
                held[key] = held.get(key, 0) + int(entry["base_quantity"])
        by_name = {str(pool_id): name for pool_id, name in names.items()}
        for (pool_id, class_name, resource), total in sorted(held.items()):
            allocated.add_metric([by_name.get(pool_id, pool_id), class_name, resource], total)

        requests = GaugeMetricFamily(
            "wharf_rm_requests", "Resource requests per status.", labels=["status"]
        )
        rows = conn.execute(select(r.status, func.count()).group_by(r.status))
        counts: dict[str, int] = {status: int(n) for status, n in rows}
        for status in S:
            requests.add_metric([status.value], counts.get(status.value, 0))

        preemptions = conn.execute(
            select(func.count()).where(r.preemption_initiated_by_id.is_not(None))
        ).scalar_one()
        return [
            allocated,
            requests,
            self._histogram(conn),
            CounterMetricFamily(
                "wharf_rm_preemptions",
                "Requests asked to give their capacity back (preempting or preempted).",
                value=preemptions,
            ),
            CounterMetricFamily(
                "wharf_rm_expiries",
                "Requests whose lease lapsed while they held capacity.",
                value=counts.get(S.EXPIRED.value, 0),
            ),
        ]

    def _histogram(self, conn: Connection) -> Metric:
        seconds = _admit_seconds(conn.dialect.name)
        columns = [func.count(), func.sum(seconds)]
        columns += [func.sum(case((seconds <= bound, 1), else_=0)) for bound in BUCKETS]
        row = conn.execute(select(*columns).where(t.requests.c.allocated_at.is_not(None))).one()
        count, total = int(row[0] or 0), float(row[1] or 0.0)
        buckets = [(str(float(b)), int(v or 0)) for b, v in zip(BUCKETS, row[2:], strict=True)]
        return HistogramMetricFamily(
            "wharf_rm_time_to_admit_seconds",
            "Time from a request's creation to its allocation.",
            buckets=[*buckets, ("+Inf", count)],
            sum_value=total,
        )
