"""Heartbeats per second with 1,000 running steps against a server with 2 workers (issue 5 §6).

For SQLite and PostgreSQL: a fresh database, a server with ``--workers 2`` in its own processes,
one run with 1,000 running steps, and a run-scoped token issued to an orchestrator service
account -- what a step's heartbeat sends in production. A load generator (asyncio, keep-alive
HTTP/1.1 connections, one process) sends ``PUT /api/v1/steps/{id}/heartbeat`` round-robin over
the steps, ``--connections`` requests in flight, for ``--seconds``; every answer must be 200.
Figures: heartbeats/s and latency percentiles (goal: >= 1,000/s, p99 <= 50 ms).

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
from pathlib import Path
from uuid import UUID

import httpx

sys.path.insert(0, str(Path(__file__).parent))

from rest_server import ServerProcess, database


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


async def _connection(
    port: int,
    token: str,
    ids: list[UUID],
    counter: list[int],
    deadline: float,
    latencies: list[float],
    errors: list[str],
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    body = b'{"liveness_timeout_seconds": 315}'
    head = f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\nHost: bench\r\n\r\n".encode()
    while time.perf_counter() < deadline:
        step = ids[counter[0] % len(ids)]
        counter[0] += 1
        request = f"PUT /api/v1/steps/{step}/heartbeat HTTP/1.1\r\n".encode() + head + body
        t0 = time.perf_counter()
        writer.write(request)
        status_line = await reader.readline()
        length = 0
        while True:
            line = await reader.readline()
            if line in (b"\r\n", b""):
                break
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        payload = await reader.readexactly(length)
        latencies.append(time.perf_counter() - t0)
        if b" 200 " not in status_line:
            errors.append(status_line.decode().strip() + " " + payload.decode()[:200])
    writer.close()


async def _load(
    port: int, token: str, ids: list[UUID], seconds: float, connections: int
) -> tuple[list[float], list[str], float]:
    latencies: list[float] = []
    errors: list[str] = []
    counter = [0]
    start = time.perf_counter()
    deadline = start + seconds
    await asyncio.gather(
        *(
            _connection(port, token, ids, counter, deadline, latencies, errors)
            for _ in range(connections)
        )
    )
    return latencies, errors, time.perf_counter() - start


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def measure(kind: str, steps: int, seconds: float, connections: int) -> dict[str, object]:
    with database(kind) as url, ServerProcess(url, workers=2) as server:
        token, ids = prepare(server, steps)
        asyncio.run(_load(server.port, token, ids, 1.0, connections))  # warm-up: caches, pools
        latencies, errors, elapsed = asyncio.run(
            _load(server.port, token, ids, seconds, connections)
        )
    if errors:
        raise RuntimeError(f"{len(errors)} heartbeats failed, e.g. {errors[0]}")
    return {
        "database": kind,
        "workers": 2,
        "running_steps": steps,
        "connections": connections,
        "heartbeats": len(latencies),
        "heartbeats_per_s": len(latencies) / elapsed,
        "p50_ms": 1000 * statistics.median(latencies),
        "p99_ms": 1000 * percentile(latencies, 0.99),
        "max_ms": 1000 * max(latencies),
        "load_average_1m": os.getloadavg()[0],
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
        print(
            f"{kind:10s} 2 workers, {args.steps} running steps, {args.connections} in flight: "
            f"{row['heartbeats_per_s']:.0f} heartbeats/s, p50 {row['p50_ms']:.1f} ms, "
            f"p99 {row['p99_ms']:.1f} ms, max {row['max_ms']:.1f} ms"
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
