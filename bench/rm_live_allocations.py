"""Benchmark: what one scheduling event costs as the number of live allocations grows.

Issue 4's service: every create, release or cancel runs a scheduling transaction, and a
cluster may hold thousands of allocations while steps come and go. Per backend (a fresh
SQLite file, or a throw-away PostgreSQL database), the in-process service with one pool
(unlimited CPU) and one policy: for each ``--live`` value, requests are created (64 threads,
so they combine into batches) until that many hold an allocation; then one caller alone
creates a request (it fits, so its own transaction admits it) and releases it, ``--pairs``
times. Figures per live count: wall time per create+release pair (p50, p99) and the process's
CPU time per pair. Writes ``bench/results/rm_live_allocations.json``.

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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from rest_server import database
from rm_service import ADMIN, USER, percentile

from wharf.core.enums import ResourceRequestStatus as S
from wharf.resource_manager.client.models import ResourceRequestCreate
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


def measure(backend: str, live_counts: list[int], pairs: int) -> list[dict[str, Any]]:
    rows = []
    with database(backend) as url, ResourceManagerService.open(url) as rm:
        rm.pools.create(
            ADMIN,
            {
                "name": "cluster",
                "classes": [
                    {"name": "cpu", "capacity": {"CPU": None}, "reclaimable": "coordinated"}
                ],
            },
        )
        rm.policies.create(
            ADMIN,
            {"name": "all", "pool": "cluster", "subject_selector": {"subject_type": "project"}},
        )
        requests = rm.requests
        live = 0
        for target in sorted(live_counts):
            with ThreadPoolExecutor(64) as pool:
                held = list(
                    pool.map(
                        lambda i: requests.create(USER, spec(f"held-{i}")), range(live, target)
                    )
                )
            assert all(info.status is S.ALLOCATED for info in held)
            live = target
            for i in range(10):  # warm-up
                requests.release(USER, requests.create(USER, spec(f"warm-{target}-{i}")).id)
            walls = []
            cpu_began = time.process_time()
            for i in range(pairs):
                began = time.perf_counter()
                info = requests.create(USER, spec(f"pair-{target}-{i}"))
                assert info.status is S.ALLOCATED
                requests.release(USER, info.id)
                walls.append(time.perf_counter() - began)
            cpu = time.process_time() - cpu_began
            row = {
                "backend": backend,
                "live": target,
                "pairs": pairs,
                "pair_ms_p50": round(1000 * statistics.median(walls), 2),
                "pair_ms_p99": round(1000 * percentile(walls, 0.99), 2),
                "cpu_ms_per_pair": round(1000 * cpu / pairs, 2),
            }
            print(
                f"{backend:10s} {target:7d} live: create+release p50 {row['pair_ms_p50']:7.2f} ms, "
                f"p99 {row['pair_ms_p99']:7.2f} ms, CPU {row['cpu_ms_per_pair']:7.2f} ms",
                flush=True,
            )
            rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--backends", nargs="+", default=["sqlite", "postgresql"])
    parser.add_argument("--live", type=int, nargs="+", default=[10, 1000, 3000, 10000])
    parser.add_argument("--pairs", type=int, default=100)
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    load_before = os.getloadavg()
    rows = [row for backend in args.backends for row in measure(backend, args.live, args.pairs)]
    result = {
        "benchmark": "rm_live_allocations",
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_average": {"before": load_before, "after": os.getloadavg()},
        "rows": rows,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2))
    print(f"load average (1/5/15 min) before {load_before}, after {os.getloadavg()}")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
