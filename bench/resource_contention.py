"""Steps waiting for resources, embedded mode (in-process Resource Manager on SQLite).

1. Latency from step creation to start when capacity is free: ``start_time - created`` of
   the step run (request creation, allocation, lease renewal, status change), median of
   ``--latency-steps`` sequential steps.
2. ``--steps`` dynamic steps competing for ``--slots`` licences, each holding one for
   ``--hold`` seconds: wall time and slot utilisation = Σ hold time / (slots x wall time
   from the first start to the last end).

    python bench/resource_contention.py [--steps 200 --slots 10 --hold 0.2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from wharf import Client, ResourceSettings, pipeline, step
from wharf.config.global_config import load_config
from wharf.sdk.workspace import Workspace
from wharf.store.models import PageRequest, StepRunFilter

LICENSE = {"resources": ResourceSettings(resources={"license": 1})}


@step(enable_cache=False, settings=LICENSE)
def hold(i: int, seconds: float) -> int:
    time.sleep(seconds)
    return i


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--slots", type=int, default=10)
    parser.add_argument("--hold", type=float, default=0.2)
    parser.add_argument("--latency-steps", type=int, default=20)
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "resource_contention.json"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        os.environ["WHARF_HOME"] = home
        workspace = Workspace.open(load_config())
        try:
            client = Client(workspace.config, workspace.store)
            client._workspace = workspace
            client.ensure_resource_pool("licenses", {"license": args.slots})

            @pipeline(dynamic=True, max_parallelism=1)
            def sequential(n: int) -> None:
                for i in range(n):
                    hold(i, 0.0)

            sequential.run_in(workspace, n=2)  # warm-up: RM tables, imports
            run = sequential.run_in(workspace, n=args.latency_steps)
            records = workspace.store.steps.list(
                StepRunFilter(run_id=run.id), PageRequest(size=1000)
            ).items
            latencies = [
                (r.start_time - r.created).total_seconds() for r in records if r.start_time
            ]

            @pipeline(dynamic=True, max_parallelism=args.steps)
            def contended(n: int, seconds: float) -> None:
                hold.map(list(range(n)), seconds=[seconds] * n).wait()

            t0 = time.perf_counter()
            run = contended.run_in(workspace, n=args.steps, seconds=args.hold)
            wall = time.perf_counter() - t0
            assert run.status.value == "completed", run.status_reason
            records = workspace.store.steps.list(
                StepRunFilter(run_id=run.id), PageRequest(size=1000)
            ).items
        finally:
            workspace.close()
    starts = [r.start_time for r in records if r.start_time]
    ends = [r.end_time for r in records if r.end_time]
    busy = (max(ends) - min(starts)).total_seconds()
    result = {
        "latency_ms_p50": 1000 * statistics.median(latencies),
        "latency_ms_max": 1000 * max(latencies),
        "steps": args.steps,
        "slots": args.slots,
        "hold_s": args.hold,
        "wall_s": wall,
        "busy_span_s": busy,
        "ideal_s": args.steps * args.hold / args.slots,
        "utilisation": args.steps * args.hold / (args.slots * busy),
    }
    print(
        f"creation -> start with free capacity: p50 {result['latency_ms_p50']:.1f} ms, "
        f"max {result['latency_ms_max']:.1f} ms"
    )
    print(
        f"{args.steps} steps on {args.slots} slots holding {args.hold} s: wall {wall:.2f} s, "
        f"busy span {busy:.2f} s (ideal {result['ideal_s']:.2f} s), "
        f"utilisation {100 * result['utilisation']:.1f}%"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"benchmark": "resource_contention", **result}, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
