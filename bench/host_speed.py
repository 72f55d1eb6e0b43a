"""How fast this host runs Python right now: one fixed CPU-bound figure to put beside a run's.

The machines these benchmarks run on are shared virtual machines whose speed drifts by a factor
of two to three between sessions and within one (the Resource Manager's CPU per admission was
0.33 ms on one stretch and 0.95 ms on another, same code). A figure of the host's own speed,
taken right before a benchmark, says which of the two a result was measured on.

The figure: the best of ``repeat`` timings of a fixed pure-Python loop (one million
multiply-adds through a generator), in milliseconds; lower is faster. It measures the
interpreter on one core, which is what bounds the GIL-bound figures (in-process Resource
Manager, steps on one process); nothing else about the machine.

    python bench/host_speed.py [--repeat 5]   # prints the figure and writes results/host_speed.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path
from typing import Any


def reference_ms(repeat: int = 5) -> float:
    """The host's speed now: best wall time of the reference loop, in ms (lower is faster)."""
    best = float("inf")
    for _ in range(repeat):
        began = time.perf_counter()
        sum(i * i for i in range(1_000_000))
        best = min(best, time.perf_counter() - began)
    return round(best * 1000, 1)


def host_figures(repeat: int = 5) -> dict[str, Any]:
    """What a benchmark's JSON records about the host it ran on."""
    return {
        "reference_loop_ms": reference_ms(repeat),
        "load_average_1m": round(os.getloadavg()[0], 2),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "host_speed.json"
    )
    args = parser.parse_args()
    figures = host_figures(args.repeat)
    print(
        f"reference loop: {figures['reference_loop_ms']} ms (best of {args.repeat}; lower is "
        f"faster), load {figures['load_average_1m']}"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"benchmark": "host_speed", **figures}, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
