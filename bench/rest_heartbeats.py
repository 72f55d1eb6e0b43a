"""Heartbeats per second with 1,000 running steps against a server with 2 workers (issue 5 §6).

For SQLite and PostgreSQL: a fresh database, a server with ``--workers 2`` in its own processes,
one run with 1,000 running steps, and a run-scoped token issued to an orchestrator service
account -- what a step's heartbeat sends in production. A load generator (asyncio on uvloop when
installed, keep-alive HTTP/1.1 connections, its own process) sends ``PUT
/api/v1/steps/{id}/heartbeat`` round-robin over the steps, ``--connections`` requests in flight,
for ``--seconds``; every answer must be 200.

Fairness: the workers race to accept connections, and one often wins most of them (3 + 13 of 16
was seen); with keep-alive connections that would leave one worker idle for the whole run. So
connections are opened one at a time, each beats once, and one landing on a worker that already
has its share is set aside (``/proc`` tells which worker holds it) until every worker serves
its share. A warm-up second fills the workers' caches and connection pools before timing.

Figures: heartbeats/s and latency percentiles (goal: >= 1,000/s, p99 <= 50 ms), and CPU time
per heartbeat of the server's workers, of the PostgreSQL backends and of the load generator
(steadier than rates on a shared machine; read from ``/proc``).

    python bench/rest_heartbeats.py [--steps 1000] [--seconds 10] [--connections 16]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any
from uuid import UUID

import httpx

sys.path.insert(0, str(Path(__file__).parent))

from rest_server import ServerProcess, database, postgres_cpu_seconds


def prepare(server: ServerProcess, steps: int) -> tuple[str, list[UUID]]:
    """A run with ``steps`` running steps and a run token for it (through the API)."""
    admin = httpx.Client(
        base_url=server.url, headers={"authorization": f"Bearer {server.admin_token()}"}
    )
    project = admin.get("/api/v1/projects/by-name", params={"name": "default"}).json()["id"]
    account = admin.post("/api/v1/service_accounts", json={"name": "orchestrator"}).json()["id"]
    admin.put(
        f"/api/v1/projects/{project}/members",
        json={"service_account_id": account, "role": "member"},
    )
    key = admin.post(f"/api/v1/service_accounts/{account}/api_keys", json={"name": "k"}).json()[
        "secret"
    ]
    client = httpx.Client(
        base_url=server.url, headers={"authorization": f"Bearer {key}"}, timeout=60
    )
    pipeline = client.post(
        "/api/v1/pipelines", json={"project_id": project, "name": "beats"}
    ).json()["id"]
    snapshot = client.post(
        "/api/v1/snapshots",
        json={"project_id": project, "pipeline_id": pipeline, "spec": {"name": "beats"}},
    ).json()["id"]
    run = client.post(
        "/api/v1/runs",
        json={
            "project_id": project,
            "pipeline_id": pipeline,
            "snapshot_id": snapshot,
            "name": "r",
            "status": "running",
        },
    ).json()["id"]
    ids: list[UUID] = []
    for start in range(0, steps, 500):
        batch = [
            {"run_id": run, "name": f"s{i}", "status": "running"}
            for i in range(start, min(steps, start + 500))
        ]
        created = client.post("/api/v1/steps/batch", json={"steps": batch})
        created.raise_for_status()
        ids.extend(UUID(s["id"]) for s in created.json()["items"])
    token = client.post(f"/api/v1/runs/{run}/token").json()["access_token"]
    return token, ids


class _Connection:
    """One keep-alive connection sending heartbeats; ``beat`` returns the answer's status line."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, token: str):
        self.reader, self.writer = reader, writer
        body = b'{"liveness_timeout_seconds": 315}'
        self.tail = (
            f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nHost: bench\r\n\r\n"
        ).encode() + body

    async def beat(self, step: UUID) -> tuple[bytes, bytes]:
        self.writer.write(f"PUT /api/v1/steps/{step}/heartbeat HTTP/1.1\r\n".encode() + self.tail)
        status_line = await self.reader.readline()
        length = 0
        while True:
            line = await self.reader.readline()
            if line in (b"\r\n", b""):
                break
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        return status_line, await self.reader.readexactly(length)


