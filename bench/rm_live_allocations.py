"""Benchmark: what one scheduling event costs as the number of live allocations grows.

Issue 4's service: every create, release or cancel runs a scheduling transaction, and a
cluster may hold thousands of allocations while steps come and go. Per backend (a fresh
SQLite file, or a throw-away PostgreSQL database, for each case), the in-process service with
one pool (one CPU per request) and one policy: requests are created (64 threads, so they
combine into batches) until ``--live`` of them hold an allocation; then one caller alone runs
``--pairs`` create + release pairs, in two pools:

- ``free`` (unlimited CPU): the create fits, so its own transaction admits it, and the caller
  releases it;
- ``full`` (exactly ``--live`` CPU, and one request already waiting): the create queues behind
  the blocked head, whose preemption is considered in every cycle (nothing may be preempted:
  one policy), and the caller then releases one of the held requests, which admits the head.

Figures per case: wall time per pair (p50, p99) and the process's CPU time per pair. Writes
``bench/results/rm_live_allocations.json``.

    python bench/rm_live_allocations.py [--backends sqlite postgresql] [--live 10 1000 3000 10000]
                                        [--pairs 100]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from uuid import UUID

from rest_server import database
from rm_service import ADMIN, USER, percentile

from wharf.core.enums import ResourceRequestStatus as S
from wharf.resource_manager.contract.models import ResourceRequestCreate
from wharf.resource_manager.service import ResourceManagerService

RESULTS = Path(__file__).parent / "results" / "rm_live_allocations.json"


def spec(name: str) -> ResourceRequestCreate:
    return ResourceRequestCreate.model_validate(
        {
            "subjects": [
                {
                    "nodes": [
                        {"subject_type": "project", "subject_id": "p0"},
                        {"subject_type": "step_run", "subject_id": name},
                    ]
                }
            ],
            "demands": [{"kind": "cpu", "quantity": 1, "unit": "CPU"}],
            "reclaim_tolerance": "coordinated",
            "lease_seconds": 3600,
        }
    )


def measure(backend: str, live: int, pairs: int, full: bool) -> dict[str, Any]:
    """One database: ``live`` allocations held, then ``pairs`` create + release pairs."""
    capacity = str(live) if full else None
    with database(backend) as url, ResourceManagerService.open(url) as rm:
        rm.pools.create(
            ADMIN,
            {
                "name": "cluster",
                "classes": [
                    {"name": "cpu", "capacity": {"CPU": capacity}, "reclaimable": "coordinated"}
                ],
            },
        )
        rm.policies.create(
            ADMIN,
            {"name": "all", "pool": "cluster", "subject_selector": {"subject_type": "project"}},
        )
        requests = rm.requests
        with ThreadPoolExecutor(64) as pool:
            held = list(pool.map(lambda i: requests.create(USER, spec(f"held-{i}")), range(live)))
        assert all(info.status is S.ALLOCATED for info in held)
        holding = deque(info.id for info in held)
        waiting: deque[UUID] = deque()
        if full:
            # A blocked head: every pair's create queues behind it, every release admits it
            # (and the next pair's create becomes the head).
            head = requests.create(USER, spec("head"))
            assert head.status is S.PENDING
            waiting.append(head.id)
        walls = []
        cpu_began = time.process_time()
        for i in range(pairs):
            began = time.perf_counter()
            info = requests.create(USER, spec(f"pair-{i}"))
            if full:
                assert info.status is S.PENDING
                waiting.append(info.id)
                requests.release(USER, holding.popleft())
                holding.append(waiting.popleft())  # admitted by that release
            else:
                assert info.status is S.ALLOCATED
                requests.release(USER, info.id)
            walls.append(time.perf_counter() - began)
        cpu = time.process_time() - cpu_began
    row = {
        "backend": backend,
        "pool": "full" if full else "free",
        "live": live,
        "pairs": pairs,
        "pair_ms_p50": round(1000 * statistics.median(walls), 2),
        "pair_ms_p99": round(1000 * percentile(walls, 0.99), 2),
        "cpu_ms_per_pair": round(1000 * cpu / pairs, 2),
    }
    print(
        f"{backend:10s} {row['pool']} pool, {live:6d} live: create+release p50 "
        f"{row['pair_ms_p50']:7.2f} ms, p99 {row['pair_ms_p99']:7.2f} ms, "
        f"CPU {row['cpu_ms_per_pair']:7.2f} ms",
        flush=True,
    )
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--backends", nargs="+", default=["sqlite", "postgresql"])
    parser.add_argument("--live", type=int, nargs="+", default=[10, 1000, 3000, 10000])
    parser.add_argument("--pairs", type=int, default=100)
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    load_before = os.getloadavg()
    rows = [
        measure(backend, live, args.pairs, full)
        for backend in args.backends
        for full in (False, True)
        for live in args.live
    ]
    write_rows("rm_live_allocations", rows, args.output, load_before)


def write_rows(
    benchmark: str, rows: list[dict[str, Any]], output: Path, load_before: tuple[float, ...]
) -> None:
    """Write ``rows`` with the machine's facts as ``output`` (JSON) and say so."""
    result = {
        "benchmark": benchmark,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_average": {"before": load_before, "after": os.getloadavg()},
        "rows": rows,
    }
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(result, indent=2))
    print(f"load average (1/5/15 min) before {load_before}, after {os.getloadavg()}")
    print(f"wrote {output}")


if __name__ == "__main__":
    main()
