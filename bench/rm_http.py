"""Benchmark: the Resource Manager over HTTP on this machine (issue 4 §10).

Goals: create+allocate+release cycles per second (>= 500/s) and lease renewals per second with
10,000 live leases (>= 2,000/s).

Per backend (a fresh SQLite file, or a throw-away PostgreSQL database) and per ``--workers``
value: ``wharf resource-manager serve --workers W`` in its own processes (uvicorn; each worker
runs its own service on the same database), one pool whose class has room for every lease (CPU
unlimited) and one policy admitting every project. Two load generators, each measured:

- ``raw``: one process, asyncio, ``--connections`` keep-alive HTTP/1.1 connections sending the
  API's requests by hand, each create and release with its own idempotency key (as Wharf's
  client sends them; renewals without, as the workspace server's coalesced heartbeat renewals
  go): it costs the machine little, so it shows what the *server* sustains;
- ``client``: ``--clients`` processes x ``--threads`` threads over one
  :class:`HttpResourceManager` each (login, token cache, idempotency key per call, model
  parsing): what Wharf's own callers get, the client's CPU included, on the same 2 cores;
  renewals one per HTTP call (``renew``). The default, 32 threads per process, keeps as many
  calls in flight as the raw generator's connections: a throughput figure needs the machine
  kept busy, and with 8 callers each waiting for its answer (a PostgreSQL commit waits for
  its WAL flush) it measures latency (PostgreSQL cycles: 31 % of both cores idle in
  ``vmstat`` with 8 threads, 20 % with 32);
- ``bulk`` (renewals only): the same processes and threads, each call renewing
  ``--batch`` leases at once (``renew_many``, ``POST /v1/resource-requests/renew``);
- ``coalesced`` (renewals only): ``--clients`` processes x ``--callers`` threads, each renewing
  one lease per call through the workspace server's :class:`RenewalCoalescer` over one client
  (as heartbeats do in production): concurrent renewals go out as bulk calls. Latency is per
  renewal for every load; ``renewals_per_s`` counts leases renewed, not HTTP calls.

Phases: cycles — create (1 CPU, lease 60 s; it fits, so it comes back allocated from the
create's own scheduling transaction) then release, for ``--seconds``; renewals — ``--leases``
requests are created and held (allocated, lease 1 h), then renewed round-robin (lease 1 h,
runtime state running) for ``--seconds``. Every answer is checked (allocated / released /
still allocated). Figures: operations per second, per-operation latency p50/p99 (ms), the
server processes' CPU time per operation (``server_cpu_ms_per_op``, from ``/proc``) and the load
generator's (``client_cpu_ms_per_op``: the raw generator's process, or the client processes
summed, over the measured window); other load on the machine disturbs the CPU figures far less
than throughput. Writes ``bench/results/rm_http.json``.

    python bench/rm_http.py [--backends sqlite postgresql] [--workers 1 2] [--seconds 10]
                            [--leases 10000] [--connections 32] [--clients 3] [--threads 32]
                            [--batch 100] [--callers 64] [--phases cycles renewals]
                            [--loads raw client bulk coalesced]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing as mp
import os
import platform
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import httpx
from host_speed import host_figures
from rest_server import database, free_port, process_tree_cpu_seconds

from wharf.core.enums import ResourceRequestRuntimeState as RuntimeState
from wharf.core.enums import ResourceRequestStatus as Status
from wharf.resource_manager.client.http import HttpResourceManager
from wharf.resource_manager.contract.models import (
    PolicyCreate,
    PoolCreate,
    RenewalItem,
    ResourceRequestCreate,
    ResourceRequestInfo,
)
from wharf.server.resource_manager import RenewalCoalescer

ADMIN_KEY = "bench-admin-key-" + "k" * 24
GOALS = {"cycles_per_s": 500, "renewals_per_s": 2000}
RESULTS = Path(__file__).parent / "results" / "rm_http.json"
REQUESTS = "/v1/resource-requests"
LEASE = 3600


def spec(index: int, lease: int) -> dict[str, Any]:
    return {
        "subjects": [{"nodes": [{"subject_type": "project", "subject_id": f"p{index % 50}"}]}],
        "demands": [{"resource": "CPU", "quantity": 1}],
        "lease_seconds": lease,
    }


# ----------------------------------------------------------------------------- server


@contextlib.contextmanager
def serve(db_url: str, workers: int) -> Iterator[tuple[str, int, int]]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as home:
        env = {k: v for k, v in os.environ.items() if not k.startswith("WHARF_")}
        env.update(WHARF_HOME=home, WHARF_RM_ADMIN_API_KEY=ADMIN_KEY)
        command = [sys.executable, "-m", "wharf.cli.main", "resource-manager", "serve"]
        command += ["--port", str(port), "--db-url", db_url, "--workers", str(workers)]
        command += ["--log-level", "warning"]
        process = subprocess.Popen(command, env=env, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 60
            while True:
                with contextlib.suppress(httpx.TransportError):
                    if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                        break
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the RM server did not start")
                time.sleep(0.2)
            with HttpResourceManager(url, api_key=ADMIN_KEY) as rm:
                pool = {"name": "bench", "classes": [{"name": "cpu", "capacity": {"CPU": None}}]}
                rm.pools.create(PoolCreate.model_validate(pool))
                selector = {"subject_type": "project"}
                policy = {"name": "all", "pool": "bench", "subject_selector": selector}
                rm.policies.create(PolicyCreate.model_validate(policy))
            yield url, port, process.pid
        finally:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()


# ----------------------------------------------------------------------------- raw load


class RawConnection:
    """One keep-alive HTTP/1.1 connection speaking just enough of the protocol."""

    def __init__(self, port: int, token: str) -> None:
        self.port, self.head = port, f"Host: bench\r\nAuthorization: Bearer {token}\r\n"

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)

    async def call(self, method: str, path: str, body: bytes = b"", key: str = "") -> Any:
        head = f"{method} {path} HTTP/1.1\r\n{self.head}Content-Length: {len(body)}\r\n"
        if key:  # as Wharf's client sends on every mutating call
            head += f"X-Idempotency-Key: {key}\r\n"
        if body:
            head += "Content-Type: application/json\r\n"
        self.writer.write(head.encode() + b"\r\n" + body)
        status = await self.reader.readline()
        length = 0
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            if line[:15].lower() == b"content-length:":
                length = int(line[15:])
        payload = await self.reader.readexactly(length)
        if not status.startswith(b"HTTP/1.1 20"):
            raise RuntimeError(f"{method} {path}: {status!r} {payload[:300]!r}")
        return json.loads(payload)


def raw_token(url: str) -> str:
    return str(
        httpx.post(f"{url}/v1/auth/login", json={"api_key": ADMIN_KEY}).json()["access_token"]
    )


async def _raw(
    port: int, token: str, mode: str, connections: int, seconds: float, ids: list[str]
) -> list[float]:
    latencies: list[float] = []
    body = json.dumps(spec(0, 60)).encode()
    renewal = json.dumps({"lease_seconds": LEASE, "runtime_state": "running"}).encode()
    deadline = time.perf_counter() + seconds

    async def loop(index: int) -> None:
        conn = RawConnection(port, token)
        await conn.open()
        mine = ids[index::connections]
        position = 0
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            if mode == "cycles":
                held = await conn.call("POST", REQUESTS, body, key=uuid4().hex)
                released = await conn.call(
                    "POST", f"{REQUESTS}/{held['id']}/release", key=uuid4().hex
                )
                assert (held["status"], released["status"]) == ("allocated", "released")
            else:
                request_id = mine[position % len(mine)]
                renewed = await conn.call("POST", f"{REQUESTS}/{request_id}/renew", renewal)
                assert renewed["status"] == "allocated", renewed["status"]
                position += 1
            latencies.append(time.perf_counter() - started)
        conn.writer.close()

    await asyncio.gather(*(loop(i) for i in range(connections)))
    return latencies


async def _create_leases(port: int, token: str, count: int, connections: int) -> list[str]:
    body = json.dumps(spec(0, LEASE)).encode()
    ids: list[str] = []

    async def loop(share: int) -> None:
        conn = RawConnection(port, token)
        await conn.open()
        for _ in range(share):
            held = await conn.call("POST", REQUESTS, body)
            assert held["status"] == "allocated", held["status"]
            ids.append(held["id"])
        conn.writer.close()

    shares = [count // connections + (i < count % connections) for i in range(connections)]
    await asyncio.gather(*(loop(share) for share in shares))
    return ids


# ----------------------------------------------------------------------------- client load


def _client_process(
    url: str,
    mode: str,
    threads: int,
    seconds: float,
    ids: list[str],
    start_at: float,
    out: Any,
    variant: str = "single",
    batch: int = 1,
) -> None:
    """``threads`` threads over one HttpResourceManager, from ``start_at`` for ``seconds``.

    ``variant`` (renewals): ``single`` one renewal per call, ``bulk`` ``batch`` per call,
    ``coalesced`` one per caller through a :class:`RenewalCoalescer`."""
    rm = HttpResourceManager(url, api_key=ADMIN_KEY, timeout=60)
    rm.pools.list()  # log in before the clock starts
    body = ResourceRequestCreate.model_validate(spec(0, 60))
    latencies: list[list[float]] = [[] for _ in range(threads)]
    errors: list[str] = []
    coalescer = RenewalCoalescer(
        lambda item: rm.requests.renew(item.id, item.lease_seconds, item.runtime_state),
        rm.requests.renew_many,
    )

    def check(renewed: ResourceRequestInfo | Exception) -> None:
        if not isinstance(renewed, ResourceRequestInfo) or renewed.status is not Status.ALLOCATED:
            errors.append(str(getattr(renewed, "status", renewed)))

    def work(index: int) -> None:
        own, position = latencies[index], 0
        mine = [
            RenewalItem(id=UUID(i), lease_seconds=LEASE, runtime_state=RuntimeState.RUNNING)
            for i in ids[index::threads]
        ]
        while time.time() < start_at + seconds:
            started = time.perf_counter()
            if mode == "cycles":
                held = rm.requests.create(body)
                released = rm.requests.release(held.id)
                if (held.status, released.status) != (Status.ALLOCATED, Status.RELEASED):
                    errors.append(f"{held.status} / {released.status}")
            elif variant == "bulk":
                items = [mine[(position + k) % len(mine)] for k in range(batch)]
                position += batch
                for renewed in rm.requests.renew_many(items):
                    check(renewed)
                took = time.perf_counter() - started
                own.extend([took] * batch)
                continue
            elif variant == "coalesced":
                check(coalescer.renew(mine[position % len(mine)]))
                position += 1
            else:
                item = mine[position % len(mine)]
                check(rm.requests.renew(item.id, LEASE, RuntimeState.RUNNING))
                position += 1
            own.append(time.perf_counter() - started)

    workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    time.sleep(max(0.0, start_at - time.time()))
    cpu = time.process_time()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    cpu = time.process_time() - cpu
    rm.close()
    out.put(([x for own in latencies for x in own], errors[:3], cpu))


def _clients(
    url: str,
    mode: str,
    clients: int,
    threads: int,
    seconds: float,
    ids: list[str],
    variant: str = "single",
    batch: int = 1,
) -> tuple[list[float], float]:
    """Every call's latency, and the client processes' CPU seconds in the measured window."""
    context = mp.get_context("spawn")
    queue = context.Queue()
    start_at = time.time() + 3.0 + clients * 0.5  # every process started and logged in
    processes = [
        context.Process(
            target=_client_process,
            args=(url, mode, threads, seconds, ids[i::clients], start_at, queue, variant, batch),
        )
        for i in range(clients)
    ]
    for process in processes:
        process.start()
    results = [queue.get(timeout=seconds + 120) for _ in processes]
    for process in processes:
        process.join()
    errors = [e for result in results for e in result[1]]
    if errors:
        raise RuntimeError(f"{mode}: unexpected answers, e.g. {errors}")
    return [x for result in results for x in result[0]], sum(result[2] for result in results)


def _raw_run(
    port: int, token: str, mode: str, connections: int, seconds: float, ids: list[str]
) -> tuple[list[float], float]:
    """Every call's latency, and this (the raw generator's) process's CPU seconds."""
    cpu = time.process_time()
    latencies = asyncio.run(_raw(port, token, mode, connections, seconds, ids))
    return latencies, time.process_time() - cpu


