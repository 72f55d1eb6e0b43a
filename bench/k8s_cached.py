"""A 1,000-step fully cached pipeline on the Kubernetes orchestrator (issue 27 §7).

The test bed of the end-to-end tests: the API emulator in this process, the process kubelet
(pods are local processes) and a moto S3 server for artifacts each in a process of its own (so
they do not compete with the emulator for this process's GIL), and the embedded SQLite store,
which the pods open directly. A pipeline of ``--steps`` independent trivial steps (each its own
parameter, so each its own cache key) runs once to fill the cache, then again: every step is
cached, so the second run's orchestrator pod starts no step pod. Measured on that second run:

- store calls made for cache decisions, counted at the store port inside the orchestrator pod
  (a separate process: Wharf has no hook for it, so the kubelet gives the "image" a
  ``PYTHONPATH`` entry whose ``sitecustomize`` — written by this script, active only in an
  orchestrator pod — wraps the store's repositories the pod opens and counts each call, and
  counts the SQL statements SQLite runs through ``sqlite3``'s trace callback, installed on
  each connection by SQLAlchemy's ``connect`` event: the store's own direct statements bypass
  ``before_cursor_execute``). A call counts as a
  cache decision when it is made inside the launcher's first-attempt creation
  (``StepLauncher._create_attempt``, attempt 1), inside a batch of the run's cache decisions
  (``CacheDecisions.run_batch``, on whichever thread runs it: per batch and ``record_hit``
  value, one ``steps.find_cached_or_create_many`` looking its steps up and, once the hits'
  outputs are seen in the artifact store, one recording them) or while publishing a hit
  (``CacheDecisions.publish``); the batches' sizes (steps with a slot, steps looked at ahead)
  are recorded too;
- orchestrator wall time: from the orchestrator pod's process start (``/proc/self/stat``, as
  the probe reads it) to the run's ``end_time`` in the store; and the run loop's own span.

``--fill local`` (default) fills the cache through the same pipeline on a local orchestrator
with the same S3 artifact store (the cache key names the project, artifact store, code and
parameters, not the orchestrator), because 1,000 step pods take long on this 2-core machine;
``--fill kubernetes`` fills it with real step pods (``--fill-steps`` caps that run's size).

    python bench/k8s_cached.py [--steps 1000] [--fill local|kubernetes] [--out PATH]

``bench/k8s_parallel.py`` reuses the bed defined here and its probe (``bench/k8s_probe.py``).
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.kube, tests.artifacts

from host_speed import host_figures
from k8s_probe import PROBE
from tests.artifacts.s3_server import CREDENTIALS, MotoServer
from tests.kube.emulator import Emulator
from tests.kube.emulator.watchers import WatchEvent

import wharf
from wharf.config.global_config import load_config
from wharf.core.enums import ComponentType
from wharf.sdk import stacks
from wharf.sdk.workspace import Workspace
from wharf.store.models import PageRequest, PipelineRunRecord, StepRunFilter

IMAGE = "wharf/python:3.11"
BOUND = 3600.0
REPO = Path(__file__).resolve().parent.parent

STEPS_MODULE = """
from wharf import pipeline, step


@step
def trivial(i: int) -> int:
    return i


def wide(n: int, parallelism: int | None = None):
    @pipeline(name=f"wide_{n}", max_parallelism=parallelism)
    def wide_pipeline() -> None:
        for i in range(n):
            trivial(i)

    return wide_pipeline
"""

SCRIPT = """
import sys

import bench_steps

if __name__ == "__main__":
    n = int(sys.argv[1])
    parallelism = int(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[2] != "-" else None
    run = bench_steps.wide(n, parallelism)()
    print("RUN", run.id, run.status.value)
"""


@dataclass
class PodTimes:
    """What the emulator's store saw of pods: creation per pod name (step label, if any)."""

    created: dict[str, float] = field(default_factory=dict)
    step_pods: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, event: WatchEvent) -> None:
        if event.type != "ADDED" or event.rtype is None or event.rtype.kind != "Pod":
            return
        labels = event.object["metadata"].get("labels", {})
        with self.lock:
            self.created[event.object["metadata"]["name"]] = time.time()
            if "wharf.io/step" in labels:
                self.step_pods += 1


