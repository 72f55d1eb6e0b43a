"""A 100-step pipeline over REST: HTTP requests per step and per-step overhead (issue 5 §6).

A chain of N trivial steps runs through the unchanged engine against a workspace server (own
process, SQLite behind it), and the same chain on the embedded store for comparison. Figures:
- requests per step: the REST store's request count for one pipeline call / N (uncached run,
  then cached run), everything included (pipeline, snapshot, run records, every step);
- per-step overhead: REST wall time / N, and its difference to the embedded store;
- the same per-step path through the store's optional capabilities (run status +
  ``find_cached_or_create`` + ``finish``: what the engine needs once it uses them).

    python bench/rest_steps.py [--steps 100] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from rest_server import ServerProcess, database
from step_overhead import chain_of

from wharf.config.global_config import load_config
from wharf.core.enums import ExecutionStatus
from wharf.sdk.workspace import Workspace
from wharf.store.models import (
    ArtifactVersionCreate,
    RunCreate,
    SnapshotCreate,
    StepRunCreate,
    StepRunUpdate,
)
from wharf.store.ports import StepRunBatchOperations
from wharf.store.rest import RestStore


def run_chain(workspace: Workspace, n: int, seed: int) -> float:
    t0 = time.perf_counter()
    result = chain_of(n).run_in(workspace, seed=seed)
    elapsed = time.perf_counter() - t0
    assert result.status is ExecutionStatus.COMPLETED, result.status
    return elapsed


def engine_over_rest(url: str, token: str, n: int, repeat: int) -> dict[str, float]:
    home = tempfile.mkdtemp()
    config = load_config({"WHARF_HOME": home, "WHARF_SERVER_URL": url, "WHARF_API_KEY": token})
    store = RestStore(url, token)
    workspace = Workspace.open(config, store=store)
    run_chain(workspace, 10, -(10**9))  # warm-up: imports, connections, default stack
    uncached, cached, requests_uncached, requests_cached = [], [], [], []
    for i in range(repeat):
        before = store.http.request_count
        uncached.append(run_chain(workspace, n, i))
        middle = store.http.request_count
        cached.append(run_chain(workspace, n, i))
        requests_uncached.append(middle - before)
        requests_cached.append(store.http.request_count - middle)
    workspace.close()
    return {
        "uncached_ms_per_step": 1000 * statistics.median(uncached) / n,
        "cached_ms_per_step": 1000 * statistics.median(cached) / n,
        "uncached_requests_per_step": statistics.median(requests_uncached) / n,
        "cached_requests_per_step": statistics.median(requests_cached) / n,
    }


def embedded(n: int, repeat: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as home:
        workspace = Workspace.open(load_config({"WHARF_HOME": home}))
        run_chain(workspace, 10, -(10**9))
        uncached = [run_chain(workspace, n, i) for i in range(repeat)]
        workspace.close()
    return {"uncached_ms_per_step": 1000 * statistics.median(uncached) / n}


def capability_path(url: str, token: str, n: int) -> dict[str, float]:
    """The engine's per-step store calls through the optional capabilities (cache miss path):
    run status, find_cached_or_create, finish with one output."""
    store = RestStore(url, token)
    project = store.projects.get_by_name("default")
    pipeline = store.pipelines.get_or_create(project.id, "capabilities")
    from wharf.config.spec import PipelineSpec

    snapshot = store.snapshots.create(
        SnapshotCreate(project_id=project.id, pipeline_id=pipeline.id, spec=PipelineSpec(name="c"))
    )
    run = store.runs.create(
        RunCreate(
            project_id=project.id,
            pipeline_id=pipeline.id,
            snapshot_id=snapshot.id,
            name=f"cap-{time.time_ns()}",
            status=ExecutionStatus.RUNNING,
        )
    )
    steps = store.steps
    assert isinstance(steps, StepRunBatchOperations)
    before = store.http.request_count
    t0 = time.perf_counter()
    for i in range(n):
        store.runs.get_status(run.id)
        create = StepRunCreate(
            run_id=run.id,
            name=f"s{i}",
            status=ExecutionStatus.RUNNING,
            cache_key=f"k-{time.time_ns()}",
        )
        record, created = steps.find_cached_or_create(create, project.id, datetime.now(UTC))
        assert created
        output = ArtifactVersionCreate(
            project_id=project.id,
            name=f"capabilities.s{i}.output",
            uri=f"/tmp/x/{i}",
            data_type="builtins.int",
            materializer="wharf.artifacts.materializers.builtin:BuiltinMaterializer",
            producer_step_run_id=record.id,
        )
        steps.finish(record.id, StepRunUpdate(status=ExecutionStatus.COMPLETED), {"output": output})
    elapsed = time.perf_counter() - t0
    requests = store.http.request_count - before
    store.close()
    return {"ms_per_step": 1000 * elapsed / n, "requests_per_step": requests / n}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "rest_steps.json"
    )
    args = parser.parse_args()
    os.environ.pop("WHARF_SERVER_URL", None)
    n = args.steps
    base = embedded(n, args.repeat)
    with database("sqlite") as url, ServerProcess(url, workers=1) as server:
        token = server.admin_token()
        rest = engine_over_rest(server.url, token, n, args.repeat)
        capabilities = capability_path(server.url, token, n)
    result = {
        "benchmark": "rest_steps",
        "steps": n,
        "server": "1 worker, SQLite",
        "engine_over_rest": rest,
        "embedded": base,
        "rest_overhead_ms_per_step": rest["uncached_ms_per_step"] - base["uncached_ms_per_step"],
        "capability_path": capabilities,
        "goals": {"requests_per_step": 3, "overhead_ms_per_step": 10},
        "load_average_1m": os.getloadavg()[0],
        "cpus": os.cpu_count(),
    }
    print(f"{n}-step chain, engine unchanged, over REST (server: 1 worker, SQLite):")
    print(
        f"  uncached: {rest['uncached_requests_per_step']:.2f} requests/step, {rest['uncached_ms_per_step']:.2f} ms/step"
    )
    print(
        f"  cached:   {rest['cached_requests_per_step']:.2f} requests/step, {rest['cached_ms_per_step']:.2f} ms/step"
    )
    print(
        f"  embedded: {base['uncached_ms_per_step']:.2f} ms/step -> REST overhead {result['rest_overhead_ms_per_step']:.2f} ms/step"
    )
    print(
        f"per-step path through the optional capabilities: {capabilities['requests_per_step']:.2f} requests/step, {capabilities['ms_per_step']:.2f} ms/step"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
