"""What asking for resources costs a step, embedded mode, with capacity free.

A sequential chain of ``--steps`` trivial uncached steps, once plain and once with every step
asking for one licence of a pool with ``--licences`` of them (so every request is allocated at
creation and nobody waits): the request's creation, the allocation, the ``submitted`` renewal,
the release, and their bookkeeping. Figures per step: the process's CPU time and the wall time
of the pipeline call, best of ``--rounds`` alternated rounds (plain, with resources, plain, …),
and the difference between the two: the Resource Manager's share of a step.

    python bench/resource_step_cost.py [--steps 300 --rounds 5 --licences 10]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from host_speed import host_figures

from wharf import Client, ResourceSettings, pipeline, step
from wharf.config.global_config import load_config
from wharf.sdk.workspace import Workspace


@step(enable_cache=False)
def plain(i: int) -> int:
    return i


@step(enable_cache=False, settings={"resources": ResourceSettings(resources={"license": 1})})
def licensed(i: int) -> int:
    return i


def chain(size: int, with_resources: bool) -> Any:
    body = licensed if with_resources else plain

    @pipeline(name="licensed_chain" if with_resources else "plain_chain", enable_cache=False)
    def run_chain() -> None:
        for i in range(size):
            body(i)

    return run_chain


def per_step(workspace: Workspace, size: int, with_resources: bool) -> tuple[float, float]:
    """(CPU ms, wall ms) per step of one chain of ``size`` steps."""
    cpu, wall = time.process_time(), time.perf_counter()
    run = chain(size, with_resources).run_in(workspace)
    assert run.status.value == "completed", run.status_reason
    return (
        (time.process_time() - cpu) / size * 1000,
        (time.perf_counter() - wall) / size * 1000,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--licences", type=int, default=10)
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "resource_step_cost.json"
    )
    args = parser.parse_args()
    host = host_figures()
    with tempfile.TemporaryDirectory() as home:
        os.environ["WHARF_HOME"] = home
        workspace = Workspace.open(load_config())
        try:
            client = Client(workspace.config, workspace.store)
            client._workspace = workspace
            client.ensure_resource_pool("licenses", {"license": args.licences})
            for with_resources in (False, True):  # warm-up: imports, tables, connections
                per_step(workspace, 20, with_resources)
            rounds: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
            for _ in range(args.rounds):
                for with_resources in (False, True):
                    rounds[with_resources].append(per_step(workspace, args.steps, with_resources))
        finally:
            workspace.close()
    best = {k: (min(c for c, _ in v), min(w for _, w in v)) for k, v in rounds.items()}
    result = {
        "benchmark": "resource_step_cost",
        "steps": args.steps,
        "rounds": args.rounds,
        "plain_cpu_ms": round(best[False][0], 3),
        "plain_wall_ms": round(best[False][1], 3),
        "resources_cpu_ms": round(best[True][0], 3),
        "resources_wall_ms": round(best[True][1], 3),
        "rm_share_cpu_ms": round(best[True][0] - best[False][0], 3),
        "rm_share_wall_ms": round(best[True][1] - best[False][1], 3),
        "host": host,
    }
    print(
        f"{args.steps}-step chain, best of {args.rounds} alternated rounds, per step: "
        f"plain {result['plain_cpu_ms']} ms CPU / {result['plain_wall_ms']} ms wall; "
        f"asking for a licence {result['resources_cpu_ms']} / {result['resources_wall_ms']} ms; "
        f"the Resource Manager's share {result['rm_share_cpu_ms']} / "
        f"{result['rm_share_wall_ms']} ms"
    )
    print(f"host: reference loop {host['reference_loop_ms']} ms, load {host['load_average_1m']}")
    args.out.write_text(json.dumps(result, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
