"""Benchmark: creating requests one after another into a deep queue (issue 4).

Every creation runs a scheduling transaction. In a full pool each new request queues behind
every waiting one; a full cycle walks the whole queue, so a burst of N creations costs in
proportion to N squared. Per backend (a fresh SQLite file, or a throw-away PostgreSQL
database): the in-process service, one pool of ``--slots`` CPUs (one per request) and one
policy; ``--slots`` requests take the pool, then one caller creates ``--requests`` more, one
at a time (each waits). Figures: p50 ms per creation over each fifth of the run (the queue
grows from 0 to ``--requests``), and the process's CPU per creation over the whole run; then
``--releases`` releases one after another, each admitting the head of the queue (a full cycle
over it): p50 ms and CPU per release. Writes ``bench/results/rm_deep_queue.json``.

    python bench/rm_deep_queue.py [--backends sqlite postgresql] [--requests 2000] [--slots 10]
                                  [--releases 100]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path
from typing import Any

from rest_server import database
from rm_live_allocations import spec, write_rows
from rm_service import ADMIN, USER

from wharf.core.enums import ResourceRequestStatus as S
from wharf.resource_manager.service import ResourceManagerService

RESULTS = Path(__file__).parent / "results" / "rm_deep_queue.json"
PARTS = 5


def measure(backend: str, requests: int, slots: int, releases: int) -> dict[str, Any]:
    with database(backend) as url, ResourceManagerService.open(url) as rm:
        rm.pools.create(
            ADMIN,
            {
                "name": "cluster",
                "classes": [{"name": "cpu", "capacity": {"CPU": str(slots)}}],
            },
        )
        rm.policies.create(
            ADMIN,
            {"name": "all", "pool": "cluster", "subject_selector": {"subject_type": "project"}},
        )
        held = [rm.requests.create(USER, spec(f"held-{i}")) for i in range(slots)]
        assert all(info.status is S.ALLOCATED for info in held)
        specs = [spec(f"queued-{i}") for i in range(requests)]
        walls = []
        cpu_began = time.process_time()
        queued = []
        for made in specs:
            began = time.perf_counter()
            info = rm.requests.create(USER, made)
            walls.append(time.perf_counter() - began)
            assert info.status is S.PENDING
            queued.append(info.id)
        cpu = time.process_time() - cpu_began
        # Then each release admits the head of the (still deep) queue: a full cycle each.
        holding = [info.id for info in held] + queued[:releases]
        release_walls = []
        cpu_began = time.process_time()
        for request_id in holding[:releases]:
            began = time.perf_counter()
            rm.requests.release(USER, request_id)
            release_walls.append(time.perf_counter() - began)
        release_cpu = time.process_time() - cpu_began
    size = max(1, len(walls) // PARTS)
    parts = [walls[i * size : (i + 1) * size] for i in range(PARTS)]
    row = {
        "backend": backend,
        "requests": requests,
        "slots": slots,
        "create_ms_p50_by_fifth": [round(1000 * statistics.median(p), 2) for p in parts if p],
        "cpu_ms_per_create": round(1000 * cpu / requests, 3),
        "releases": releases,
        "release_ms_p50": round(1000 * statistics.median(release_walls), 2),
        "cpu_ms_per_release": round(1000 * release_cpu / releases, 3),
    }
    print(
        f"{backend:10s} {requests} creations into a full pool: p50 ms per fifth "
        f"{' / '.join(f'{v:.2f}' for v in row['create_ms_p50_by_fifth'])}, "
        f"CPU {row['cpu_ms_per_create']:.2f} ms per creation; then {releases} releases "
        f"(each admits the head): p50 {row['release_ms_p50']:.2f} ms, "
        f"CPU {row['cpu_ms_per_release']:.2f} ms",
        flush=True,
    )
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--backends", nargs="+", default=["sqlite", "postgresql"])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--slots", type=int, default=10)
    parser.add_argument("--releases", type=int, default=100)
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    load_before = os.getloadavg()
    rows = [measure(backend, args.requests, args.slots, args.releases) for backend in args.backends]
    write_rows("rm_deep_queue", rows, args.output, load_before)


if __name__ == "__main__":
    main()
