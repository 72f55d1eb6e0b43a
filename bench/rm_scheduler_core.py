"""Benchmark: the Resource Manager scheduler core (pure cycle, no database).

Issue 4 §10: 15,000 pending requests, 100 pools, 1,000 policies — decisions per second and cycle
time as the queue grows. Writes ``bench/results/rm_scheduler_core.json``.

Scenario (seeded, so runs are comparable):
- 100 pools, each with three capacity classes: ``cpu`` (256 CPU, 1 TiB, coordinated),
  ``a100`` (16 GPU, 128 CPU, 1 TiB, coordinated) and ``h100`` (8 GPU, 96 CPU, 1 TiB, unsafe);
- 1,000 policies: per pool 9 project policies (900 projects; random priority; a third reserve
  GPUs in ``a100``) and 1 team policy (10 teams, each team's policy exists in 10 pools), so a
  request matches one project policy and ten team policies in ten pools;
- requests: random project, one of five demand shapes (CPU-only up to 4 H100 GPUs), random
  tolerance, FIFO times one second apart.

Measured per queue size N (default 1k, 5k, 15k), each cycle timed with the cyclic GC on
(default), paused during the cycle (``gc off``: what a service can do, see ``timed``), and
paused with the configuration's index kept from an earlier cycle (``prepared``: what the
service does while its configuration is unchanged):
- ``cold``: N pending, empty pools — the cycle admits until pools are full;
- ``full``: 12,000 background requests were admitted first (every pool busy, about 6,000
  holders), then N arrive — some fit leftovers, blocked heads claim and preempt lower-priority
  borrowers, everyone else gets a wait reason (the steady state of a deep queue);
- ``churn``: the state after ``full`` with 5 % of the holders released — admissions into the
  freed capacity while the rest of the queue keeps waiting.
Decisions are status changes (admissions, preemptions, rejections); every pending request is
evaluated in every eligible pool each cycle, so "evaluated/s" is queue length / cycle time.

Usage: ``python bench/rm_scheduler_core.py [--sizes 1000 5000 15000] [--repeat 3]``
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import random
import statistics
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

from wharf.core.enums import ReclaimTolerance, ResourceRequestStatus
from wharf.resource_manager.domain import (
    CapacityClass,
    Demand,
    Grant,
    GrantResource,
    Policy,
    Pool,
    Reclaimable,
    ResourceRequest,
    SubjectChain,
    SubjectNode,
    SubjectSelector,
    SubjectType,
)
from wharf.resource_manager.scheduler import (
    Prepared,
    SchedulerOptions,
    Snapshot,
    apply_decisions,
    schedule,
)

GIB = 1024**3
T0 = datetime(2026, 1, 1, tzinfo=UTC)
NS = uuid.UUID("5e0c2b1a-7d3f-4a8e-9c61-0f2d4b6a8c10")
RESULTS = Path(__file__).parent / "results" / "rm_scheduler_core.json"
FILLERS = 12_000
"""Background requests scheduled first; more than the 100 pools can hold, so they fill them."""
TERMINAL = {"preempted", "rejected", "cancelled", "released", "expired"}

SHAPES: list[tuple[Demand, ...]] = [
    (Demand(kind="cpu", quantity=2, unit="CPU"), Demand(kind="memory", quantity=8, unit="GiB")),
    (Demand(kind="cpu", quantity=8, unit="CPU"), Demand(kind="memory", quantity=32, unit="GiB")),
    (
        Demand(kind="gpu", quantity=1),
        Demand(kind="cpu", quantity=8, unit="CPU"),
        Demand(kind="memory", quantity=64, unit="GiB"),
    ),
    (
        Demand(kind="gpu", quantity=2, class_name="a100"),
        Demand(kind="cpu", quantity=16, unit="CPU", class_name="a100"),
        Demand(kind="memory", quantity=128, unit="GiB", class_name="a100"),
    ),
    (
        Demand(kind="gpu", quantity=4, class_name="h100"),
        Demand(kind="cpu", quantity=32, unit="CPU", class_name="h100"),
        Demand(kind="memory", quantity=256, unit="GiB", class_name="h100"),
    ),
]


def uid(name: str) -> uuid.UUID:
    return uuid.uuid5(NS, name)


def build_config(rng: random.Random) -> tuple[list[Pool], list[Policy]]:
    pools: list[Pool] = []
    policies: list[Policy] = []
    for p in range(100):
        pool = Pool(
            id=uid(f"pool-{p}"),
            name=f"pool-{p}",
            rank=rng.randint(0, 3),
            classes=(
                CapacityClass(
                    name="cpu",
                    capacity={"CPU": 256_000, "memory": 1024 * GIB},
                    reclaimable=Reclaimable.COORDINATED,
                ),
                CapacityClass(
                    name="a100",
                    rank=1,
                    capacity={"GPU": 16, "CPU": 128_000, "memory": 1024 * GIB},
                    reclaimable=Reclaimable.COORDINATED,
                ),
                CapacityClass(
                    name="h100",
                    rank=2,
                    capacity={"GPU": 8, "CPU": 96_000, "memory": 1024 * GIB},
                    reclaimable=Reclaimable.UNSAFE,
                ),
            ),
            fair_sharing=p % 4 == 0,
        )
        pools.append(pool)
        for j in range(9):
            project = p * 9 + j
            grants: tuple[Grant, ...] = ()
            if j % 3 == 0:
                grants = (
                    Grant(class_name="a100", resources={"GPU": GrantResource(reserved=2)}),
                    Grant(class_name="cpu"),
                    Grant(class_name="h100"),
                )
            policies.append(
                Policy(
                    id=uid(f"policy-{project}"),
                    name=f"project-{project}",
                    pool_id=pool.id,
                    subject_selector=SubjectSelector(
                        subject_type=SubjectType.PROJECT, subject_id=f"project-{project}"
                    ),
                    priority=rng.randint(0, 100),
                    grants=grants,
                )
            )
        team = p % 10
        policies.append(
            Policy(
                id=uid(f"team-policy-{p}"),
                name=f"team-{team}-in-pool-{p}",
                pool_id=pool.id,
                subject_selector=SubjectSelector(
                    subject_type=SubjectType.WORKSPACE, attributes={"team": f"team-{team}"}
                ),
                priority=-10,
            )
        )
    return pools, policies


def build_requests(
    rng: random.Random, count: int, prefix: str = "q", start: int = 0
) -> list[ResourceRequest]:
    tolerances = [ReclaimTolerance.ANY, ReclaimTolerance.COORDINATED, ReclaimTolerance.ANY]
    requests = []
    for i in range(start, start + count):
        project = rng.randrange(900)
        team = rng.randrange(10)
        chain = SubjectChain(
            nodes=(
                SubjectNode(subject_type=SubjectType.ORGANIZATION, subject_id="org"),
                SubjectNode(
                    subject_type=SubjectType.WORKSPACE,
                    subject_id=f"ws-{team}",
                    attributes={"team": f"team-{team}"},
                ),
                SubjectNode(subject_type=SubjectType.PROJECT, subject_id=f"project-{project}"),
                SubjectNode(
                    subject_type=SubjectType.PIPELINE_RUN, subject_id=f"{prefix}-run-{i // 8}"
                ),
                SubjectNode(subject_type=SubjectType.STEP_RUN, subject_id=f"{prefix}-step-{i}"),
            )
        )
        requests.append(
            ResourceRequest(
                id=uid(f"{prefix}-request-{i}"),
                subjects=(chain,),
                demands=rng.choice(SHAPES),
                reclaim_tolerance=rng.choice(tolerances),
                created_at=T0 + timedelta(seconds=i),
                lease_expires_at=T0 + timedelta(days=1),
            )
        )
    return requests


def timed(
    snapshot: Snapshot,
    now: datetime,
    repeat: int,
    pause_gc: bool,
    prepared: Prepared | None = None,
) -> tuple[float, object]:
    """Median wall time of ``repeat`` cycles.

    ``pause_gc`` disables the cyclic garbage collector during the cycle only, as a service can
    (the cycle creates no reference cycles, and full collections over a big snapshot's heap cost
    as much as the cycle itself); collected garbage is released outside the timing.
    ``prepared``: the configuration's index kept from an earlier cycle, as the service keeps it
    while the configuration is unchanged.
    """
    times = []
    decisions = None
    for _ in range(repeat):
        gc.collect()
        if pause_gc:
            gc.disable()
        try:
            start = time.perf_counter()
            decisions = schedule(snapshot, now, prepared=prepared)
            times.append(time.perf_counter() - start)
        finally:
            gc.enable()
    return statistics.median(times), decisions


def measure(size: int, repeat: int, seed: int) -> dict[str, object]:
    rng = random.Random(seed)
    pools, policies = build_config(rng)
    queue = build_requests(rng, size, "q", start=FILLERS)
    now = T0 + timedelta(seconds=FILLERS + size + 1)
    row: dict[str, object] = {"pending": size, "pools": len(pools), "policies": len(policies)}

    # Background load admitted first, so the "full" cycle starts with every pool busy.
    fillers = Snapshot.of(
        pools=pools, policies=policies, requests=build_requests(rng, FILLERS, "f")
    )
    busy = apply_decisions(fillers, schedule(fillers, now))
    held = [r for r in busy.requests if r.status is ResourceRequestStatus.ALLOCATED]
    cold = Snapshot.of(pools=pools, policies=policies, requests=queue)
    full = Snapshot.of(pools=pools, policies=policies, requests=[*held, *queue])
    after_full = apply_decisions(full, schedule(full, now))
    holders = [r for r in after_full.requests if r.holds_capacity]
    released = {r.id for r in rng.sample(holders, k=len(holders) // 20)}
    churn = Snapshot.of(
        pools=pools,
        policies=policies,
        requests=[
            r
            for r in after_full.requests
            if r.id not in released and r.status.value not in TERMINAL
        ],
    )
    for phase, snapshot in (("cold", cold), ("full", full), ("churn", churn)):
        pending = sum(1 for r in snapshot.requests if r.status is ResourceRequestStatus.PENDING)
        seconds, decisions = timed(snapshot, now, repeat, pause_gc=False)
        paused, _ = timed(snapshot, now, repeat, pause_gc=True)
        prepared = Prepared(snapshot, SchedulerOptions().route_search_budget)
        schedule(snapshot, now, prepared=prepared)  # warm: what a service's next cycle reuses
        warm, _ = timed(snapshot, now, repeat, pause_gc=True, prepared=prepared)
        figures = _figures(seconds, decisions, pending)
        figures["cycle_ms_prepared"] = round(warm * 1000, 1)
        figures["holders"] = sum(1 for r in snapshot.requests if r.holds_capacity)
        figures["cycle_ms_gc_paused"] = round(paused * 1000, 1)
        figures["decisions_per_s_gc_paused"] = (
            round(_decision_count(decisions) / paused) if paused else 0
        )
        row[phase] = figures
    return row


def _decision_count(decisions: object) -> int:
    return (
        len(decisions.admissions)  # type: ignore[attr-defined]
        + len(decisions.preemptions)  # type: ignore[attr-defined]
        + len(decisions.rejections)  # type: ignore[attr-defined]
    )


def _figures(seconds: float, decisions: object, pending: int) -> dict[str, float | int]:
    admissions = len(decisions.admissions)  # type: ignore[attr-defined]
    preemptions = len(decisions.preemptions)  # type: ignore[attr-defined]
    rejections = len(decisions.rejections)  # type: ignore[attr-defined]
    count = admissions + preemptions + rejections
    return {
        "cycle_ms": round(seconds * 1000, 1),
        "pending_evaluated": pending,
        "admissions": admissions,
        "preemptions": preemptions,
        "rejections": rejections,
        "decisions_per_s": round(count / seconds) if seconds else 0,
        "evaluated_per_s": round(pending / seconds) if seconds else 0,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 5000, 15000])
    parser.add_argument("--repeat", type=int, default=3, help="runs per point; median is kept")
    parser.add_argument("--seed", type=int, default=4)
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)

    rows = [measure(size, args.repeat, args.seed) for size in args.sizes]
    header = f"{'pending':>8} {'cycle':>10} {'evaluated':>9} {'admit':>6} {'preempt':>7} "
    header += f"{'reject':>6} {'ms':>8} {'ms(gc off)':>10} {'ms(prep)':>8} {'decisions/s':>11} "
    header += f"{'(gc off)':>9} {'evaluated/s':>11}"
    print("Resource Manager scheduler core: 100 pools, 1,000 policies (median of runs)")
    print(header)
    for row in rows:
        for phase in ("cold", "full", "churn"):
            f = row[phase]
            assert isinstance(f, dict)
            print(
                f"{row['pending']:>8} {phase:>10} {f['pending_evaluated']:>9} {f['admissions']:>6} "
                f"{f['preemptions']:>7} {f['rejections']:>6} {f['cycle_ms']:>8} "
                f"{f['cycle_ms_gc_paused']:>10} {f['cycle_ms_prepared']:>8} {f['decisions_per_s']:>11} "
                f"{f['decisions_per_s_gc_paused']:>9} {f['evaluated_per_s']:>11}"
            )
    result = {
        "benchmark": "rm_scheduler_core",
        "command": "python bench/rm_scheduler_core.py " + " ".join(sys.argv[1:]),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "repeat": args.repeat,
        "seed": args.seed,
        "rows": rows,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
