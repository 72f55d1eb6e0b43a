"""200 independent steps on the Kubernetes orchestrator at max_parallelism 50 (issue 27 §7).

The bed and the orchestrator pod's probe are ``bench/k8s_cached.py``'s (emulator, process
kubelet, moto S3, embedded SQLite; a ``sitecustomize`` on the kubelet image's ``PYTHONPATH``
that is active only in an orchestrator pod). A fresh Wharf home, so every step misses the
cache and runs as a Job/pod of its own. Measured in the orchestrator pod:

- Kubernetes API calls: every HTTP request the pod's official client sends
  (``RESTClientObject.request``: creates, deletes, reads, lists, each watch opened), by verb and
  resource, divided by the number of steps. They are counted at the client because every
  process of the bed (kubelet, submitter, orchestrator pod) talks to the emulator with the same
  token and user agent, so the emulator could not tell the orchestrator's calls apart;
- CPU: the pod process's user + system time (``getrusage(RUSAGE_SELF)`` at exit: every thread),
  whole process and run loop only (``run_pipeline``'s span), per step; and the marginal CPU
  per step: the slope of the pod's CPU time (sampled as each step ends) against the steps
  ended, over the steady part of the run (``marginal_cpu_per_step``), which leaves out the
  one-time start (imports, first calls) that a run of more steps spreads thinner;
- slot-to-start latency, per step that waited for a slot: from the moment the DAG runner
  recorded the end of the step whose slot it took (``_Schedule.done`` returning it as a step
  to start) to the POST that created its Job (the client call's return), both on the pod's
  clock; and, wider, from the ended step's ``end_time`` in the store (written by its own pod
  when it finished) to the same POST, which adds the orchestrator noticing the pod's end
  through its watches and cleaning the attempt up (log to the artifact store, Job deleted).
  The kubelet's start of the new pod comes after the POST and is not in either. The first span
  is split in phases (``PHASES_PROBE``, added to the bed's probe here): slot freed -> the
  attempt's executor called (its step run created: the launcher's cache decision and write)
  -> Job POST sent (the attempt's first heartbeat written, the manifest built) -> Job created
  (the POST answered: the API server's own time, on the emulator of this bed).

    python bench/k8s_parallel.py [--steps 200] [--parallelism 50] [--out PATH] [--profile PSTATS]
        [--store-url postgresql://postgres@127.0.0.1/EMPTY_DB | --server]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import k8s_cached
from host_speed import host_figures
from k8s_cached import k8s_bed, timestamp

PHASES_PROBE = r"""
if _OUT and any("orchestrator_main" in a for a in getattr(sys, "orig_argv", [])):
    # bench/k8s_parallel.py: when each step's attempt started and its Job's POST was sent
    _data["attempts_started"] = {}
    _data["jobs_sent"] = {}

    import wharf.execution.isolated_attempts as _attempts

    _isolated_call = _attempts.IsolatedExecutor.__call__

    def _attempt_started(self, spec, *args, **kwargs):
        with _lock:
            _data["attempts_started"][spec.name] = time.time()
        return _isolated_call(self, spec, *args, **kwargs)

    _attempts.IsolatedExecutor.__call__ = _attempt_started

    _counted_request = _rest.RESTClientObject.request

    def _sending(self, method, url, *args, **kwargs):
        body = kwargs.get("body")
        if method == "POST" and isinstance(body, dict) and body.get("kind") == "Job":
            step = (body.get("metadata", {}).get("labels") or {}).get("wharf.io/step")
            if step:
                with _lock:
                    _data["jobs_sent"][step] = time.time()
        return _counted_request(self, method, url, *args, **kwargs)

    _rest.RESTClientObject.request = _sending
"""

PROFILE_PROBE = r"""
if _OUT and any("orchestrator_main" in a for a in getattr(sys, "orig_argv", [])):
    # bench/k8s_parallel.py --profile: every thread's CPU time by function (yappi), saved as a
    # pstats file at exit (before the probe's record: atexit runs last-registered first)
    import yappi

    yappi.set_clock_type("cpu")
    yappi.start()

    def _save_profile():
        yappi.stop()
        yappi.get_func_stats().save(PROFILE_PATH, type="pstat")

    atexit.register(_save_profile)
