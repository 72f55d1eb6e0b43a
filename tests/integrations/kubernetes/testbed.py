"""The Kubernetes test bed of the end-to-end integration tests, and the helpers that read it.

A bed is the API emulator, the process kubelet (pods run as processes of this machine: the
image ``IMAGE`` is this interpreter), a real S3 server (moto) holding the artifacts, the
embedded SQLite store of a fresh ``WHARF_HOME``, and a workspace in which the ``remote`` artifact
store (the bed's bucket) is registered; each test module registers its own orchestrators, step
operators and stacks, and writes its own project directory (the pipelines and the script a user
would run), so that step pods reach the code only through the run's code archive.

Invariants: one bed per test, everything in ``tmp_path``, stopped and closed in reverse order
when the test ends; the test process's environment names no store URL, server, artifact root or
``PYTHONPATH`` of the caller, and ``KUBECONFIG`` is the emulator's (or unset); every container
gets the S3 credentials and a ``WHARF_HOME`` of its own (``pod-home``); :class:`Seen` records
every object the emulator created or deleted, so objects deleted after their step still count;
waiting polls a condition with a deadline (:func:`tests.waiting.wait_until`), never a bare sleep.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from tests.artifacts.s3_server import CREDENTIALS, MotoServer
from tests.kube.emulator import Emulator
from tests.kube.emulator.clock import FakeClock
from tests.kube.emulator.errors import ApiError
from tests.kube.emulator.resources import JOBS, SECRETS
from tests.kube.emulator.watchers import WatchEvent
from tests.kube.kubelet import Kubelet
from tests.waiting import wait_until
from wharf.config.global_config import SERVER_URL_ENV, load_config
from wharf.core.enums import ComponentType, ExecutionStatus, MetadataResourceType
from wharf.integrations.kubernetes.labels import RUN_ID_KEY, STEP_KEY
from wharf.integrations.kubernetes.orchestrator import JOB_KEY
from wharf.integrations.kubernetes.orchestrator_main import POD_KEY
from wharf.integrations.kubernetes.schedules import SCHEDULE_ID_KEY
from wharf.sdk import stacks
from wharf.sdk.workspace import Workspace
from wharf.store.models import PageRequest, PipelineRunRecord, StepRunFilter, StepRunRecord

IMAGE = "wharf/python:3.11"
"""The image every bed's kubelet runs with this interpreter."""
BOUND = 240
"""Seconds: a hang fails the test instead of blocking it."""
NAMESPACE = "default"
REMOTE_STORE = "remote"
"""The artifact store every bed registers: the bed's bucket on the moto server."""


# ----------------------------------------------------------------------------- the bed