async def _open(
    port: int,
    token: str,
    ids: list[UUID],
    connections: int,
    worker_of: Callable[[int], int | None],
    workers: int,
) -> tuple[list[_Connection], list[int]]:
    """``connections`` connections spread evenly over the workers (see "Fairness" above), and
    how many each worker serves."""
    share = -(-connections // workers)
    opened: list[_Connection] = []
    spare: list[_Connection] = []
    served: Counter[int | None] = Counter()
    for attempt in range(20 * connections):
        if len(opened) == connections:
            break
        connection = _Connection(*await asyncio.open_connection("127.0.0.1", port), token)
        await connection.beat(ids[attempt % len(ids)])
        worker = worker_of(connection.writer.get_extra_info("sockname")[1])
        if worker is not None and served[worker] >= share:
            spare.append(connection)
            continue
        served[worker] += 1
        opened.append(connection)
    while len(opened) < connections:  # the accept race would not spread them: take what came
        opened.append(spare.pop())
        served[None] += 1
    for connection in spare:
        connection.writer.close()
    return opened, sorted(served.values(), reverse=True)


async def _drive(
    connection: _Connection,
    ids: list[UUID],
    counter: list[int],
    deadline: float,
    latencies: list[float],
    errors: list[str],
) -> None:
    while time.perf_counter() < deadline:
        step = ids[counter[0] % len(ids)]
        counter[0] += 1
        t0 = time.perf_counter()
        status_line, payload = await connection.beat(step)
        latencies.append(time.perf_counter() - t0)
        if b" 200 " not in status_line:
            errors.append(status_line.decode().strip() + " " + payload.decode()[:200])


async def _load(
    port: int,
    token: str,
    ids: list[UUID],
    seconds: float,
    connections: int,
    cpu_of_others: Callable[[], tuple[float, float, int]],
    worker_of: Callable[[int], int | None] = lambda port: None,
    workers: int = 2,
) -> tuple[list[float], list[str], float, tuple[float, float, float, int], list[int]]:
    """Latencies, errors and elapsed seconds of the timed part, the CPU seconds it cost (this
    process, then ``cpu_of_others``: the server's, the database's and the database sessions
    opened meanwhile), and the connections per worker."""
    opened, spread = await _open(port, token, ids, connections, worker_of, workers)
    counter = [0]
    errors: list[str] = []
    deadline = time.perf_counter() + 1.0  # warm-up: caches, pools
    await asyncio.gather(*(_drive(c, ids, counter, deadline, [], errors) for c in opened))
    latencies: list[float] = []
    others = cpu_of_others()
    cpu = time.process_time()
    start = time.perf_counter()
    deadline = start + seconds
    await asyncio.gather(*(_drive(c, ids, counter, deadline, latencies, errors) for c in opened))
    elapsed = time.perf_counter() - start
    cpu = time.process_time() - cpu
    after = cpu_of_others()
    for connection in opened:
        connection.writer.close()
    used = (cpu, after[0] - others[0], after[1] - others[1], after[2] - others[2])
    return latencies, errors, elapsed, used, spread


def _run(coroutine: Any) -> Any:
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coroutine)
    return uvloop.run(coroutine)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def measure(kind: str, steps: int, seconds: float, connections: int) -> dict[str, Any]:
    with database(kind) as url, ServerProcess(url, workers=2) as server:
        token, ids = prepare(server, steps)

        def cpu_of_others() -> tuple[float, float, int]:
            db, sessions = postgres_cpu_seconds(url) if kind == "postgresql" else (0.0, 0)
            return server.cpu_seconds(), db, sessions

        load_before = os.getloadavg()[0]
        latencies, errors, elapsed, (client_cpu, server_cpu, db_cpu, sessions), spread = _run(
            _load(server.port, token, ids, seconds, connections, cpu_of_others, server.worker_of)
        )
    if errors:
        raise RuntimeError(f"{len(errors)} heartbeats failed, e.g. {errors[0]}")
    beats = len(latencies)
    return {
        "database": kind,
        "workers": 2,
        "running_steps": steps,
        "connections": connections,
        "connections_per_worker": spread,
        "heartbeats": beats,
        "heartbeats_per_s": beats / elapsed,
        "p50_ms": 1000 * statistics.median(latencies),
        "p99_ms": 1000 * percentile(latencies, 0.99),
        "max_ms": 1000 * max(latencies),
        "server_cpu_ms_per_heartbeat": 1000 * server_cpu / beats,
        "database_cpu_ms_per_heartbeat": 1000 * db_cpu / beats if kind == "postgresql" else None,
        "database_sessions_opened": sessions if kind == "postgresql" else None,
        "client_cpu_ms_per_heartbeat": 1000 * client_cpu / beats,
        "load_average_1m": [load_before, os.getloadavg()[0]],
        "cpus": os.cpu_count(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--databases", nargs="+", default=["sqlite", "postgresql"])
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "rest_heartbeats.json"
    )
    args = parser.parse_args()
    results = []
    for kind in args.databases:
        row = measure(kind, args.steps, args.seconds, args.connections)
        results.append(row)
        database_cpu = row["database_cpu_ms_per_heartbeat"]
        print(
            f"{kind:10s} 2 workers, {args.steps} running steps, {args.connections} in flight "
            f"({'+'.join(map(str, row['connections_per_worker']))}): "
            f"{row['heartbeats_per_s']:.0f} heartbeats/s, p50 {row['p50_ms']:.1f} ms, "
            f"p99 {row['p99_ms']:.1f} ms, max {row['max_ms']:.1f} ms; CPU per heartbeat: "
            f"server {row['server_cpu_ms_per_heartbeat']:.2f} ms"
            + (
                f", PostgreSQL {database_cpu:.2f} ms ({row['database_sessions_opened']} sessions "
                "opened)"
                if database_cpu is not None
                else ""
            )
            + f", client {row['client_cpu_ms_per_heartbeat']:.2f} ms; load "
            + "/".join(f"{x:.1f}" for x in row["load_average_1m"])
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "benchmark": "rest_heartbeats",
                "goals": {"heartbeats_per_s": 1000, "p99_ms": 50},
                "results": results,
            },
            indent=2,
        )
    )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
