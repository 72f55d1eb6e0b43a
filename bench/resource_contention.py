"""Steps waiting for resources, embedded mode (in-process Resource Manager on SQLite).

1. Latency from step creation to start when capacity is free: the step run's ``start_time``
   minus the moment its creation began, the earlier of its request's and its own ``created``
   (the workspace makes a queued step's request before it writes the step run): request
   creation, allocation, the step run's record, lease renewal, status change; median of
   ``--latency-steps`` sequential steps.
2. ``--steps`` dynamic (inline) steps competing for ``--slots`` licences, each holding one for
   ``--hold`` seconds: wall time and slot utilisation = Σ hold time / (slots x wall time
   from the first start to the last end). Also, to tell where lost time goes: the hand-off
   gap (a step's recorded end to the next recorded start), the RM's own occupancy,
   Σ (released_at - allocated_at) over the same span, and the edges of that span: how far
   apart the first ``--slots`` steps started and the last ``--slots`` ended.
3. Time from a preemption decision to the victim recorded cancelled (``--preemptions`` trials,
   heartbeat every ``--heartbeat`` seconds, ``local_process`` stack): a low-priority isolated
   step with tolerance ``coordinated`` holds the only licence of a reclaimable pool; a step of
   a higher-priority pipeline asks for it. The decision is when the victim's request goes
   ``preempting`` (polled every 5 ms: the figure errs long by at most one poll); the figure is
   the victim step run's ``end_time`` minus that instant (its status must be ``cancelled``). The urgent pipeline
   starts a random fraction of a heartbeat period after the victim started, so the trials
   sample where in the victim's period the decision falls. Also printed: decision to the
   urgent step's start (its waiter is in another workspace, so the wait room's watch, not a
   release of its own process, wakes it).

    python bench/resource_contention.py [--steps 200 --slots 10 --hold 0.2 --preemptions 5]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from host_speed import host_figures

from wharf import Client, ResourceSettings, pipeline, step
from wharf.config.global_config import load_config
from wharf.core.enums import ComponentType, ExecutionStatus, ResourceRequestStatus
from wharf.resource_manager.contract.models import PageRequest as RMPageRequest
from wharf.resource_manager.contract.models import PolicyCreate, RequestFilter
from wharf.resource_manager.domain import SubjectSelector, SubjectType
from wharf.sdk.pools import ensure_pool
from wharf.sdk.workspace import Workspace
from wharf.store.models import ComponentCreate, PageRequest, StepRunFilter, StepRunRecord

LICENSE = {"resources": ResourceSettings(resources={"license": 1})}
RECLAIMABLE = {
    "resources": ResourceSettings(resources={"license": 1}, reclaim_tolerance="coordinated")
}


@step(enable_cache=False, settings=LICENSE)
def hold(i: int, seconds: float) -> int:
    time.sleep(seconds)
    return i


@step(enable_cache=False)
def occupy(stop_file: str) -> int:
    """The victim: holds its licence until ``stop_file`` exists (a minute at most)."""
    deadline = time.monotonic() + 60
    while not Path(stop_file).exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    return 1


@step(enable_cache=False)
def urgent() -> int:
    return 1


def creation_began(record: StepRunRecord, get_request: Callable[[Any], Any]) -> datetime:
    """When the creation of a queued step run began: its request is made first (one clock:
    the machine's)."""
    if record.resource_request_id is None:
        return record.created
    return min(record.created, get_request(record.resource_request_id).created_at)


def _ms(seconds: float) -> float:
    return round(1000 * seconds, 1)


# ---------------------------------------------------------------------- contention


def contention(args: argparse.Namespace) -> dict[str, Any]:
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
        requests = workspace.requests
        assert requests is not None
        latencies = [
            (r.start_time - creation_began(r, requests.get)).total_seconds()
            for r in _steps(workspace, run.id)
            if r.start_time
        ]

        @pipeline(dynamic=True, max_parallelism=args.steps)
        def contended(n: int, seconds: float) -> None:
            hold.map(list(range(n)), seconds=[seconds] * n).wait()

        t0 = time.perf_counter()
        run = contended.run_in(workspace, n=args.steps, seconds=args.hold)
        wall = time.perf_counter() - t0
        assert run.status.value == "completed", run.status_reason
        records = _steps(workspace, run.id)
        requests = workspace.requests
        assert requests is not None
        held = requests.list(
            RequestFilter(metadata={"pipeline_run_id": str(run.id)}), RMPageRequest(size=1000)
        ).items
    finally:
        workspace.close()
    starts = [r.start_time for r in records if r.start_time]
    ends = [r.end_time for r in records if r.end_time]
    first, last = min(starts), max(ends)
    busy = (last - first).total_seconds()
    occupied = sum(
        (min(r.released_at, last) - max(r.allocated_at, first)).total_seconds()
        for r in held
        if r.allocated_at and r.released_at
    )
    gaps = _hand_off_gaps(records)
    phases = _phases(records, held, args.hold)
    ordered_starts, ordered_ends = sorted(starts), sorted(ends)
    slots = min(args.slots, len(ordered_starts))
    return {
        "latency_ms_p50": _ms(statistics.median(latencies)),
        "latency_ms_max": _ms(max(latencies)),
        "steps": args.steps,
        "slots": args.slots,
        "hold_s": args.hold,
        "wall_s": round(wall, 3),
        "busy_span_s": round(busy, 3),
        "ideal_s": args.steps * args.hold / args.slots,
        "utilisation": round(args.steps * args.hold / (args.slots * busy), 4),
        "rm_occupancy": round(occupied / (args.slots * busy), 4),
        "hand_off_gap_ms_p50": _ms(statistics.median(gaps)),
        "hand_off_gap_ms_mean": _ms(statistics.mean(gaps)),
        # the edges of the busy span: the first wave starting, the last one ending
        "first_wave_spread_ms": _ms((ordered_starts[slots - 1] - first).total_seconds()),
        "last_wave_spread_ms": _ms((last - ordered_ends[-slots]).total_seconds()),
        **phases,
    }


def _phases(records: list[StepRunRecord], held: list[Any], hold: float) -> dict[str, float]:
    """Mean time inside each allocation that is not the step's own work: allocated -> step
    recorded running, running -> ended beyond the hold, ended -> request released."""
    by_step = {r.metadata.get("step_run_id"): r for r in held}
    before, during, after = [], [], []
    for step_run in records:
        request = by_step.get(str(step_run.id))
        if request is None or not (request.allocated_at and request.released_at):
            continue
        if not (step_run.start_time and step_run.end_time):
            continue
        before.append((step_run.start_time - request.allocated_at).total_seconds())
        during.append((step_run.end_time - step_run.start_time).total_seconds() - hold)
        after.append((request.released_at - step_run.end_time).total_seconds())
    if not before:
        return {}
    return {
        "allocated_to_running_ms_mean": _ms(statistics.mean(before)),
        "running_beyond_hold_ms_mean": _ms(statistics.mean(during)),
        "ended_to_released_ms_mean": _ms(statistics.mean(after)),
    }


def _steps(workspace: Workspace, run_id: Any) -> list[StepRunRecord]:
    return workspace.store.steps.list(StepRunFilter(run_id=run_id), PageRequest(size=1000)).items


def _hand_off_gaps(records: list[StepRunRecord]) -> list[float]:
    """For each start after the first ``slots``: the time since the oldest unclaimed end."""
    events = sorted(
        [(r.end_time, 0) for r in records if r.end_time]
        + [(r.start_time, 1) for r in records if r.start_time]
    )
    freed: list[datetime] = []
    gaps = []
    for at, is_start in events:
        if not is_start:
            freed.append(at)
        elif freed:
            gaps.append((at - freed.pop(0)).total_seconds())
    return gaps or [0.0]


# ---------------------------------------------------------------------- preemption


def preemption(args: argparse.Namespace, home: Path) -> dict[str, Any]:
    os.environ["WHARF_HEARTBEAT_INTERVAL"] = str(args.heartbeat)
    setup = Workspace.open(load_config())
    try:
        _process_stack(setup)
        _contended_pool(setup)
    finally:
        setup.close()
    os.environ["WHARF_ACTIVE_STACK"] = "procs"
    victim_step = occupy.with_options(runtime="isolated", settings=RECLAIMABLE)
    urgent_step = urgent.with_options(runtime="isolated", settings=LICENSE)

    @pipeline(name="victim_pipe", dynamic=True)
    def victim_pipe(stop_file: str) -> None:
        victim_step(stop_file=stop_file)

    @pipeline(name="urgent_pipe", dynamic=True)
    def urgent_pipe() -> None:
        urgent_step()

    to_cancelled, to_start = [], []
    for trial in range(args.preemptions + 1):  # the first one warms up the step processes
        stop = home / f"stop-{trial}"
        delay = random.Random(trial).uniform(0, args.heartbeat)
        cancelled, started = _one_preemption(victim_pipe, urgent_pipe, stop, delay)
        if trial:
            to_cancelled.append(cancelled)
            to_start.append(started)
    return {
        "heartbeat_interval_s": args.heartbeat,
        "trials": args.preemptions,
        "to_cancelled_s_p50": round(statistics.median(to_cancelled), 3),
        "to_cancelled_s_max": round(max(to_cancelled), 3),
        "goal_s": args.heartbeat + 1.0,
        "to_urgent_start_s_p50": round(statistics.median(to_start), 3),
        "to_urgent_start_s_max": round(max(to_start), 3),
        "to_cancelled_s": [round(x, 3) for x in to_cancelled],
    }


def _process_stack(workspace: Workspace) -> None:
    """A ``procs`` stack: the ``local_process`` orchestrator, the default artifact store."""
    stacks = workspace.store.stacks
    orchestrator = stacks.create_component(
        ComponentCreate(name="procs", type=ComponentType.ORCHESTRATOR, flavor="local_process")
    )
    default = stacks.get_stack(workspace.active_stack().id)
    artifacts = default.components[ComponentType.ARTIFACT_STORE]
    stacks.create_stack(
        "procs",
        {ComponentType.ORCHESTRATOR: orchestrator.id, ComponentType.ARTIFACT_STORE: artifacts},
    )


def _contended_pool(workspace: Workspace) -> None:
    """One reclaimable licence; ``urgent_pipe``'s policy outranks ``victim_pipe``'s."""
    rm = workspace.resource_manager()
    ensure_pool(
        rm, "shared", {"license": 1}, account=workspace.user.name, reclaimable="coordinated"
    )
    rm.policies.delete(f"shared-{workspace.user.name}")
    for pipeline_name, priority in (("victim_pipe", 0), ("urgent_pipe", 10)):
        rm.policies.create(
            PolicyCreate(
                name=pipeline_name,
                pool="shared",
                priority=priority,
                subject_selector=SubjectSelector(
                    subject_type=SubjectType.PIPELINE, attributes={"name": pipeline_name}
                ),
            )
        )


def _one_preemption(
    victim_pipe: Any, urgent_pipe: Any, stop: Path, delay: float
) -> tuple[float, float]:
    """(decision -> victim recorded cancelled, decision -> urgent step started), seconds."""
    runs: dict[str, Any] = {}

    def run_in_thread(name: str, launch: Callable[[Workspace], Any]) -> threading.Thread:
        def body() -> None:
            workspace = Workspace.open(load_config())
            try:
                runs[name] = launch(workspace)
            finally:
                workspace.close()

        thread = threading.Thread(target=body, name=name)
        thread.start()
        return thread

    watch = Workspace.open(load_config())
    try:
        requests = watch.requests
        assert requests is not None
        victim_thread = run_in_thread(
            "victim", lambda ws: victim_pipe.run_in(ws, stop_file=str(stop))
        )
        holder = _wait_for_running(watch, "occupy")
        assert holder.resource_request_id is not None
        time.sleep(delay)  # samples where in the victim's heartbeat period the decision falls
        urgent_thread = run_in_thread("urgent", urgent_pipe.run_in)
        decided = _preempted_after(requests, holder.resource_request_id)
        urgent_thread.join(120)
        stop.write_text("stop")  # only matters if the victim was not preempted
        victim_thread.join(120)
        victim = watch.store.steps.get(holder.id)
        winner = _steps(watch, runs["urgent"].id)[0]
        victim_request = requests.get(holder.resource_request_id)
    finally:
        watch.close()
    assert victim.status is ExecutionStatus.CANCELLED, (victim.status, victim.status_reason)
    assert victim_request.status is ResourceRequestStatus.PREEMPTED, victim_request.status
    assert victim.end_time is not None and winner.start_time is not None
    return victim.end_time.timestamp() - decided, winner.start_time.timestamp() - decided


def _preempted_after(requests: Any, request_id: Any) -> float:
    """When the victim's request went preempting (epoch seconds), by polling it every 5 ms:
    the start of the last read that still saw it allocated, so the figure errs long (by at
    most one poll), never short. The RM keeps no history of status changes to ask instead."""
    seen_allocated = time.time()
    deadline = seen_allocated + 60
    while time.time() < deadline:
        began = time.time()
        status = requests.get(request_id).status
        if status is not ResourceRequestStatus.ALLOCATED:
            assert status in (ResourceRequestStatus.PREEMPTING, ResourceRequestStatus.PREEMPTED)
            return seen_allocated
        seen_allocated = began
        time.sleep(0.005)
    raise TimeoutError("the victim was never preempted")


def _wait_for_running(workspace: Workspace, name: str) -> StepRunRecord:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        running = workspace.store.steps.list(
            StepRunFilter(status=ExecutionStatus.RUNNING, names=(name,)), PageRequest(size=10)
        ).items
        if running:
            return running[0]
        time.sleep(0.01)
    raise TimeoutError(f"step '{name}' never started")


# ---------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--slots", type=int, default=10)
    parser.add_argument("--hold", type=float, default=0.2)
    parser.add_argument("--latency-steps", type=int, default=20)
    parser.add_argument("--preemptions", type=int, default=5, help="0 skips part 3")
    parser.add_argument("--heartbeat", type=float, default=1.0)
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "resource_contention.json"
    )
    args = parser.parse_args()
    host = host_figures()
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as home:
        os.environ["WHARF_HOME"] = str(Path(home) / "contention")
        result = contention(args)
        if args.preemptions:
            os.environ["WHARF_HOME"] = str(Path(home) / "preemption")
            result["preemption"] = preemption(args, Path(home))
    result["load_average_1m"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
    print(
        f"creation -> start with free capacity: p50 {result['latency_ms_p50']:.1f} ms, "
        f"max {result['latency_ms_max']:.1f} ms"
    )
    print(
        f"{args.steps} steps on {args.slots} slots holding {args.hold} s: "
        f"wall {result['wall_s']:.2f} s, busy span {result['busy_span_s']:.2f} s "
        f"(ideal {result['ideal_s']:.2f} s), utilisation {100 * result['utilisation']:.1f}% "
        f"(RM occupancy {100 * result['rm_occupancy']:.1f}%, hand-off gap p50 "
        f"{result['hand_off_gap_ms_p50']:.1f} ms, mean {result['hand_off_gap_ms_mean']:.1f} ms)"
    )
    print(
        f"edges of the busy span: the first {args.slots} starts spread over "
        f"{result['first_wave_spread_ms']:.1f} ms, the last {args.slots} ends over "
        f"{result['last_wave_spread_ms']:.1f} ms"
    )
    if "allocated_to_running_ms_mean" in result:
        print(
            "inside each allocation, besides the hold (means): allocated -> running "
            f"{result['allocated_to_running_ms_mean']:.1f} ms, running beyond the hold "
            f"{result['running_beyond_hold_ms_mean']:.1f} ms, ended -> released "
            f"{result['ended_to_released_ms_mean']:.1f} ms"
        )
    if "preemption" in result:
        p = result["preemption"]
        print(
            f"preemption decision -> victim cancelled (heartbeat {p['heartbeat_interval_s']} s, "
            f"{p['trials']} trials): p50 {p['to_cancelled_s_p50']:.2f} s, max "
            f"{p['to_cancelled_s_max']:.2f} s (goal <= {p['goal_s']:.1f} s); "
            f"-> urgent step started: p50 {p['to_urgent_start_s_p50']:.2f} s, "
            f"max {p['to_urgent_start_s_max']:.2f} s"
        )
    print(f"load average (1 min) before/after: {result['load_average_1m']}")
    print(f"host speed before the run: reference loop {host['reference_loop_ms']} ms")
    result["host"] = host
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"benchmark": "resource_contention", **result}, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
