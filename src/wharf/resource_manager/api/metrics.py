"""``/metrics``: the Resource Manager's state in the Prometheus text format, read from the
database (so every worker and replica reports the same figures) and the service.

Owns: :class:`MetricsReader`.

Invariants: the figures are the committed state, and request rows are never deleted, so the
counters never go down; a scrape decides nothing and takes no write lock; the database reads are
the service's (:mod:`wharf.resource_manager.service.metrics_reads`): this module only shapes
them for Prometheus.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector, CollectorRegistry

from wharf.core.enums import ResourceRequestStatus as S
from wharf.resource_manager.service import ResourceManagerService
from wharf.resource_manager.service.metrics_reads import MetricsReads, TableFigures

BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class _Snapshot(Collector):
    def __init__(self, families: list[Metric]) -> None:
        self._families = families

    def collect(self) -> Iterator[Metric]:
        return iter(self._families)


class MetricsReader:
    """Renders the series, recomputed at most every ``cache_seconds`` per worker, one
    computation at a time. Quantities are in each resource's base unit (mCPU, bytes, GPUs):

    - ``wharf_rm_queue_length{pool}``: pending requests queued in the pool, as one read-only
      scheduling cycle over the committed state sees them (as ``/v1/pools/{id}/queue``);
    - ``wharf_rm_allocated{pool,class,resource}`` and ``wharf_rm_capacity{...}`` (``+Inf`` for
      unlimited): what allocated and preempting requests hold, and what the classes offer;
    - ``wharf_rm_requests{status}``: requests per status;
    - ``wharf_rm_time_to_admit_seconds``: histogram of creation -> allocation over every
      admitted request;
    - ``wharf_rm_preemptions_total`` (requests ever asked to give capacity back) and
      ``wharf_rm_expiries_total`` (leases that lapsed while holding capacity; a lapsed lease
      counts once a scheduling transaction expired it: any call that schedules, or the sweeper
      within one sweep interval).
    """

    def __init__(
        self,
        url: str,
        service: ResourceManagerService,
        cache_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._reads = MetricsReads(url)
        self._service = service
        self._cache_seconds = cache_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._cached: tuple[float, bytes] | None = None

    def ping(self) -> None:
        """StoreUnavailableError unless the database answers."""
        self._reads.ping()

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
        self._reads.close()

    def _families(self) -> list[Metric]:
        pools = self._service.pools.list()
        names = {str(pool.id): pool.name for pool in pools}
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
        return [queue, capacity, *_from_tables(self._reads.figures(BUCKETS), names)]


def _from_tables(figures: TableFigures, names: dict[str, str]) -> list[Metric]:
    allocated = GaugeMetricFamily(
        "wharf_rm_allocated",
        "Quantity held by allocated and preempting requests (base units).",
        labels=["pool", "class", "resource"],
    )
    for (pool_id, class_name, resource), total in sorted(figures.held.items()):
        allocated.add_metric([names.get(pool_id, pool_id), class_name, resource], total)
    requests = GaugeMetricFamily(
        "wharf_rm_requests", "Resource requests per status.", labels=["status"]
    )
    for status in S:
        requests.add_metric([status.value], figures.status_counts.get(status.value, 0))
    buckets = [(str(float(b)), v) for b, v in zip(BUCKETS, figures.admit_buckets, strict=True)]
    return [
        allocated,
        requests,
        HistogramMetricFamily(
            "wharf_rm_time_to_admit_seconds",
            "Time from a request's creation to its allocation.",
            buckets=[*buckets, ("+Inf", figures.admitted)],
            sum_value=figures.admit_seconds_total,
        ),
        CounterMetricFamily(
            "wharf_rm_preemptions",
            "Requests asked to give their capacity back (preempting or preempted).",
            value=figures.preemptions,
        ),
        CounterMetricFamily(
            "wharf_rm_expiries",
            "Requests whose lease lapsed while they held capacity.",
            value=figures.status_counts.get(S.EXPIRED.value, 0),
        ),
    ]
