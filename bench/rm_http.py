"""Benchmark: the Resource Manager over HTTP on this machine (issue 4 §10).

Goals: create+allocate+release cycles per second (>= 500/s) and lease renewals per second with
10,000 live leases (>= 2,000/s).

Per backend (a fresh SQLite file, or a throw-away PostgreSQL database) and per ``--workers``
value: ``wharf resource-manager serve --workers W`` in its own processes (uvicorn; each worker
runs its own service on the same database), one pool whose class has room for every lease (CPU
unlimited) and one policy admitting every project. Two load generators, each measured:

- ``raw``: one process, asyncio, ``--connections`` keep-alive HTTP/1.1 connections sending the
  API's requests by hand: it costs the machine little, so it shows what the *server* sustains;
- ``client``: ``--clients`` processes x ``--threads`` threads over one
  :class:`HttpResourceManager` each (login, token cache, idempotency key per call, model
  parsing): what Wharf's own callers get, the client's CPU included, on the same 2 cores.

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
                            [--leases 10000] [--connections 32] [--clients 3] [--threads 8]
                            [--phases cycles renewals] [--loads raw client]
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
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from uuid import UUID

import httpx
import sqlalchemy as sa

from wharf.core.enums import ResourceRequestRuntimeState as RuntimeState
from wharf.core.enums import ResourceRequestStatus as Status
from wharf.resource_manager.client.http import HttpResourceManager
from wharf.resource_manager.client.models import PolicyCreate, PoolCreate, ResourceRequestCreate
from wharf.store.sql.engine import normalize_url

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


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def database(backend: str) -> Iterator[str]:
    if backend == "sqlite":
        with tempfile.TemporaryDirectory() as directory:
            yield f"sqlite:///{directory}/rm.db"
        return
    admin = normalize_url(
        os.environ.get("WHARF_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
    )
    name = f"wharf_bench_{uuid.uuid4().hex[:8]}"
    engine = sa.create_engine(admin, isolation_level="AUTOCOMMIT", poolclass=sa.NullPool)
    with engine.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    try:
        yield admin.set(database=name).render_as_string(hide_password=False)
    finally:
        with engine.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        engine.dispose()


def tree_cpu_seconds(root: int) -> float:
    """CPU seconds (user + system) used so far by process ``root`` and its descendants, from
    ``/proc`` (0.0 where there is none): the server's cost per operation is the one figure that
    other load on the machine disturbs little."""
    proc = Path("/proc")
    if not proc.exists():
        return 0.0
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry.name)] = int(fields[1])
        times[int(entry.name)] = (int(fields[11]) + int(fields[12])) / tick
    total = 0.0
    for pid, cpu in times.items():
        ancestor = pid
        while ancestor not in (root, 0, 1) and ancestor in parents:
            ancestor = parents[ancestor]
        if ancestor == root:
            total += cpu
    return total


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

    async def call(self, method: str, path: str, body: bytes = b"") -> Any:
        head = f"{method} {path} HTTP/1.1\r\n{self.head}Content-Length: {len(body)}\r\n"
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
                held = await conn.call("POST", REQUESTS, body)
                released = await conn.call("POST", f"{REQUESTS}/{held['id']}/release")
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
    url: str, mode: str, threads: int, seconds: float, ids: list[str], start_at: float, out: Any
) -> None:
    """``threads`` threads over one HttpResourceManager, from ``start_at`` for ``seconds``."""
    rm = HttpResourceManager(url, api_key=ADMIN_KEY, timeout=60)
    rm.pools.list()  # log in before the clock starts
    body = ResourceRequestCreate.model_validate(spec(0, 60))
    latencies: list[list[float]] = [[] for _ in range(threads)]
    errors: list[str] = []

    def work(index: int) -> None:
        own, mine, position = latencies[index], [UUID(i) for i in ids[index::threads]], 0
        while time.time() < start_at + seconds:
            started = time.perf_counter()
            if mode == "cycles":
                held = rm.requests.create(body)
                released = rm.requests.release(held.id)
                if (held.status, released.status) != (Status.ALLOCATED, Status.RELEASED):
                    errors.append(f"{held.status} / {released.status}")
            else:
                renewed = rm.requests.renew(mine[position % len(mine)], LEASE, RuntimeState.RUNNING)
                position += 1
                if renewed.status is not Status.ALLOCATED:
                    errors.append(str(renewed.status))
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
    url: str, mode: str, clients: int, threads: int, seconds: float, ids: list[str]
) -> tuple[list[float], float]:
    """Every call's latency, and the client processes' CPU seconds in the measured window."""
    context = mp.get_context("spawn")
    queue = context.Queue()
    start_at = time.time() + 3.0 + clients * 0.5  # every process started and logged in
    processes = [
        context.Process(
            target=_client_process,
            args=(url, mode, threads, seconds, ids[i::clients], start_at, queue),
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
            cpu = tree_cpu_seconds(server)
            latencies, client_cpu = run()
            result = figures(latencies, seconds, unit)
            spent = tree_cpu_seconds(server) - cpu
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
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument(
        "--phases", nargs="+", choices=["cycles", "renewals"], default=["cycles", "renewals"]
    )
    parser.add_argument("--loads", nargs="+", choices=["raw", "client"], default=["raw", "client"])
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    load_before = os.getloadavg()
    rows = [measure(b, w, args) for b in args.backends for w in args.workers]
    load_after = os.getloadavg()
    result = {
        "benchmark": "rm_http",
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