@dataclass
class Seen:
    """What the emulator did, recorded by a listener on its object store: every object as it
    was created (by kind), each pod's last state, and the (kind, name) of every deleted one."""

    created: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    last: dict[str, dict[str, Any]] = field(default_factory=dict)  # pod name -> last state
    deleted: set[tuple[str, str]] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, event: WatchEvent) -> None:
        if event.rtype is None:
            return
        kind, name = event.rtype.kind, str(event.object["metadata"]["name"])
        with self.lock:
            if event.type == "ADDED":
                self.created.setdefault(kind, []).append(event.object)
            if kind == "Pod":
                self.last[name] = event.object
            if event.type == "DELETED":
                self.deleted.add((kind, name))

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        """The objects of ``kind`` created so far, as created."""
        with self.lock:
            return list(self.created.get(kind, []))

    def of_run(self, kind: str, run_id: str) -> list[dict[str, Any]]:
        """The objects of ``kind`` labelled with the run ``run_id`` (steps' and orchestrator's)."""
        return [
            o
            for o in self.of_kind(kind)
            if o["metadata"].get("labels", {}).get(RUN_ID_KEY) == run_id
        ]

    def step_objects(self, kind: str, run: PipelineRunRecord) -> list[dict[str, Any]]:
        """The step Jobs or pods (not the orchestrator's) created for ``run``, as created."""
        return [o for o in self.of_run(kind, str(run.id)) if STEP_KEY in o["metadata"]["labels"]]

    def last_state(self, pod: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            return self.last[pod["metadata"]["name"]]

    def gone(self, kind: str, obj: dict[str, Any]) -> bool:
        with self.lock:
            return (kind, obj["metadata"]["name"]) in self.deleted


@dataclass
class Cluster:
    """The emulator, what it did (:class:`Seen`) and the process kubelet of its one node."""

    emulator: Emulator
    seen: Seen
    kubelet: Kubelet


@dataclass
class Bed:
    emulator: Emulator
    kubelet: Kubelet
    seen: Seen
    workspace: Workspace
    """The user's workspace, in the test process."""
    project: Path
    """The user's project directory: the pipelines and ``run.py``."""
    env: dict[str, str]
    """The environment the user's scripts run with."""


BedFactory = Callable[..., Bed]
""":func:`open_bed` with the fixtures' arguments bound (the ``make_bed`` fixture)."""


@contextmanager
def cluster(tmp_path: Path, clock: FakeClock | None = None) -> Iterator[Cluster]:
    """A started emulator (on ``clock``, else the system's) and a ready kubelet running
    ``IMAGE`` with the S3 credentials and a ``WHARF_HOME`` of the image's own."""
    with Emulator(clock=clock) if clock is not None else Emulator() as emulator:
        seen = Seen()
        emulator.store.subscribe(seen)
        with Kubelet(
            emulator.kubeconfig_path,
            images={IMAGE: sys.executable},
            log_dir=emulator.log_dir,
            extra_env={**CREDENTIALS, "WHARF_HOME": str(tmp_path / "pod-home")},  # the image's
        ) as kubelet:
            assert kubelet.wait_ready(10)
            yield Cluster(emulator, seen, kubelet)


def write_project(tmp_path: Path, files: Mapping[str, str]) -> Path:
    """The project directory ``tmp_path/project`` holding ``files`` (name -> text)."""
    project = tmp_path / "project"
    project.mkdir()
    for name, text in files.items():
        (project / name).write_text(text)
    return project


def register_remote_store(workspace: Workspace, s3_server: MotoServer, s3_bucket: str) -> None:
    stacks.register_component(
        workspace,
        REMOTE_STORE,
        ComponentType.ARTIFACT_STORE,
        "fsspec",
        {"path": f"s3://{s3_bucket}/wharf", "endpoint_url": s3_server.endpoint},
    )


def register_kubernetes_stack(workspace: Workspace, name: str, config: dict[str, Any]) -> None:
    """A ``kubernetes`` orchestrator ``name`` with ``config``, in a stack ``name`` with the
    ``remote`` artifact store."""
    stacks.register_component(workspace, name, ComponentType.ORCHESTRATOR, "kubernetes", config)
    stacks.register_stack(workspace, name, orchestrator=name, artifact_store=REMOTE_STORE)


def open_bed(
    exits: ExitStack,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    s3_server: MotoServer,
    s3_bucket: str,
    project_files: Mapping[str, str],
    *,
    active_stack: str,
    user_kubeconfig: bool = True,
    clock: FakeClock | None = None,
    heartbeat_interval: float = 2,
) -> Bed:
    """A bed whose teardown is ``exits``'s: the user's environment (``active_stack``; the
    emulator as the user's cluster unless not ``user_kubeconfig``: then components name the
    kubeconfig), the project, the cluster and the workspace with the ``remote`` store."""
    monkeypatch.setenv("WHARF_HOME", str(tmp_path / "home"))
    for name in ("WHARF_STORE_URL", "WHARF_ARTIFACT_ROOT", SERVER_URL_ENV, "PYTHONPATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("WHARF_ACTIVE_STACK", active_stack)
    project = write_project(tmp_path, project_files)
    running = exits.enter_context(cluster(tmp_path, clock))
    if user_kubeconfig:
        monkeypatch.setenv("KUBECONFIG", str(running.emulator.kubeconfig_path))
    else:
        monkeypatch.delenv("KUBECONFIG", raising=False)
    workspace = Workspace.open(load_config())
    exits.callback(workspace.close)
    register_remote_store(workspace, s3_server, s3_bucket)
    env = {**os.environ, "WHARF_HEARTBEAT_INTERVAL": f"{heartbeat_interval:g}"}
    return Bed(running.emulator, running.kubelet, running.seen, workspace, project, env)


# ----------------------------------------------------------------------------- the user's scripts


def runner_script(module: str) -> str:
    """The text of a project's ``run.py`` that runs the pipeline ``argv[1]`` of ``module`` with
    the JSON parameters ``argv[2]`` and prints ``RUN <id> <status>`` (see :func:`run_script`,
    :func:`reported_run_id`)."""
    return f"""
import json
import sys

import {module}

if __name__ == "__main__":
    run = getattr({module}, sys.argv[1])(**json.loads(sys.argv[2]))
    print("RUN", run.id, run.status.value)
"""


def scheduling_runner_script(module: str) -> str:
    """:func:`runner_script` for pipelines that may have a schedule: calling one of those
    schedules it and prints ``SCHEDULED <schedule id>`` (see :func:`scheduled_id`)."""
    return f"""
import json
import sys

import {module}

if __name__ == "__main__":
    result = getattr({module}, sys.argv[1])(**json.loads(sys.argv[2]))
    if hasattr(result, "schedule"):
        print("SCHEDULED", result.schedule.id)
    else:
        print("RUN", result.id, result.status.value)
"""


def run_in_project(bed: Bed, *argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``argv`` run to its end in the project directory, with the user's environment (and
    ``env`` over it), as a user would in a terminal."""
    return subprocess.run(
        list(argv),
        check=False,
        capture_output=True,
        text=True,
        timeout=BOUND,
        env={**bed.env, **env},
        cwd=bed.project,
    )


def run_script(
    bed: Bed, pipeline: str, stack: str | None = None, **parameters: Any
) -> subprocess.CompletedProcess[str]:
    """Run ``pipeline`` with ``parameters`` through the project's ``run.py`` (a fresh process,
    as a user would), on ``stack`` (else the bed's active one)."""
    env = {} if stack is None else {"WHARF_ACTIVE_STACK": stack}
    return run_in_project(bed, sys.executable, "run.py", pipeline, json.dumps(parameters), **env)


def submit_script(
    bed: Bed, pipeline: str, stack: str | None = None, **parameters: Any
) -> tuple[PipelineRunRecord, str]:
    """:func:`run_script`, which must succeed; its run (as the store has it when the script
    ended) and output."""
    done = run_script(bed, pipeline, stack, **parameters)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    return bed.workspace.store.runs.get(reported_run_id(done)), output


def start_script(bed: Bed, pipeline: str, stack: str, **parameters: Any) -> subprocess.Popen[str]:
    """:func:`run_script` in the background (its output, stderr included, on ``stdout``)."""
    return subprocess.Popen(
        [sys.executable, "run.py", pipeline, json.dumps(parameters)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**bed.env, "WHARF_ACTIVE_STACK": stack},
        cwd=bed.project,
    )


def reported_run_id(done: subprocess.CompletedProcess[str]) -> UUID:
    """The run a script reported on its (last) ``RUN <id> <status>`` line."""
    lines = [line for line in done.stdout.splitlines() if line.startswith("RUN ")]
    assert lines, done.stdout + done.stderr
    return UUID(lines[-1].split()[1])


def scheduled_id(done: subprocess.CompletedProcess[str]) -> UUID:
    """The schedule a script reported on its one ``SCHEDULED <id>`` line."""
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("SCHEDULED ")]
    return UUID(line.split()[1])


def wharf_cli(bed: Bed, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``wharf *args`` in the project directory, with the user's environment (and ``env``)."""
    return run_in_project(bed, sys.executable, "-m", "wharf.cli.main", *args, **env)


# ----------------------------------------------------------------------------- waiting


def wait_for_run_end(bed: Bed, run: PipelineRunRecord) -> PipelineRunRecord:
    """The run once it ended, read from the store until a deadline."""
    runs = bed.workspace.store.runs
    assert wait_until(lambda: runs.get(run.id).status.is_finished, BOUND), (
        f"run {run.name} did not end within {BOUND} s"
    )
    return runs.get(run.id)


def wait_for_step(
    bed: Bed, run: PipelineRunRecord, name: str | None, status: ExecutionStatus
) -> StepRunRecord:
    """The (latest) step run ``name`` (any, if None) of ``run`` once it has ``status``."""
    found: list[StepRunRecord] = []

    def reached() -> bool:
        found[:] = [
            s for s in attempts(bed, run) if s.status is status and (name is None or s.name == name)
        ]
        return bool(found)

    assert wait_until(reached, BOUND), (
        f"no step of run {run.name} was ever {status.value}"
        if name is None
        else f"step {name} of run {run.name} never was {status.value}"
    )
    return found[-1]


# ----------------------------------------------------------------------------- the store


def stop_gracefully_once_seen(bed: Bed, step: StepRunRecord) -> None:
    """Stop ``step``'s run gracefully once the step's pod runs it (its process recorded its
    pid: only that process beats from then on), and return once the pod's heartbeat has
    answered with the stopping run."""
    from wharf import Client

    steps = bed.workspace.store.steps
    assert wait_until(lambda: steps.get(step.id).pid is not None, BOUND), f"{step.name} never ran"
    with Client(bed.workspace.config, bed.workspace.store) as client:
        asked = client.stop_run(step.run_id)

    def beaten_since() -> bool:
        last = steps.get(step.id).last_heartbeat
        return last is not None and last > asked.updated

    assert wait_until(beaten_since, BOUND), f"{step.name}'s pod did not beat after the stop"


def attempts(bed: Bed, run: PipelineRunRecord) -> list[StepRunRecord]:
    """The step runs of ``run``, oldest first."""
    page = PageRequest(sort="asc", size=100)
    return list(bed.workspace.store.steps.list(StepRunFilter(run_id=run.id), page).items)


def steps_of(bed: Bed, run: PipelineRunRecord) -> dict[str, StepRunRecord]:
    """The (latest) step run of each step of ``run``, by name."""
    return {s.name: s for s in attempts(bed, run)}


def step_statuses(bed: Bed, run: PipelineRunRecord) -> dict[str, ExecutionStatus]:
    return {name: s.status for name, s in steps_of(bed, run).items()}


def metadata_of(bed: Bed, run: PipelineRunRecord) -> dict[str, Any]:
    records = bed.workspace.store.run_metadata.list(MetadataResourceType.PIPELINE_RUN, run.id)
    return {m.key: m.value for m in records}


# ----------------------------------------------------------------------------- the cluster


def current_job(bed: Bed, run: PipelineRunRecord) -> dict[str, Any]:
    """The run's orchestrator Job as the API has it now."""
    job: dict[str, Any] = bed.emulator.store.get(JOBS, NAMESPACE, metadata_of(bed, run)[JOB_KEY])
    return job


def job_exists(emulator: Emulator, name: str, namespace: str = NAMESPACE) -> bool:
    try:
        emulator.store.get(JOBS, namespace, name)
    except ApiError:  # NotFound
        return False
    return True


def schedule_objects(
    emulator: Emulator, kind: Any, schedule_id: UUID, namespace: str = NAMESPACE
) -> list[dict[str, Any]]:
    """The objects of ``kind`` (CronJobs, Secrets) labelled with the schedule, as they are now."""
    selector = f"{SCHEDULE_ID_KEY}={schedule_id}"
    items: list[dict[str, Any]] = emulator.store.list(kind, namespace, label_selector=selector)[
        "items"
    ]
    return items


def orchestrator_pods(bed: Bed, run: PipelineRunRecord) -> list[dict[str, Any]]:
    """The pods of ``run``'s orchestrator Job (no step's), as created."""
    return [
        p for p in bed.seen.of_run("Pod", str(run.id)) if STEP_KEY not in p["metadata"]["labels"]
    ]


def orchestrator_logs(bed: Bed, run: PipelineRunRecord) -> str:
    """The logs of the run's orchestrator pods (for a failure's message)."""
    texts = []
    for pod in orchestrator_pods(bed, run):
        name = pod["metadata"]["name"]
        path = bed.emulator.log_dir / "default" / name / "main.log"
        texts.append(f"--- {name}\n{path.read_text() if path.exists() else '(no log)'}")
    return "\n".join(texts)


def kill_orchestrator_pod(bed: Bed, run: PipelineRunRecord) -> PipelineRunRecord:
    """Kill (SIGKILL) the process of ``run``'s orchestrator pod (its pid is the run's
    orchestrating process) and return once another pod of its Job took the run over (its own
    process beats for it, and it recorded its pod); the run as it was before the kill."""
    runs = bed.workspace.store.runs
    started = runs.get(run.id)
    first_pod = metadata_of(bed, run)[POD_KEY]
    assert started.orchestrator_pid is not None
    os.kill(started.orchestrator_pid, signal.SIGKILL)

    def taken_over() -> bool:
        return runs.get(run.id).orchestrator_pid not in (None, started.orchestrator_pid)

    assert wait_until(taken_over, BOUND), (
        f"no pod took the run over:\n{orchestrator_logs(bed, run)}"
    )
    assert wait_until(lambda: metadata_of(bed, run)[POD_KEY] != first_pod, BOUND)  # recorded next
    return started


def remaining_secrets(emulator: Emulator) -> list[str]:
    """The names of the Secrets that exist now."""
    listing = emulator.store.list(SECRETS, NAMESPACE)
    return [str(item["metadata"]["name"]) for item in listing["items"]]


def nothing_left(emulator: Emulator) -> bool:
    """No Job and no Secret is left in the namespace."""
    return not emulator.store.list(JOBS, NAMESPACE)["items"] and not remaining_secrets(emulator)


def exit_code(pod: dict[str, Any]) -> int | None:
    """The exit code of the pod's (first) terminated container, if any."""
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        terminated = (status.get("state") or {}).get("terminated")
        if terminated:
            return int(terminated["exitCode"])
    return None
