"""Benchmark: what one lease renewal costs the Resource Manager service in-process (issue 4).

One caller, no concurrency: the price of a single heartbeat's renewal inside the service,
without HTTP. Per backend (a fresh SQLite file, where renewals run in a scheduling transaction
as in embedded mode; a throw-away PostgreSQL database, where they run in the renewal runner),
one request is created (allocated) and renewed ``--renewals`` times (lease 1 h, runtime state
running), after ``--warmup`` unmeasured renewals; then again with a fresh idempotency key on
every renewal (as a single HTTP call through Wharf's client carries one). Figures: wall and CPU
(this process) per renewal, best of ``--rounds`` rounds (the round other load disturbed least).
Writes ``bench/results/rm_renewal_cost.json``.

    python bench/rm_renewal_cost.py [--backends sqlite postgresql] [--renewals 1500]
                                    [--warmup 200] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rest_server import database
from rm_service import USER, configure, make_request

from wharf.core.enums import ResourceRequestRuntimeState
from wharf.resource_manager.embedded.inprocess import InProcessResourceManager
from wharf.resource_manager.service import ResourceManagerService

RESULTS = Path(__file__).parent / "results" / "rm_renewal_cost.json"
RUNNING = ResourceRequestRuntimeState.RUNNING


def timed(call: Callable[[], Any], count: int, rounds: int) -> dict[str, float]:
    best: tuple[float, float] | None = None
    for _ in range(rounds):
        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(count):
            call()
        figures = (
            (time.perf_counter() - wall) * 1000 / count,
            (time.process_time() - cpu) * 1000 / count,
        )
        if best is None or figures[1] < best[1]:
            best = figures
    assert best is not None
    return {"wall_ms": round(best[0], 3), "cpu_ms": round(best[1], 3)}


def measure(backend: str, renewals: int, warmup: int, rounds: int) -> dict[str, Any]:
    with database(backend) as url, ResourceManagerService.open(url) as rm:
        configure(rm, random.Random(4))
        client = InProcessResourceManager(rm, USER)
        held = client.requests.create(make_request(random.Random(1), 1)[0])
        assert held.status.value == "allocated", held.status

        def plain() -> None:
            rm.requests.renew(USER, held.id, 3600, RUNNING)

        def keyed() -> None:
            rm.requests.renew(USER, held.id, 3600, RUNNING, idempotency_key=uuid.uuid4().hex)

        for _ in range(warmup):
            plain()
            keyed()
        return {
            "backend": backend,
            "renewal": timed(plain, renewals, rounds),
            "renewal_with_key": timed(keyed, renewals, rounds),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", nargs="+", default=["sqlite", "postgresql"])
    parser.add_argument("--renewals", type=int, default=1500)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    rows = []
    for backend in args.backends:
        row = measure(backend, args.renewals, args.warmup, args.rounds)
        rows.append(row)
        print(
            f"{backend:10}  renewal: wall {row['renewal']['wall_ms']:.3f} ms, CPU "
            f"{row['renewal']['cpu_ms']:.3f} ms   with a key: wall "
            f"{row['renewal_with_key']['wall_ms']:.3f} ms, CPU "
            f"{row['renewal_with_key']['cpu_ms']:.3f} ms"
        )
    result = {
        "benchmark": "rm_renewal_cost",
        "command": "python bench/rm_renewal_cost.py " + " ".join(sys.argv[1:]),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg(),
        "rows": rows,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
