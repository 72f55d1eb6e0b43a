"""Eight processes drive one database while a checker reads it: no over-allocation, no loss.

Each worker (see ``concurrency_worker``) creates requests (GPU demands that may be preempted,
CPU+memory demands that may not), renews them with short leases (so some lapse), releases and
cancels them, and sweeps now and then; all workers also race on the same three idempotency
keys of one shared principal. Meanwhile the checker reads the database in single statements:

- per (pool, class, resource), the allocations of allocated/preempting requests never exceed
  the capacity, and holders never exceed the pool's concurrency limit;
- every holder has an allocation for each of its demands (all-or-nothing);
- afterwards every created id exists in a legal status, and each shared key made one request.
"""

from __future__ import annotations

import multiprocessing
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import sqlalchemy as sa

from tests.resource_manager.service import concurrency_worker
from tests.resource_manager.service.helpers import ADMIN
from wharf.core.enums import ResourceRequestStatus
from wharf.resource_manager.domain import LEASE_EXPIRED, LEASE_EXPIRED_WHILE_PENDING
from wharf.resource_manager.service import ResourceManagerService
from wharf.resource_manager.service import tables as t
from wharf.sql.engine import create_sql_engine

WORKERS = 8
OPS = 80
SECONDS = 6.0
GIB = 1024**3
CAPACITY = {("gpu", "GPU"): 3, ("cpu", "CPU"): 4000, ("cpu", "memory"): 8 * GIB}
POOL_LIMIT = 6

_context = multiprocessing.get_context("forkserver")
_context.set_forkserver_preload(
    ["wharf.resource_manager.service", "tests.resource_manager.service.concurrency_worker"]
)

_HOLDERS = sa.select(t.requests.c.id, t.requests.c.demands, t.requests.c.allocations).where(
    t.requests.c.status.in_(["allocated", "preempting"])
)


def _setup(rm: ResourceManagerService) -> None:
    rm.pools.create(
        ADMIN,
        {
            "name": "shared",
            "concurrency_limit": POOL_LIMIT,
            "classes": [
                {"name": "gpu", "capacity": {"GPU": 3}, "reclaimable": "coordinated"},
                {"name": "cpu", "capacity": {"CPU": "4", "memory": "8GiB"}, "reclaimable": "never"},
            ],
        },
    )
    for name, priority in (("low", 0), ("high", 10)):
        rm.policies.create(
            ADMIN,
            {
                "name": name,
                "pool": "shared",
                "priority": priority,
                "subject_selector": {"subject_type": "project", "subject_id": name},
            },
        )


def _check(conn: sa.Connection) -> list[str]:
    """Straight from the rows: usage per class and resource within capacity, holders within the
    pool's limit, and every holder's demands all allocated."""
    problems: list[str] = []
    holders = conn.execute(_HOLDERS).all()
    used: dict[tuple[str, str], int] = {}
    for request_id, demands, allocations in holders:
        for entry in allocations:
            key = (entry["class_name"], entry["resource"])
            used[key] = used.get(key, 0) + int(entry["base_quantity"])
        covered = {entry.get("demand_index") for entry in allocations} - {None}
        if len(covered) != len(demands):
            problems.append(f"{request_id}: {len(covered)} of {len(demands)} demands")
    for (class_name, resource), total in sorted(used.items()):
        capacity = CAPACITY[(class_name, resource)]
        if total > capacity:
            problems.append(f"{class_name}/{resource}: {total} > {capacity}")
    if len(holders) > POOL_LIMIT:
        problems.append(f"{len(holders)} holders > pool limit {POOL_LIMIT}")
    return problems


def _checker(url: str, stop: threading.Event, found: list[str], rounds: list[int]) -> None:
    engine = create_sql_engine(url)
    try:
        while not stop.is_set():
            with engine.connect() as conn:
                found.extend(_check(conn))
                conn.rollback()
            rounds[0] += 1
            time.sleep(0.02)
    finally:
        engine.dispose()


def test_eight_processes_never_over_allocate_or_lose_a_request(
    rm_url: str, open_rm: Callable[..., ResourceManagerService]
) -> None:
    rm = open_rm()
    _setup(rm)
    stop, problems, rounds = threading.Event(), [], [0]
    checker = threading.Thread(target=_checker, args=(rm_url, stop, problems, rounds))
    checker.start()
    try:
        with ProcessPoolExecutor(WORKERS, mp_context=_context) as pool:
            futures = [
                pool.submit(concurrency_worker.run, rm_url, seed, OPS, SECONDS)
                for seed in range(WORKERS)
            ]
            results: list[dict[str, Any]] = [f.result(timeout=120) for f in futures]
    finally:
        stop.set()
        checker.join()

    assert problems == []
    assert rounds[0] > 0
    assert [r["unexpected"] for r in results] == [[]] * WORKERS
    created = [request_id for r in results for request_id in r["created"]]
    assert len(created) == len(set(created)) > WORKERS
    with create_sql_engine(rm_url).connect() as conn:
        assert _check(conn) == []
        statuses = dict(conn.execute(sa.select(t.requests.c.id, t.requests.c.status)).all())
    legal = {status.value for status in ResourceRequestStatus}
    assert all(str(key) in {str(k) for k in statuses} for key in created)  # none lost
    assert {statuses[k] for k in statuses} <= legal
    for index in range(concurrency_worker.SHARED_KEYS):  # one request per shared key
        assert len({r["shared"][index] for r in results}) == 1
    assert len(statuses) == len(created) + concurrency_worker.SHARED_KEYS
    rm.sweep()  # the service still works after the storm
    with create_sql_engine(rm_url).connect() as conn:
        reasons = list(conn.execute(sa.select(t.requests.c.status_reason)).scalars())
    assert LEASE_EXPIRED in reasons or LEASE_EXPIRED_WHILE_PENDING in reasons  # leases lapsed
