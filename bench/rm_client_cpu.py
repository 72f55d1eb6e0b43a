"""Benchmark: the CPU one ``HttpResourceManager`` call costs the *client* (issue 4 §10).

The client and the RM share this machine's cores, so the client's CPU per call caps how many
calls per second Wharf's own callers get. One thread, one keep-alive connection, against
``wharf resource-manager serve`` on a fresh SQLite file (see ``bench/rm_http.py``): per
operation, the calling thread's CPU time per call (``time.thread_time``: user + system, this
thread only, so the server's work barely counts) and the wall time per call, over ``--calls``
calls after ``--warmup`` unmeasured ones, split in ``--rounds`` rounds: the best round is the
one other load on the machine disturbed least. Operations: renew a held lease (lease 1 h,
runtime state running), renew ``--batch`` held leases in one bulk call (``renew_many``; its
figures also per lease), create (allocated at once) then release, get one request, list the
pools. Writes ``bench/results/rm_client_cpu.json``.

    python bench/rm_client_cpu.py [--calls 3000] [--warmup 300] [--leases 200] [--rounds 10]
                                  [--batch 100]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from rm_http import ADMIN_KEY, LEASE, database, serve, spec

from wharf.core.enums import ResourceRequestRuntimeState as RuntimeState
from wharf.core.enums import ResourceRequestStatus as Status
from wharf.resource_manager.client.http import HttpResourceManager
from wharf.resource_manager.contract.models import (
    RenewalItem,
    ResourceRequestCreate,
    ResourceRequestInfo,
)

RESULTS = Path(__file__).parent / "results" / "rm_client_cpu.json"


def per_call(
    operation: Callable[[int], None], calls: int, warmup: int, rounds: int
) -> dict[str, float]:
    """Per-call figures of the best and the median of ``rounds`` rounds: the best round is
    the one other load on the machine disturbed least."""
    for index in range(warmup):
        operation(index)
    size = max(1, calls // rounds)
    cpus, walls = [], []
    for _ in range(rounds):
        cpu, wall = time.thread_time(), time.perf_counter()
        for index in range(size):
            operation(index)
        cpus.append((time.thread_time() - cpu) * 1000 / size)
        walls.append((time.perf_counter() - wall) * 1000 / size)
    return {
        "client_cpu_ms_per_call_best": round(min(cpus), 4),
        "client_cpu_ms_per_call_median": round(statistics.median(cpus), 4),
        "wall_ms_per_call_median": round(statistics.median(walls), 4),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--warmup", type=int, default=300)
    parser.add_argument("--leases", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--batch", type=int, default=100, help="leases per bulk renewal")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    load_before = os.getloadavg()
    rows: dict[str, Any] = {}
    with (
        database("sqlite") as db_url,
        serve(db_url, 1) as (url, _, _),
        HttpResourceManager(url, api_key=ADMIN_KEY, timeout=60) as rm,
    ):
        held_spec = ResourceRequestCreate.model_validate(spec(0, LEASE))
        cycle_spec = ResourceRequestCreate.model_validate(spec(1, 60))
        held = [rm.requests.create(held_spec).id for _ in range(args.leases)]

        def renew(index: int) -> None:
            answer = rm.requests.renew(held[index % len(held)], LEASE, RuntimeState.RUNNING)
            assert answer.status is Status.ALLOCATED, answer.status

        items = [
            RenewalItem(id=request_id, lease_seconds=LEASE, runtime_state=RuntimeState.RUNNING)
            for request_id in held
        ]

        def renew_many(index: int) -> None:
            start = index * args.batch % len(items)
            batch = (items * 2)[start : start + args.batch]
            for answer in rm.requests.renew_many(batch):
                assert isinstance(answer, ResourceRequestInfo), answer
                assert answer.status is Status.ALLOCATED, answer.status

        def cycle(index: int) -> None:
            created = rm.requests.create(cycle_spec)
            released = rm.requests.release(created.id)
            assert (created.status, released.status) == (Status.ALLOCATED, Status.RELEASED)

        def get(index: int) -> None:
            rm.requests.get(held[index % len(held)])

        def list_pools(index: int) -> None:
            rm.pools.list()

        operations = {
            "renew": renew,
            f"renew_many({args.batch})": renew_many,
            "create+release": cycle,
            "get": get,
            "pools.list": list_pools,
        }
        for name, operation in operations.items():
            bulk = operation is renew_many
            calls, warmup = (
                (max(args.rounds, args.calls // args.batch), max(1, args.warmup // args.batch))
                if bulk
                else (args.calls, args.warmup)
            )
            rows[name] = per_call(operation, calls, warmup, args.rounds)
            if bulk:  # the same figures per lease renewed
                rows[name].update(
                    {f"{k}_per_lease": round(v / args.batch, 4) for k, v in rows[name].items()}
                )
            print(f"{name}: {rows[name]}", flush=True)
    result = {
        "benchmark": "rm_client_cpu",
        "command": "python bench/rm_client_cpu.py "
        + " ".join(sys.argv[1:] if argv is None else argv),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_average": {"before": load_before, "after": os.getloadavg()},
        "operations": rows,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