"""


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def slot_latencies(probe: dict[str, Any]) -> dict[str, Any]:
    """Per step started in a freed slot: ms from the slot freeing to its Job's creation, and
    the phases of that span (see the module docstring)."""
    created: dict[str, float] = probe["jobs_created"]
    started: dict[str, float] = probe.get("attempts_started", {})
    sent: dict[str, float] = probe.get("jobs_sent", {})
    from_done: list[float] = []
    from_end: list[float] = []
    phases: dict[str, list[float]] = {
        "to_attempt": [],
        "attempt_to_sent": [],
        "sent_to_created": [],
    }
    for slot in probe["slots"]:
        for name in slot["started"]:
            if name not in created:
                continue
            from_done.append(1000 * (created[name] - slot["at"]))
            if slot["step_end_time"] is not None:
                from_end.append(1000 * (created[name] - slot["step_end_time"]))
            if name in started and name in sent:
                phases["to_attempt"].append(1000 * (started[name] - slot["at"]))
                phases["attempt_to_sent"].append(1000 * (sent[name] - started[name]))
                phases["sent_to_created"].append(1000 * (created[name] - sent[name]))

    def summary(values: list[float]) -> dict[str, float]:
        if not values:
            return {}
        return {
            "n": len(values),
            "p50_ms": round(statistics.median(values), 1),
            "p90_ms": round(percentile(values, 0.9), 1),
            "max_ms": round(max(values), 1),
        }

    return {
        "slot_freed_to_job_created": summary(from_done),
        "step_end_to_job_created": summary(from_end),
        "phases": {
            "slot_freed_to_attempt_started": summary(phases["to_attempt"]),
            "attempt_started_to_job_post_sent": summary(phases["attempt_to_sent"]),
            "job_post_sent_to_created": summary(phases["sent_to_created"]),
        },
    }


def marginal_cpu_per_step(probe: dict[str, Any]) -> float | None:
    """Seconds of orchestrator CPU per further step in the steady part of the run: the slope
    (least squares) of the pod's CPU time against the number of steps ended, over the steps
    ending between 25 % and 90 % of the run (every slot busy; the pod's start, its one-time
    imports and first calls, and the drain at the end left out)."""
    samples = [s["cpu"] for s in probe["slots"] if "cpu" in s]
    low, high = len(samples) // 4, (len(samples) * 9) // 10
    points = list(enumerate(samples))[low:high]
    if len(points) < 10:
        return None
    xs, ys = [float(x) for x, _ in points], [y for _, y in points]
    mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
    spread = sum((x - mean_x) ** 2 for x in xs)
    return sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / spread


def figures(
    probe: dict[str, Any],
    steps: int,
    host_before: dict[str, Any],
    host_after: dict[str, Any],
    run: dict[str, Any],
) -> dict[str, Any]:
    """The benchmark's figures from an orchestrator pod's probe record."""
    reference = (host_before["reference_loop_ms"] + host_after["reference_loop_ms"]) / 2
    kube_calls = sum(probe["kube_calls"].values())
    cpu, loop_cpu = probe["cpu_total"], probe["loop_end_cpu"] - probe["loop_start_cpu"]
    latencies = slot_latencies(probe)
    marginal = marginal_cpu_per_step(probe)
    worst = latencies["slot_freed_to_job_created"].get("max_ms", 0.0)
    scale = 40 / reference
    at40 = {
        "orchestrator_cpu_ms_per_step": round(scale * 1000 * cpu / steps, 2),
        "run_loop_cpu_ms_per_step": round(scale * 1000 * loop_cpu / steps, 2),
        "marginal_cpu_ms_per_step": None if marginal is None else round(scale * 1000 * marginal, 2),
        "slot_freed_to_job_created_max_ms": round(scale * worst, 1),
    }
    return {
        "benchmark": "k8s_parallel",
        "steps": steps,
        **run,
        "kube_calls_total": kube_calls,
        "kube_calls_per_step": round(kube_calls / steps, 2),
        "kube_calls_by_kind": probe["kube_calls"],
        "orchestrator_cpu_s": round(cpu, 3),
        "orchestrator_cpu_ms_per_step": round(1000 * cpu / steps, 2),
        "run_loop_cpu_ms_per_step": round(1000 * loop_cpu / steps, 2),
        "marginal_cpu_ms_per_step": None if marginal is None else round(1000 * marginal, 2),
        "store_calls_total": sum(probe["store_calls"].values()),
        "store_calls_by_method": probe["store_calls"],
        "latency": latencies,
        "run_loop_s": round(probe["loop_end"] - probe["loop_start"], 2),
        "host_before": host_before,
        "host_after": host_after,
        "reference_ms": reference,
        "at_40ms": at40,
        "goals": {
            "kube_calls_per_step_le_4": kube_calls / steps <= 4,
            "orchestrator_cpu_le_5ms_per_step_at_40ms": at40["orchestrator_cpu_ms_per_step"] <= 5,
            "no_start_later_than_100ms_after_slot": at40["slot_freed_to_job_created_max_ms"] <= 100,
        },
    }


def report(result: dict[str, Any], out: Path) -> None:
    latencies = result["latency"]
    print(
        f"run {result.get('run_status')}: steps {result.get('step_statuses')}, step pods "
        f"{result.get('step_pods_started')}, run loop {result['run_loop_s']} s\n"
        f"Kubernetes API calls: {result['kube_calls_total']} ({result['kube_calls_per_step']} "
        f"per step): {dict(result['kube_calls_by_kind'])}\n"
        f"orchestrator CPU {result['orchestrator_cpu_s']:.2f} s = "
        f"{result['orchestrator_cpu_ms_per_step']} ms per step (run loop "
        f"{result['run_loop_cpu_ms_per_step']} ms per step; marginal, steady part "
        f"{result['marginal_cpu_ms_per_step']} ms per step)\n"
        f"slot freed -> Job created: {latencies['slot_freed_to_job_created']}\n"
        f"step end recorded -> next Job created: {latencies['step_end_to_job_created']}\n"
        f"  phases: {latencies.get('phases')}\n"
        f"reference loop {result['host_before']['reference_loop_ms']} / "
        f"{result['host_after']['reference_loop_ms']} ms -> at 40 ms: {result['at_40ms']}\n"
        f"goals: {result['goals']}"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2, default=str) + "\n")
    print(f"wrote {out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--parallelism", type=int, default=50)
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "k8s_parallel.json"
    )
    parser.add_argument(
        "--store-url",
        help="the metadata store, an empty database (e.g. postgresql://postgres@127.0.0.1/NAME); "
        "default: the embedded SQLite file, which the orchestrator and the 50 step pods share",
    )
    parser.add_argument(
        "--server",
        action="store_true",
        help="the store is a workspace server (its own processes and SQLite database; pods use "
        "run tokens), as a team runs it",
    )
    parser.add_argument(
        "--profile",
        type=Path,
        help="save the orchestrator pod's CPU profile here (pstats format; needs yappi, not a "
        "dependency of Wharf: pip install yappi); profiling inflates the CPU figures several "
        "times, so do not report those of a profiled run",
    )
    parser.add_argument(
        "--from-probe",
        type=Path,
        nargs=3,
        metavar=("PROBE_JSON", "HOST_BEFORE_JSON", "HOST_AFTER_JSON"),
        help="compute the figures from a saved probe record (a run that had to be stopped)",
    )
    args = parser.parse_args()
    if args.from_probe is not None:
        probe, before, after = (json.loads(p.read_text()) for p in args.from_probe)
        report(
            figures(probe, args.steps, before, after, {"from_probe": str(args.from_probe[0])}),
            args.out,
        )
        return
    host_before = host_figures()
    print(f"host reference loop before: {host_before['reference_loop_ms']} ms")
    config = {"max_parallelism": args.parallelism, "job_monitoring_interval": 0.5}
    k8s_cached.PROBE = k8s_cached.PROBE + PHASES_PROBE  # the bed writes it as sitecustomize
    if args.profile is not None:
        k8s_cached.PROBE += PROFILE_PROBE.replace("PROFILE_PATH", repr(str(args.profile.resolve())))
    with k8s_bed(config, args.store_url, args.server) as bed:
        run, submit_wall = bed.submit(args.steps, "k8s")
        statuses = bed.step_statuses(run)
        probe = bed.probe_of()
        step_pods = bed.pods.step_pods
    host_after = host_figures()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".probe.json").write_text(json.dumps(probe) + "\n")
    end = timestamp(run.end_time)
    info = {
        "max_parallelism": args.parallelism,
        "store": "workspace server"
        if args.server
        else "sqlite (embedded)"
        if args.store_url is None
        else args.store_url.split(":")[0],
        "run_status": run.status.value,
        "step_statuses": statuses,
        "step_pods_started": step_pods,
        "orchestrator_wall_s": round(end - probe["process_start"], 2) if end else None,
        "submitter_wall_s": round(submit_wall, 2),
    }
    report(figures(probe, args.steps, host_before, host_after, info), args.out)


if __name__ == "__main__":
    main()
