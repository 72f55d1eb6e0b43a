"""Team mode, steps that wait for resources: from a step's creation to its start when its
resources are free (issue 6 §9; goal ≤ 150 ms in team mode).

A Resource Manager service (``wharf resource-manager serve``) and a workspace server paired with
it (``wharf server serve --resource-manager-url …``), each in its own process on its own
database; this process is the SDK user. A dynamic pipeline runs N steps one after the other,
each asking for one licence of a pool with capacity to spare, so every step's request is
admitted at creation; the figure is each step run's ``start_time`` as the server recorded it
minus the moment its creation began, the earlier of its request's ``created_at`` (the server
makes the request before it writes the step run) and its own ``created`` (one clock: this
machine's).

    python bench/team_resources.py [--backend sqlite|postgresql] [--steps 50]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from resource_contention import creation_began
from rest_server import ServerProcess, database, free_port

from wharf import ResourceSettings, pipeline, step
from wharf.config.global_config import load_config
from wharf.resource_manager.client.http import HttpResourceManager
from wharf.sdk.pools import ensure_pool
from wharf.sdk.workspace import Workspace
from wharf.store.models import PageRequest, StepRunFilter

RESULTS = Path(__file__).resolve().parent / "results" / "team_resources.json"


@step(enable_cache=False, settings={"resources": ResourceSettings(resources={"license": 1})})
def licensed(i: int) -> int:
    return i


@contextlib.contextmanager
def resource_manager(db_url: str) -> Iterator[tuple[str, str]]:
    """A Resource Manager service: yields its URL and an admin API key."""
    port, key = free_port(), "bench-" + secrets.token_urlsafe(24)
    env = {k: v for k, v in os.environ.items() if not k.startswith("WHARF_")}
    with tempfile.TemporaryDirectory() as home:
        env["WHARF_HOME"] = home
        command = [sys.executable, "-m", "wharf.cli.main", "resource-manager", "serve"]
        command += ["--port", str(port), "--db-url", db_url, "--admin-api-key", key]
        command += ["--secret-key", secrets.token_urlsafe(48), "--log-level", "warning"]
        process = subprocess.Popen(command, env=env)
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 60
            while True:
                if process.poll() is not None:
                    raise RuntimeError("the Resource Manager exited while starting")
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                        break
                if time.monotonic() > deadline:
                    raise RuntimeError("the Resource Manager did not start")
                time.sleep(0.1)
            yield url, key
        finally:
            process.terminate()
            process.wait(20)


def measure(backend: str, steps: int) -> dict[str, Any]:
    with (
        database(backend) as rm_db,
        database(backend) as server_db,
        resource_manager(rm_db) as (rm_url, rm_key),
        ServerProcess(
            server_db,
            extra_args=["--resource-manager-url", rm_url, "--resource-manager-token", rm_key],
        ) as server,
        tempfile.TemporaryDirectory() as home,
    ):
        os.environ.update(
            WHARF_HOME=home, WHARF_SERVER_URL=server.url, WHARF_API_KEY=server.admin_token()
        )
        workspace = Workspace.open(load_config())
        try:
            with HttpResourceManager(rm_url, api_key=rm_key) as rm:
                ensure_pool(rm, "licenses", {"license": 4}, account=workspace.user.name)

            @pipeline(dynamic=True, max_parallelism=1)
            def sequential(n: int) -> None:
                for i in range(n):
                    licensed(i)

            sequential.run_in(workspace, n=3)  # warm-up: connections, RM tables, imports
            run = sequential.run_in(workspace, n=steps)
            assert run.status.value == "completed", run.status_reason
            records = workspace.store.steps.list(
                StepRunFilter(run_id=run.id), PageRequest(size=1000)
            ).items
            with HttpResourceManager(rm_url, api_key=rm_key) as rm:
                latencies = sorted(
                    (r.start_time - creation_began(r, rm.requests.get)).total_seconds()
                    for r in records
                    if r.start_time
                )
        finally:
            workspace.close()
    return {
        "backend": backend,
        "steps": len(latencies),
        "creation_to_start_ms_p50": round(1000 * statistics.median(latencies), 1),
        "creation_to_start_ms_p90": round(1000 * latencies[int(0.9 * (len(latencies) - 1))], 1),
        "creation_to_start_ms_max": round(1000 * latencies[-1], 1),
        "load_average": os.getloadavg()[0],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["sqlite", "postgresql"], action="append")
    parser.add_argument("--steps", type=int, default=50)
    args = parser.parse_args()
    results = [measure(backend, args.steps) for backend in args.backend or ["sqlite"]]
    for result in results:
        print(
            f"team mode, {result['backend']}: creation -> start p50 "
            f"{result['creation_to_start_ms_p50']} ms, p90 {result['creation_to_start_ms_p90']} "
            f"ms, max {result['creation_to_start_ms_max']} ms over {result['steps']} steps "
            f"(load {result['load_average']:.1f})"
        )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
