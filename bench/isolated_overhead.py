"""Isolated-step overhead: from the start of a step's process to its recorded completion.

A static pipeline of ``--steps`` sequential no-op steps on the ``local_process`` orchestrator
(every step in its own process). For each step run the figure is ``end_time - created`` of its
record: the process is started right after the record is created, and ``end_time`` is written
when the process reports completion. Also printed: wall time per step of the whole pipeline.

    python bench/isolated_overhead.py [--steps 10]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from wharf import pipeline, step
from wharf.config.global_config import load_config
from wharf.core.enums import ComponentType
from wharf.sdk.workspace import Workspace
from wharf.store.models import ComponentCreate, PageRequest, StepRunFilter


@step(enable_cache=False)
def noop(i: int) -> int:
    return i


def chain(n: int):
    @pipeline(name="isolated_chain")
    def isolated_chain() -> None:
        value = noop(i=0)
        for i in range(1, n):
            value = noop(i=i, after=value)

    return isolated_chain


def use_process_stack(workspace: Workspace) -> None:
    stacks = workspace.store.stacks
    orchestrator = stacks.create_component(
        ComponentCreate(name="procs", type=ComponentType.ORCHESTRATOR, flavor="local_process")
    )
    artifacts = stacks.get_stack(workspace.active_stack().id).components[
        ComponentType.ARTIFACT_STORE
    ]
    stacks.create_stack(
        "procs",
        {ComponentType.ORCHESTRATOR: orchestrator.id, ComponentType.ARTIFACT_STORE: artifacts},
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "isolated_overhead.json"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        os.environ["WHARF_HOME"] = home
        workspace = Workspace.open(load_config())
        use_process_stack(workspace)
        workspace.close()
        os.environ["WHARF_ACTIVE_STACK"] = "procs"
        workspace = Workspace.open(load_config())
        try:
            chain(2).run_in(workspace)  # warm-up
            t0 = time.perf_counter()
            run = chain(args.steps).run_in(workspace)
            wall = time.perf_counter() - t0
            assert run.status.value == "completed", run.status_reason
            records = workspace.store.steps.list(
                StepRunFilter(run_id=run.id), PageRequest(size=1000)
            ).items
        finally:
            workspace.close()
    spans = [(r.end_time - r.created).total_seconds() for r in records if r.end_time]
    result = {
        "steps": args.steps,
        "median_s": statistics.median(spans),
        "max_s": max(spans),
        "wall_per_step_s": wall / args.steps,
    }
    print(
        f"isolated no-op step, process start to recorded completion: median "
        f"{result['median_s']:.3f} s, max {result['max_s']:.3f} s; "
        f"pipeline wall time per step {result['wall_per_step_s']:.3f} s"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"benchmark": "isolated_overhead", **result}, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
