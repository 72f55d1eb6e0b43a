"""Benchmark: the Resource Manager service in-process, on SQLite and on PostgreSQL.

Issue 4 §10: 15,000 requests with random priorities and durations; admissions per second and
time-to-admit p50/p99 for requests that fit free capacity (goal: >= 2,000 admissions/s and
p99 <= 50 ms). Writes ``bench/results/rm_service.json``.

Scenario (seeded):
- 2 pools, each with a ``cpu`` class (256 CPU, 1 TiB) and a ``gpu`` class (32 GPU, 256 CPU,
  2 TiB), both coordinated-reclaimable; 40 policies: each of 20 projects has a policy in both
  pools, with random priorities (0-100);
- 15,000 requests from random projects: 80 % CPU + memory (1-4 CPU, 2-16 GiB), 20 % GPU
  (1-2 GPU + 8 CPU + 32 GiB), random reclaim tolerance, lease 60 s, held for a random 2-40 ms
  after admission, then released. Capacity is sized so that requests fit free capacity (the
  goal's case); the few that do not wait and are reported apart;
- ``--clients`` callers, each: create -> (if pending: poll by renewing, as the engine does) ->
  hold -> release. ``--callers threads`` (default): one thread each, as an engine's steps
  call the embedded service; ``--callers async``: coroutines on one event loop calling the
  service's ``*_async`` methods, as the API server does (a combiner thread runs their
  batches, so no thread per caller). The service combines concurrent calls into one transaction + one cycle, so more callers mean
  bigger batches: the run is repeated for each ``--clients`` value to show the trade-off
  between throughput and latency. Before each run the harness freezes its own prepared
  requests out of the cyclic GC (``gc.freeze``), so full collections do not scan them.

Figures:
- ``admissions_per_s``: admitted requests / wall time of the run;
- ``fit_ms`` p50/p99: wall time of ``create`` for requests that came back allocated (they fit
  free capacity: the create's own cycle admitted them);
- ``queued_ms`` p50/p99: creation to observed allocation for the others (depends on holders);
- ``sequential_ms`` p50/p99: one caller alone, create of a fitting request (no combining);
- ``cpu_ms_per_admission``: CPU time of this process (service and callers) per admission, a
  figure that other load on the machine disturbs much less than wall-clock throughput;
  ``busy_cores`` is that CPU over the run's wall time (below 1 on PostgreSQL while the
  combining thread waits for its transaction's round trips and nobody else has work);
  ``sys_ms_per_admission`` is its kernel part, and ``switches_per_admission`` the voluntary
  and involuntary context switches of the process per admission (thread wake-ups and GIL
  hand-overs show there, whatever else runs on the machine).

``--single-thread`` instead drives the service's batch runner directly from one thread (no
callers, no combining, no thread hand-overs): each transaction creates ``--per-transaction``
requests (25) and releases as many admitted ones, until ``--requests`` were created; it reports
CPU and wall time per admission and wall time per transaction, the steadiest figures to compare
two versions of the service's SQL on a busy machine. ``--per-transaction 2 --keys`` (every call
with an idempotency key, as Wharf's HTTP client sends them) is the shape of the API server's
batches, whose cost is mostly per transaction (round trips). It reaches into the service's
private batch runner (``requests._runner``), so it follows its changes.

Usage: ``python bench/rm_service.py [--requests 15000] [--clients 64 128 192] [--backends sqlite
postgresql] [--single-thread [--per-transaction 25] [--keys]]``; PostgreSQL from
``WHARF_BENCH_POSTGRES_URL`` (default ``postgresql://postgres@127.0.0.1:5432/test``; a
throw-away database is created and dropped).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import json
import os
import platform
import random
import resource
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from host_speed import host_figures
from rest_server import database

from wharf.core.enums import ResourceRequestStatus as S
from wharf.resource_manager.contract.models import ResourceRequestCreate
from wharf.resource_manager.embedded.inprocess import InProcessResourceManager
from wharf.resource_manager.service import Principal, ResourceManagerService
from wharf.resource_manager.service.idempotency import IdempotencyKey
from wharf.resource_manager.service.request_ops import ReleaseRequest
from wharf.resource_manager.service.transaction import Operation

RESULTS = Path(__file__).parent / "results" / "rm_service.json"
ADMIN = Principal("bench-admin", admin=True)
USER = Principal("bench-user", asserts_subjects=True)  # names its projects, as the server does
PROJECTS = 20


def configure(rm: ResourceManagerService, rng: random.Random) -> None:
    for pool in ("cluster-a", "cluster-b"):
        rm.pools.create(
            ADMIN,
            {
                "name": pool,
                "classes": [
                    {
                        "name": "cpu",
                        "capacity": {"CPU": "256", "memory": "1TiB"},
                        "reclaimable": "coordinated",
                    },
                    {
                        "name": "gpu",
                        "capacity": {"GPU": 32, "CPU": "256", "memory": "2TiB"},
                        "reclaimable": "coordinated",
                        "rank": -1,
                    },
                ],
            },
        )
    for index in range(PROJECTS):
        rm.policies.create(
            ADMIN,
            {
                "name": f"project-{index}",
                "pool": "cluster-a" if index % 2 else "cluster-b",
                "priority": rng.randint(0, 100),
                "subject_selector": {"subject_type": "project", "subject_id": f"p{index}"},
            },
        )
        rm.policies.create(
            ADMIN,
            {
                "name": f"project-{index}-spill",
                "pool": "cluster-b" if index % 2 else "cluster-a",
                "priority": rng.randint(0, 100),
                "subject_selector": {"subject_type": "project", "subject_id": f"p{index}"},
            },
        )


def make_request(rng: random.Random, index: int) -> tuple[ResourceRequestCreate, float]:
    if rng.random() < 0.2:
        demands: list[dict[str, Any]] = [
            {"resource": "GPU", "quantity": rng.randint(1, 2), "class": "gpu"},
            {"kind": "cpu", "quantity": 8, "unit": "CPU", "class": "gpu"},
            {"kind": "memory", "quantity": 32, "unit": "GiB", "class": "gpu"},
        ]
    else:
        demands = [
            {"kind": "cpu", "quantity": rng.randint(1, 4), "unit": "CPU"},
            {"kind": "memory", "quantity": rng.choice([2, 4, 8, 16]), "unit": "GiB"},
        ]
    spec = ResourceRequestCreate.model_validate(
        {
            "subjects": [
                {
                    "nodes": [
                        {"subject_type": "project", "subject_id": f"p{rng.randrange(PROJECTS)}"},
                        {"subject_type": "step_run", "subject_id": f"step-{index}"},
                    ]
                }
            ],
            "demands": demands,
            "reclaim_tolerance": rng.choice(["coordinated", "any"]),
            "lease_seconds": 60,
        }
    )
    return spec, rng.uniform(0.002, 0.040)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run_load(
    rm: ResourceManagerService, count: int, clients: int, seed: int, callers: str = "threads"
) -> dict[str, Any]:
    rng = random.Random(seed)
    workload = [make_request(rng, i) for i in range(count)]
    client = InProcessResourceManager(rm, USER)
    counter = itertools.count()
    fit: list[float] = []
    queued: list[float] = []
    lock = threading.Lock()
    failures: list[str] = []

    def admitted_as(info: Any, start: float, created: float, fitted: bool) -> bool:
        """Record one admission's latency; False (and a failure) if it was not admitted."""
        admitted = time.perf_counter()
        if info.status not in (S.ALLOCATED, S.PREEMPTING):
            with lock:
                failures.append(f"{info.id}: {info.status} {info.status_reason}")
            return False
        with lock:
            if fitted:
                fit.append(created - start)
            else:
                queued.append(admitted - start)
        return True

    def caller() -> None:
        while (index := next(counter)) < count:
            spec, hold = workload[index]
            start = time.perf_counter()
            info = client.requests.create(spec)
            created = time.perf_counter()
            fitted = info.status is S.ALLOCATED
            backoff = 0.002
            while info.status is S.PENDING:
                time.sleep(backoff)
                backoff = min(backoff * 2, 0.05)
                info = client.requests.renew(info.id, 60)
            if not admitted_as(info, start, created, fitted):
                continue
            time.sleep(hold)
            client.requests.release(info.id)

    async def async_caller() -> None:
        # The API server's way in: its event loop submits, a combiner thread runs the batches.
        requests = rm.requests
        while (index := next(counter)) < count:
            spec, hold = workload[index]
            start = time.perf_counter()
            info = await requests.create_async(USER, spec)
            created = time.perf_counter()
            fitted = info.status is S.ALLOCATED
            backoff = 0.002
            while info.status is S.PENDING:
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 0.05)
                info = await requests.renew_async(USER, info.id, 60)
            if not admitted_as(info, start, created, fitted):
                continue
            await asyncio.sleep(hold)
            await requests.release_async(USER, info.id)

    async def async_callers() -> None:
        await asyncio.gather(*(async_caller() for _ in range(clients)))

    threads = [
        threading.Thread(target=caller) for _ in range(clients if callers == "threads" else 0)
    ]
    # The 15,000 prepared requests are the harness's, not the service's: keep full collections
    # from scanning them (a gen-2 pass over them stalls every thread for ~100 ms).
    gc.collect()
    gc.freeze()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu_began = time.process_time()
    began = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if callers == "async":
        asyncio.run(async_callers())
    wall = time.perf_counter() - began
    cpu = time.process_time() - cpu_began
    after = resource.getrusage(resource.RUSAGE_SELF)
    gc.unfreeze()
    admitted = len(fit) + len(queued)
    return {
        "requests": count,
        "clients": clients,
        "callers": callers,
        "wall_s": round(wall, 2),
        "admitted": admitted,
        "admissions_per_s": round(admitted / wall),
        "fit": len(fit),
        "fit_ms_p50": round(percentile(fit, 0.50) * 1000, 2),
        "fit_ms_p99": round(percentile(fit, 0.99) * 1000, 2),
        "queued": len(queued),
        "queued_ms_p50": round(percentile(queued, 0.50) * 1000, 2),
        "queued_ms_p99": round(percentile(queued, 0.99) * 1000, 2),
        "not_admitted": len(failures),
        "cpu_ms_per_admission": round(cpu * 1000 / max(1, admitted), 3),
        "busy_cores": round(cpu / wall, 2),
        "sys_ms_per_admission": round(
            (after.ru_stime - usage.ru_stime) * 1000 / max(1, admitted), 3
        ),
        "switches_per_admission": [
            round((after.ru_nvcsw - usage.ru_nvcsw) / max(1, admitted), 1),
            round((after.ru_nivcsw - usage.ru_nivcsw) / max(1, admitted), 1),
        ],
    }


