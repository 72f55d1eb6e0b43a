"""20 no-op steps submitted concurrently in a dynamic pipeline (embedded SQLite, inline steps).

Wall time of the whole pipeline call: placeholder, snapshot, 20 step runs with their records,
run completion. Median of ``--repeat`` runs in one fresh Wharf home.

    python bench/dynamic_submit.py [--steps 20] [--repeat 5]
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
from wharf.sdk.workspace import Workspace


@step(enable_cache=False)
def noop(i: int) -> None:
    return None


def make(n: int):
    @pipeline(dynamic=True, max_parallelism=n)
    def fan_out() -> None:
        futures = [noop.submit(i) for i in range(n)]
        for future in futures:
            future.result()

    return fan_out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "dynamic_submit.json"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        os.environ["WHARF_HOME"] = home
        workspace = Workspace.open(load_config())
        try:
            pipeline_ = make(args.steps)
            pipeline_.run_in(workspace)  # warm-up: imports, connections
            times = []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                run = pipeline_.run_in(workspace)
                times.append(time.perf_counter() - t0)
                assert run.status.value == "completed", run.status_reason
        finally:
            workspace.close()
    result = {"steps": args.steps, "median_s": statistics.median(times), "min_s": min(times)}
    print(
        f"{args.steps} concurrent no-op steps: median {result['median_s']:.3f} s, "
        f"min {result['min_s']:.3f} s"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"benchmark": "dynamic_submit", **result}, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