@dataclass
class Bed:
    emulator: Emulator
    workspace: Workspace
    project: Path
    probe_dir: Path
    pods: PodTimes
    env: dict[str, str]

    def submit(self, steps: int, stack: str = "k8s", parallelism: int | None = None) -> Any:
        """Run the wide pipeline of ``steps`` steps on ``stack`` through a fresh submitter
        process; the run as the store has it and the submitter's wall time."""
        began = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "run.py", str(steps), str(parallelism or "-")],
            check=False,
            capture_output=True,
            text=True,
            timeout=BOUND,
            env={**self.env, "WHARF_ACTIVE_STACK": stack},
            cwd=self.project,
        )
        wall = time.perf_counter() - began
        lines = [line for line in done.stdout.splitlines() if line.startswith("RUN ")]
        if done.returncode != 0 or not lines:
            raise RuntimeError(f"the run failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
        run_id = lines[-1].split()[1]
        runs = self.workspace.store.runs.list(page=PageRequest(size=100)).items
        return next(r for r in runs if str(r.id) == run_id), wall

    def probe_of(self, pid: int | None = None) -> dict[str, Any]:
        """The newest probe record of an orchestrator pod that ran the run loop (a later pod
        of the same Job that found the run ended runs none), or the one of ``pid``."""
        files = sorted(self.probe_dir.glob("orchestrator-*.json"), key=lambda p: p.stat().st_mtime)
        if pid is not None:
            files = [p for p in files if p.name == f"orchestrator-{pid}.json"]
        records = [json.loads(p.read_text()) for p in files]
        records = [r for r in records if "loop_end_cpu" in r]
        if not records:
            raise RuntimeError(f"no probe record of a run loop under {self.probe_dir}")
        return records[-1]

    def step_statuses(self, run: PipelineRunRecord) -> dict[str, int]:
        counts: dict[str, int] = {}
        page = self.workspace.store.steps.list(StepRunFilter(run_id=run.id), PageRequest(size=1000))
        for record in page.items:
            counts[record.status.value] = counts.get(record.status.value, 0) + 1
        return counts


@contextmanager
def kubelet_process(emulator: Emulator, image_env: dict[str, str], log: Path) -> Iterator[None]:
    """The process kubelet (``python -m tests.kube.kubelet``) in a process of its own, ready
    (its pod watch open: nothing else watches yet) when this enters; SIGTERM on exit (it kills
    and reaps its pods)."""
    command = [sys.executable, "-m", "tests.kube.kubelet", "--kubeconfig"]
    command += [str(emulator.kubeconfig_path), "--image", f"{IMAGE}={sys.executable}"]
    command += ["--log-dir", str(emulator.log_dir)]
    command += [f"--env={name}={value}" for name, value in image_env.items()]
    with log.open("ab") as output:
        process = subprocess.Popen(command, cwd=REPO, stdout=output, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while emulator.open_watches < 1:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the kubelet did not become ready (see {log})")
            time.sleep(0.05)  # polling another process's readiness, with a deadline
        yield
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


SERVER_ADMIN_PASSWORD = "bench-admin-password"


@contextmanager
def workspace_server(root: Path, home: Path) -> Iterator[str]:
    """A workspace server on a SQLite database of its own, in processes of its own (``wharf
    server up``), with its administrator logged in from ``home``: the team's topology, where the
    server is the store's one writer and pods reach it with run tokens. Yields its URL."""
    wharf = str(Path(sys.executable).parent / "wharf")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    server_env = {**os.environ, "WHARF_HOME": str(root / "server-home")}
    up = [wharf, "server", "up", "--port", str(port), "--db-url", f"sqlite:///{root}/server.db"]
    up += ["--admin-username", "admin", "--admin-password", SERVER_ADMIN_PASSWORD]
    subprocess.run(up, env=server_env, check=True, capture_output=True, timeout=120)
    try:
        login = [wharf, "login", url, "-u", "admin", "--password", SERVER_ADMIN_PASSWORD]
        subprocess.run(
            login, env={**os.environ, "WHARF_HOME": str(home)}, check=True, capture_output=True
        )
        yield url
    finally:
        subprocess.run([wharf, "server", "down"], env=server_env, check=False, timeout=120)


@contextmanager
def k8s_bed(
    orchestrator_config: dict[str, Any] | None = None,
    store_url: str | None = None,
    server: bool = False,
) -> Iterator[Bed]:
    """The e2e tests' bed: emulator; process kubelet (with the probe on its PYTHONPATH) and moto
    S3 in processes of their own; a Wharf home with stacks ``k8s`` (kubernetes + S3) and
    ``local`` (local + same S3). The store: a workspace server (``server``,
    :func:`workspace_server`), else ``store_url`` (an empty database, e.g. PostgreSQL), else the
    embedded SQLite file of a fresh Wharf home. Wharf's modules are compiled to bytecode first,
    as in an image that installed Wharf with pip (the pods would otherwise compile every module
    they import at each start when bytecode is not written, e.g. ``PYTHONDONTWRITEBYTECODE``)."""
    compileall.compile_dir(str(Path(wharf.__file__).parent), quiet=1)
    with tempfile.TemporaryDirectory(prefix="wharf-bench-k8s-") as root_name:
        root = Path(root_name)
        probe_dir = root / "probe"
        probe_dir.mkdir()
        (probe_dir / "sitecustomize.py").write_text(PROBE)
        project = root / "project"
        project.mkdir()
        (project / "bench_steps.py").write_text(STEPS_MODULE)
        (project / "run.py").write_text(SCRIPT)
        os.environ["WHARF_HOME"] = str(root / "home")
        for name in ("WHARF_STORE_URL", "WHARF_ARTIFACT_ROOT", "WHARF_SERVER_URL", "PYTHONPATH"):
            os.environ.pop(name, None)
        if store_url is not None:
            os.environ["WHARF_STORE_URL"] = store_url
        with contextlib.ExitStack() as cleanup:  # the server, if any, stops last
            if server:
                cleanup.enter_context(workspace_server(root, root / "home"))
            s3 = MotoServer()
            cleanup.callback(s3.stop)
            bucket = s3.new_bucket()
            with Emulator() as emulator:
                pods = PodTimes()
                emulator.store.subscribe(pods)
                os.environ["KUBECONFIG"] = str(emulator.kubeconfig_path)
                image_env = {
                    **CREDENTIALS,
                    "WHARF_HOME": str(root / "pod-home"),
                    "PYTHONPATH": str(probe_dir),
                    "WHARF_BENCH_PROBE_DIR": str(probe_dir),
                }
                with kubelet_process(emulator, image_env, root / "kubelet.log"):
                    ws = Workspace.open(load_config())
                    try:
                        stacks.register_component(
                            ws,
                            "remote",
                            ComponentType.ARTIFACT_STORE,
                            "fsspec",
                            {"path": f"s3://{bucket}/wharf", "endpoint_url": s3.endpoint},
                        )
                        stacks.register_component(
                            ws,
                            "k8s",
                            ComponentType.ORCHESTRATOR,
                            "kubernetes",
                            {"image": IMAGE, "namespace": "default", **(orchestrator_config or {})},
                        )
                        stacks.register_stack(
                            ws, "k8s", orchestrator="k8s", artifact_store="remote"
                        )
                        stacks.register_component(
                            ws, "here", ComponentType.ORCHESTRATOR, "local", {}
                        )
                        stacks.register_stack(
                            ws, "local", orchestrator="here", artifact_store="remote"
                        )
                        env = {**os.environ, **CREDENTIALS}  # default heartbeat (15 s)
                        yield Bed(emulator, ws, project, probe_dir, pods, env)
                    finally:
                        ws.close()


def timestamp(value: datetime | None) -> float | None:
    return value.timestamp() if value is not None else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--fill", choices=("local", "kubernetes"), default="local")
    parser.add_argument("--fill-steps", type=int, default=None, help="kubernetes fill: size")
    parser.add_argument("--parallelism", type=int, default=None, help="pipeline max_parallelism")
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "k8s_cached.json"
    )
    args = parser.parse_args()
    host_before = host_figures()
    print(f"host reference loop before: {host_before['reference_loop_ms']} ms")
    with k8s_bed({"job_monitoring_interval": 0.5}) as bed:
        fill_steps = args.steps if args.fill == "local" else (args.fill_steps or args.steps)
        fill_stack = "local" if args.fill == "local" else "k8s"
        first, fill_wall = bed.submit(fill_steps, fill_stack, args.parallelism)
        print(
            f"fill run ({args.fill}, {fill_steps} steps): {first.status.value} in "
            f"{fill_wall:.1f} s; steps {bed.step_statuses(first)}"
        )
        step_pods_before = bed.pods.step_pods
        cached, submit_wall = bed.submit(args.steps, "k8s", args.parallelism)
        statuses = bed.step_statuses(cached)
        probe = bed.probe_of()
        step_pods = bed.pods.step_pods - step_pods_before
    host_after = host_figures()
    reference = (host_before["reference_loop_ms"] + host_after["reference_loop_ms"]) / 2
    end = timestamp(cached.end_time)
    assert end is not None
    wall = end - probe["process_start"]
    loop = probe["loop_end"] - probe["loop_start"]
    decisions = sum(probe["cache_decision_calls"].values())
    result = {
        "benchmark": "k8s_cached",
        "steps": args.steps,
        "fill": args.fill,
        "fill_steps": fill_steps,
        "fill_wall_s": round(fill_wall, 2),
        "run_status": cached.status.value,
        "step_statuses": statuses,
        "step_pods_started": step_pods,
        "cache_decision_store_calls": decisions,
        "cache_decision_store_calls_by_method": probe["cache_decision_calls"],
        "cache_decision_sql_statements": probe["cache_decision_sql_statements"],
        "decision_batches": probe["decision_batches"],
        "store_calls_total": sum(probe["store_calls"].values()),
        "store_calls_by_method": probe["store_calls"],
        "sql_statements_total": probe["sql_statements"],
        "kube_calls_by_kind": probe["kube_calls"],
        "orchestrator_wall_s": round(wall, 3),
        "pod_start_to_run_loop_s": round(probe["loop_start"] - probe["process_start"], 3),
        "run_loop_s": round(loop, 3),
        "orchestrator_cpu_s": round(probe["cpu_total"], 3),
        "run_loop_cpu_s": round(probe["loop_end_cpu"] - probe["loop_start_cpu"], 3),
        "submitter_wall_s": round(submit_wall, 2),
        "host_before": host_before,
        "host_after": host_after,
        "reference_ms": reference,
        "orchestrator_wall_s_at_40ms": round(wall * 40 / reference, 3),
        "goals": {
            "cache_decision_store_calls_le_20": decisions <= 20,
            "orchestrator_wall_le_10s_at_40ms": wall * 40 / reference <= 10,
        },
    }
    print(
        f"cached run: {cached.status.value}, steps {statuses}, step pods started {step_pods}\n"
        f"store calls for cache decisions: {decisions} "
        f"({dict(probe['cache_decision_calls'])}; {probe['cache_decision_sql_statements']} SQL "
        f"statements; batches [slotted, ahead]: {probe['decision_batches']})\n"
        f"store calls in the orchestrator pod: {result['store_calls_total']}, SQL statements "
        f"{probe['sql_statements']}\n"
        f"orchestrator wall (pod process start -> run end): {wall:.2f} s "
        f"(start -> run loop {result['pod_start_to_run_loop_s']:.2f} s, run loop {loop:.2f} s); "
        f"CPU {probe['cpu_total']:.2f} s (run loop {result['run_loop_cpu_s']:.2f} s)\n"
        f"reference loop {host_before['reference_loop_ms']} / {host_after['reference_loop_ms']} ms"
        f" -> wall at 40 ms {result['orchestrator_wall_s_at_40ms']:.2f} s"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, default=str) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