def run_sequential(rm: ResourceManagerService, count: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed + 1)
    client = InProcessResourceManager(rm, USER)
    latencies: list[float] = []
    for index in range(count):
        spec, _ = make_request(rng, 10_000_000 + index)
        start = time.perf_counter()
        info = client.requests.create(spec)
        latencies.append(time.perf_counter() - start)
        client.requests.release(info.id)
    return {
        "requests": count,
        "sequential_ms_p50": round(percentile(latencies, 0.5) * 1000, 2),
        "sequential_ms_p99": round(percentile(latencies, 0.99) * 1000, 2),
    }


def run_single_thread(
    rm: ResourceManagerService, count: int, seed: int, per_transaction: int = 25, keys: bool = False
) -> dict[str, Any]:
    """Transactions of ``per_transaction`` creates + as many releases, one after the other on
    this thread; ``keys``: every call carries an idempotency key (as Wharf's HTTP client's do)."""
    rng = random.Random(seed)
    specs = [make_request(rng, i)[0] for i in range(count)]
    runner = rm.requests._runner  # bypasses the combiner on purpose
    held: list[uuid.UUID] = []
    admitted = 0
    gc.collect()
    gc.freeze()
    cpu_began = time.process_time()
    began = time.perf_counter()
    for start in range(0, count, per_transaction):
        operations: list[Operation] = [
            rm.requests._creation(USER, spec, f"c{start + i}" if keys else None)
            for i, spec in enumerate(specs[start : start + per_transaction])
        ]
        created = len(operations)
        operations += [
            ReleaseRequest(USER, request_id, _release_key(request_id) if keys else None)
            for request_id in held[:per_transaction]
        ]
        del held[:per_transaction]
        outcomes = runner.run_batch(operations)
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome
        for info in outcomes[:created]:
            if info.status is S.ALLOCATED:
                admitted += 1
                held.append(info.id)
    wall = time.perf_counter() - began
    cpu = time.process_time() - cpu_began
    gc.unfreeze()
    transactions = -(-count // per_transaction)
    return {
        "requests": count,
        "mode": "single-thread",
        "per_transaction": per_transaction,
        "idempotency_keys": keys,
        "wall_ms_per_transaction": round(wall * 1000 / transactions, 3),
        "admitted": admitted,
        "cpu_ms_per_admission": round(cpu * 1000 / max(1, admitted), 3),
        "wall_ms_per_admission": round(wall * 1000 / max(1, admitted), 3),
    }


def _release_key(request_id: uuid.UUID) -> IdempotencyKey | None:
    return IdempotencyKey.of(USER.name, ReleaseRequest.name, f"r{request_id}", str(request_id))


def measure(
    backend: str, count: int, clients: list[int], seed: int, callers: str
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for number in clients:
        with database(backend) as url, ResourceManagerService.open(url) as rm:
            configure(rm, random.Random(seed))
            row: dict[str, Any] = {"backend": backend}
            row.update(run_load(rm, count, number, seed, callers))
            row.update(run_sequential(rm, 500, seed))
            rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--requests", type=int, default=15_000)
    parser.add_argument("--clients", type=int, nargs="+", default=[64, 128, 192])
    parser.add_argument("--backends", nargs="+", default=["sqlite", "postgresql"])
    parser.add_argument("--seed", type=int, default=4)
    parser.add_argument("--output", type=Path, default=RESULTS)
    parser.add_argument(
        "--callers",
        choices=["threads", "async"],
        default="threads",
        help="threads (an engine's steps) or coroutines on one event loop (the API server)",
    )
    parser.add_argument("--single-thread", action="store_true")
    parser.add_argument(
        "--per-transaction", type=int, default=25, help="--single-thread: creates per transaction"
    )
    parser.add_argument(
        "--keys", action="store_true", help="--single-thread: idempotency key on every call"
    )
    args = parser.parse_args(argv)

    if args.single_thread:
        return single_thread(
            args.backends, args.requests, args.seed, args.per_transaction, args.keys
        )
    host = host_figures()
    load_before = os.getloadavg()
    rows = [
        row
        for b in args.backends
        for row in measure(b, args.requests, args.clients, args.seed, args.callers)
    ]
    load_after = os.getloadavg()
    print(
        f"Resource Manager service in-process: {args.requests} requests per run, "
        f"callers: {args.callers}"
    )
    header = (
        f"{'backend':>10} {'callers':>7} {'wall s':>7} {'admit/s':>8} {'fit':>6} {'fit p50':>8} "
        f"{'fit p99':>8} {'queued':>6} {'q p50':>8} {'q p99':>8} {'seq p50':>8} {'seq p99':>8} "
        f"{'cpu/adm':>8} {'busy':>5} {'sys/adm':>8} {'switches':>10}"
    )
    print(header)
    for row in rows:
        print(
            f"{row['backend']:>10} {row['clients']:>7} {row['wall_s']:>7} {row['admissions_per_s']:>8} "
            f"{row['fit']:>6} {row['fit_ms_p50']:>8} {row['fit_ms_p99']:>8} {row['queued']:>6} "
            f"{row['queued_ms_p50']:>8} {row['queued_ms_p99']:>8} "
            f"{row['sequential_ms_p50']:>8} {row['sequential_ms_p99']:>8} "
            f"{row['cpu_ms_per_admission']:>8} {row['busy_cores']:>5} "
            f"{row['sys_ms_per_admission']:>8} "
            f"{'/'.join(map(str, row['switches_per_admission'])):>10}"
        )
    print("(times in ms; goal: >= 2000 admissions/s and fit p99 <= 50 ms;")
    print(" switches: voluntary/involuntary context switches per admission)")
    print(f"load average (1/5/15 min) before {load_before}, after {load_after}")
    print(f"host speed before the runs: reference loop {host['reference_loop_ms']} ms")
    result = {
        "benchmark": "rm_service",
        "host": host,
        "command": "python bench/rm_service.py " + " ".join(sys.argv[1:]),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "seed": args.seed,
        "callers": args.callers,
        "load_average": {"before": load_before, "after": load_after},
        "rows": rows,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.output}")
    return 0


def single_thread(
    backends: list[str], count: int, seed: int, per_transaction: int, keys: bool
) -> int:
    load_before = os.getloadavg()
    for backend in backends:
        with database(backend) as url, ResourceManagerService.open(url) as rm:
            configure(rm, random.Random(seed))
            row = run_single_thread(rm, count, seed, per_transaction, keys)
        print(
            f"{backend:>10} single thread, {row['admitted']} admitted: "
            f"CPU {row['cpu_ms_per_admission']} ms, wall {row['wall_ms_per_admission']} ms "
            f"per admission; {per_transaction} creates + releases per transaction"
            f"{' with idempotency keys' if keys else ''}: "
            f"wall {row['wall_ms_per_transaction']} ms per transaction"
        )
    print(f"load average (1/5/15 min) before {load_before}, after {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
