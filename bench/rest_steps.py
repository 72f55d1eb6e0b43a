"""A 100-step pipeline over REST: HTTP requests per step and per-step overhead (issue 5 §6).

A chain of N trivial steps runs through the engine against a workspace server (own process,
SQLite behind it), and the same chain on the embedded store for comparison. Figures, each the
median over ``--repeat`` rounds (every round uses fresh seeds, so "uncached" runs execute every
step):
- requests per step: the REST store's request count for one pipeline call / N, everything
  included (pipeline, snapshot, run records, every step): uncached; cached in the workspace that
  ran it (the engine remembers the output versions it created); cached from a fresh workspace
  (a new process would see this: the cache lookup sends each cached step's output versions
  along and records the cached step, so it costs what the same workspace pays);
- the requests of one uncached run by route;
- per-step overhead: REST wall time / N, and its difference to the embedded store (medians;
  the best round is reported too, as the machine is shared and its load skews medians).

    python bench/rest_steps.py [--steps 100] [--repeat 3]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).parent))

from rest_server import ServerProcess, database
from step_overhead import chain_of

from wharf.config.global_config import load_config
from wharf.core.enums import ExecutionStatus
from wharf.sdk.workspace import Workspace
from wharf.store.rest import RestStore

_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def run_chain(workspace: Workspace, n: int, seed: int) -> float:
    t0 = time.perf_counter()
    result = chain_of(n).run_in(workspace, seed=seed)
    elapsed = time.perf_counter() - t0
    assert result.status is ExecutionStatus.COMPLETED, result.status
    return elapsed


class CountingStore(RestStore):
    """A RestStore that also counts its requests by route (ids replaced by ``{id}``)."""

    def __init__(self, url: str, credential: str) -> None:
        super().__init__(url, credential)
        self.routes: collections.Counter[str] = collections.Counter()

        def count(request: httpx.Request) -> None:
            self.routes[f"{request.method} {_ID.sub('{id}', request.url.path)}"] += 1

        self.http._client.event_hooks["request"] = [count]


def open_workspace(url: str, token: str, home: str) -> tuple[Workspace, CountingStore]:
    config = load_config({"WHARF_HOME": home, "WHARF_SERVER_URL": url, "WHARF_API_KEY": token})
    store = CountingStore(url, token)
    return Workspace.open(config, store=store), store


def engine_over_rest(url: str, token: str, n: int, repeat: int) -> dict[str, object]:
    home = tempfile.mkdtemp()
    workspace, store = open_workspace(url, token, home)
    run_chain(workspace, 10, -(10**9))  # warm-up: imports, connections, default stack
    times: dict[str, list[float]] = {"uncached": [], "cached": [], "cached_fresh": []}
    requests: dict[str, list[int]] = {"uncached": [], "cached": [], "cached_fresh": []}
    routes: collections.Counter[str] = collections.Counter()
    for i in range(repeat):
        seed = (i + 1) * 10**6  # values seed..seed+n-1: no step of an earlier round matches
        for kind in ("uncached", "cached"):
            before = store.http.request_count
            store.routes.clear()
            times[kind].append(run_chain(workspace, n, seed))
            requests[kind].append(store.http.request_count - before)
            if kind == "uncached":
                routes = collections.Counter(store.routes)
        fresh, fresh_store = open_workspace(url, token, home)
        before = fresh_store.http.request_count
        times["cached_fresh"].append(run_chain(fresh, n, seed))
        requests["cached_fresh"].append(fresh_store.http.request_count - before)
        fresh.close()
    workspace.close()
    result: dict[str, object] = {}
    for kind, seconds in times.items():
        result[f"{kind}_ms_per_step"] = 1000 * statistics.median(seconds) / n
        result[f"{kind}_best_ms_per_step"] = 1000 * min(seconds) / n
        result[f"{kind}_requests_per_step"] = statistics.median(requests[kind]) / n
    result["uncached_requests_by_route"] = dict(routes.most_common())
    return result


def embedded(n: int, repeat: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as home:
        workspace = Workspace.open(load_config({"WHARF_HOME": home}))
        run_chain(workspace, 10, -(10**9))
        uncached = [run_chain(workspace, n, (i + 1) * 10**6) for i in range(repeat)]
        workspace.close()
    return {
        "uncached_ms_per_step": 1000 * statistics.median(uncached) / n,
        "uncached_best_ms_per_step": 1000 * min(uncached) / n,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "rest_steps.json"
    )
    args = parser.parse_args()
    for name in ("WHARF_SERVER_URL", "WHARF_API_KEY", "WHARF_PROJECT"):
        os.environ.pop(name, None)
    n = args.steps
    base = embedded(n, args.repeat)
    with database("sqlite") as url, ServerProcess(url, workers=1) as server:
        rest = engine_over_rest(server.url, server.admin_token(), n, args.repeat)
    overhead = float(rest["uncached_ms_per_step"]) - base["uncached_ms_per_step"]  # type: ignore[arg-type]
    best_overhead = (
        float(rest["uncached_best_ms_per_step"]) - base["uncached_best_ms_per_step"]  # type: ignore[arg-type]
    )
    result = {
        "benchmark": "rest_steps",
        "steps": n,
        "server": "1 worker, SQLite",
        "engine_over_rest": rest,
        "embedded": base,
        "rest_overhead_ms_per_step": overhead,
        "rest_overhead_best_ms_per_step": best_overhead,
        "goals": {"requests_per_step": 3, "overhead_ms_per_step": 10},
        "load_average_1m": os.getloadavg()[0],
        "cpus": os.cpu_count(),
    }
    print(f"{n}-step chain over REST (server: 1 worker, SQLite):")
    for kind, label in (
        ("uncached", "uncached"),
        ("cached", "cached, same workspace"),
        ("cached_fresh", "cached, fresh workspace"),
    ):
        print(
            f"  {label:24} {rest[f'{kind}_requests_per_step']:.2f} requests/step, "
            f"{rest[f'{kind}_ms_per_step']:.2f} ms/step (best {rest[f'{kind}_best_ms_per_step']:.2f})"
        )
    print(
        f"  embedded (uncached)      {base['uncached_ms_per_step']:.2f} ms/step "
        f"(best {base['uncached_best_ms_per_step']:.2f})"
    )
    print(f"  REST overhead            {overhead:.2f} ms/step (uncached; best {best_overhead:.2f})")
    print(f"  uncached run by route:   {rest['uncached_requests_by_route']}")
    print(f"  load average (1 min):    {result['load_average_1m']:.2f}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