# ----------------------------------------------------------------------------- figures


def figures(latencies: list[float], seconds: float, unit: str) -> dict[str, Any]:
    ordered = sorted(latencies)

    def pct(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 2)

    return {
        unit: len(ordered),
        f"{unit}_per_s": round(len(ordered) / seconds, 1),
        "latency_ms_p50": pct(0.50),
        "latency_ms_p99": pct(0.99),
    }


def measure(backend: str, workers: int, args: argparse.Namespace) -> dict[str, Any]:
    row: dict[str, Any] = {"backend": backend, "workers": workers}
    seconds = args.seconds
    with database(backend) as db_url, serve(db_url, workers) as (url, port, server):

        def timed(unit: str, run: Callable[[], tuple[list[float], float]]) -> dict[str, Any]:
            cpu = process_tree_cpu_seconds(server)
            latencies, client_cpu = run()
            result = figures(latencies, seconds, unit)
            spent = process_tree_cpu_seconds(server) - cpu
            result["server_cpu_ms_per_op"] = round(spent * 1000 / max(1, len(latencies)), 3)
            result["client_cpu_ms_per_op"] = round(client_cpu * 1000 / max(1, len(latencies)), 3)
            return result

        token = raw_token(url)
        if "cycles" in args.phases:
            if "raw" in args.loads:
                row["cycles_raw"] = timed(
                    "cycles",
                    lambda: _raw_run(port, token, "cycles", args.connections, seconds, []),
                )
            if "client" in args.loads:
                row["cycles_client"] = timed(
                    "cycles",
                    lambda: _clients(url, "cycles", args.clients, args.threads, seconds, []),
                )
        if "renewals" in args.phases:
            started = time.perf_counter()
            ids = asyncio.run(_create_leases(port, token, args.leases, args.connections))
            row["leases"], row["lease_setup_s"] = len(ids), round(time.perf_counter() - started, 1)
            if "raw" in args.loads:
                row["renewals_raw"] = timed(
                    "renewals",
                    lambda: _raw_run(port, token, "renewals", args.connections, seconds, ids),
                )
            if "client" in args.loads:
                row["renewals_client"] = timed(
                    "renewals",
                    lambda: _clients(url, "renewals", args.clients, args.threads, seconds, ids),
                )
            if "bulk" in args.loads:
                row["renewals_bulk"] = timed(
                    "renewals",
                    lambda: _clients(
                        url,
                        "renewals",
                        args.clients,
                        args.threads,
                        seconds,
                        ids,
                        "bulk",
                        args.batch,
                    ),
                )
            if "coalesced" in args.loads:
                row["renewals_coalesced"] = timed(
                    "renewals",
                    lambda: _clients(
                        url, "renewals", args.clients, args.callers, seconds, ids, "coalesced"
                    ),
                )
    print(f"{backend}, {workers} worker(s): {summary(row)}", flush=True)
    return row


