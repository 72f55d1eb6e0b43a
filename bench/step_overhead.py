"""Per-step overhead of a chain of N trivial steps on the embedded SQLite store.

For each N, a fresh Wharf home; the first run executes every step (cache misses: the key is
computed and looked up before each step), the second reuses every step from the cache.
Per-step overhead = wall time of the pipeline call / N (compile, snapshot, run records,
artifacts and cache lookups included). The marginal cost of a step, free of what a run costs
once (compile, snapshot, run records, thread pool), is also printed: the slope between two sizes,
(T(N2) - T(N1)) / (N2 - N1).

    python bench/step_overhead.py [--sizes 10 100 1000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from wharf import pipeline, step
from wharf.config.global_config import load_config
from wharf.sdk.workspace import Workspace


@step
def start(seed: int) -> int:
    return seed


@step
def inc(x: int) -> int:
    return x + 1


def chain_of(n: int):
    @pipeline(name=f"chain_{n}", max_parallelism=1)
    def chain(seed: int) -> None:
        value = start(seed=seed)
        for _ in range(n - 1):
            value = inc(value)

    return chain


def measure(n: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as home:
        os.environ["WHARF_HOME"] = home
        workspace = Workspace.open(load_config())
        try:
            chain_of(10).run_in(workspace, seed=-(10**9))  # warm-up: imports, connections
            t0 = time.perf_counter()
            first = chain_of(n).run_in(workspace, seed=0)
            uncached = time.perf_counter() - t0
            t0 = time.perf_counter()
            second = chain_of(n).run_in(workspace, seed=0)
            cached = time.perf_counter() - t0
            assert first.status.value == "completed" and second.status.value == "completed"
        finally:
            workspace.close()
    return {"uncached_s": uncached, "cached_s": cached}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "step_overhead.json"
    )
    args = parser.parse_args()
    results = []
    for n in args.sizes:
        runs = [measure(n) for _ in range(args.repeat)]
        uncached = statistics.median(r["uncached_s"] for r in runs)
        cached = statistics.median(r["cached_s"] for r in runs)
        row = {
            "steps": n,
            "uncached_ms_per_step": 1000 * uncached / n,
            "cached_ms_per_step": 1000 * cached / n,
            "uncached_total_s": uncached,
            "cached_total_s": cached,
        }
        results.append(row)
        print(
            f"N={n:5d}  uncached {row['uncached_ms_per_step']:.3f} ms/step "
            f"({uncached:.3f} s)   cached {row['cached_ms_per_step']:.3f} ms/step ({cached:.3f} s)"
        )
    marginal = []
    for a, b in itertools.pairwise(results):
        span = b["steps"] - a["steps"]
        row = {
            "from_steps": a["steps"],
            "to_steps": b["steps"],
            "uncached_ms_per_step": 1000 * (b["uncached_total_s"] - a["uncached_total_s"]) / span,
            "cached_ms_per_step": 1000 * (b["cached_total_s"] - a["cached_total_s"]) / span,
        }
        marginal.append(row)
        print(
            f"marginal N={a['steps']}->{b['steps']}  uncached "
            f"{row['uncached_ms_per_step']:.3f} ms/step   cached {row['cached_ms_per_step']:.3f} ms/step"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {"benchmark": "step_overhead", "results": results, "marginal": marginal}, indent=2
        )
    )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