def summary(row: dict[str, Any]) -> str:
    """``cycles raw 812.0/s; renewals client 930.4/s ...`` for the phases that ran."""
    shown = []
    for key, value in row.items():
        if isinstance(value, dict):
            phase, load = key.split("_")
            cpu, client = value["server_cpu_ms_per_op"], value["client_cpu_ms_per_op"]
            shown.append(
                f"{phase} {load} {value[f'{phase}_per_s']}/s"
                f" (CPU/op: server {cpu} ms, load generator {client} ms)"
            )
    return "; ".join(shown)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--backends", nargs="+", default=["sqlite", "postgresql"])
    parser.add_argument("--workers", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--leases", type=int, default=10_000)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--clients", type=int, default=3)
    parser.add_argument("--threads", type=int, default=32)
    parser.add_argument(
        "--phases", nargs="+", choices=["cycles", "renewals"], default=["cycles", "renewals"]
    )
    parser.add_argument("--batch", type=int, default=100, help="leases per bulk renewal call")
    parser.add_argument("--callers", type=int, default=64, help="threads per coalesced client")
    parser.add_argument(
        "--loads",
        nargs="+",
        choices=["raw", "client", "bulk", "coalesced"],
        default=["raw", "client", "bulk", "coalesced"],
    )
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    host = host_figures()
    load_before = os.getloadavg()
    rows = [measure(b, w, args) for b in args.backends for w in args.workers]
    load_after = os.getloadavg()
    result = {
        "benchmark": "rm_http",
        "host": host,
        "command": "python bench/rm_http.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "goals": GOALS,
        "load_average": {"before": load_before, "after": load_after},
        "rows": rows,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
