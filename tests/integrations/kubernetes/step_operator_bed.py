"""The bed of the ``kubernetes`` step operator's end-to-end tests (:mod:`.testbed`'s, with the
operator registered): pipelines on the *local* orchestrator (stack ``operated``) or on the
Kubernetes one (``k8s-operated``) whose steps that name the operator run as Jobs/pods while
the others run where their orchestrator runs them; ``operated-locally`` has a local artifact
store, which pods cannot read. The operator names its kubeconfig (the user has none).

The submitter is a script in a directory of its own (``run.py``), which prints its run, and for
a completed ``*_training`` pipeline the outputs of ``train`` and ``report`` as loaded in the
submitting process; ``run_each.py`` does the same for several pipelines one after the other in
one process (:func:`submit_each`)."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import pytest

from tests.integrations.kubernetes.testbed import (
    BOUND,
    IMAGE,
    REMOTE_STORE,
    Bed,
    BedFactory,
    reported_run_id,
    run_in_project,
    run_script,
)
from tests.waiting import wait_until
from wharf.core.enums import ComponentType, ExecutionStatus
from wharf.integrations.kubernetes.labels import STEP_KEY
from wharf.sdk import stacks
from wharf.store.models import PipelineRunRecord, StepRunFilter, StepRunRecord

OPERATOR = "k8s-op"
STACKS = (  # name, orchestrator, artifact store; each with the step operator
    ("operated", "default", REMOTE_STORE),  # the local orchestrator
    ("operated-locally", "default", "default"),  # a local artifact store: pods cannot read it
    ("k8s-operated", "k8s", REMOTE_STORE),
)
CLEANUP = 30  # seconds for a step's Job and the run's Secret to go once the run ended

STEPS_MODULE = f"""
import os

from wharf import pipeline, step


@step
def prepare(value: int) -> int:
    return value + 1


@step(step_operator="{OPERATOR}")
def train(value: int) -> dict:
    print("training on", value, flush=True)
    return {{"value": value * 10, "pid": os.getpid(), "pod": os.environ.get("HOSTNAME")}}


@step
def report(result: dict) -> int:
    return os.getpid()


@pipeline(dynamic=True, enable_cache=False)
def dynamic_training(value: int = 1) -> None:
    result = train(prepare(value))
    assert result.load()["value"] == (value + 1) * 10  # loaded in the submitting process
    report(result)


@pipeline(enable_cache=False)
def static_training(value: int = 1) -> None:
    report(train(prepare(value)))


@pipeline(enable_cache=False)
def two_placements(value: int = 1) -> None:  # one step the operator runs, one it does not
    train(prepare(value))


@step(step_operator="{OPERATOR}")
def crash(value: int) -> dict:  # feeds report (a dict) as train does
    print("crashing with", value, flush=True)
    os._exit(7)


@pipeline(enable_cache=False, raise_on_failure=False)
def crashing() -> None:
    report(crash(prepare(1)))


@step(step_operator="{OPERATOR}", retry={{"max_retries": 1}})
def flaky(path: str) -> int:
    import pathlib

    marker = pathlib.Path(path)
    if not marker.exists():  # the first attempt dies; the retry finds the marker
        marker.write_text("tried")
        raise RuntimeError("first attempt fails")
    return 5


@pipeline(enable_cache=False)
def retried(path: str) -> None:
    prepare(flaky(path))


@step(step_operator="{OPERATOR}", settings={{"resources": {{"gpu_count": 1, "gpu_class": "h200"}}}})
def on_a_gpu() -> str:
    return os.environ.get("WHARF_KUBELET_LIMIT_NVIDIA_COM_GPU", "none")


@pipeline(enable_cache=False)
def on_gpus() -> None:
    on_a_gpu()


@step(step_operator="{OPERATOR}")
def wait_for(path: str) -> int:
    import pathlib
    import time

    print("waiting for", path, flush=True)
    while not pathlib.Path(path).exists():
        time.sleep(0.05)
    return 1


@pipeline(enable_cache=False, raise_on_failure=False)
def stoppable(path: str) -> None:
    prepare(wait_for(path))
"""

SCRIPT = """
import json
import os
import sys

import k8s_op_steps
from wharf import Client

if __name__ == "__main__":
    run = getattr(k8s_op_steps, sys.argv[1])(**json.loads(sys.argv[2]))
    outputs = {}
    if run.status.value == "completed" and sys.argv[1].endswith("_training"):
        with Client() as client:
            outputs = {name: client.load_step_output(run.id, name) for name in ("train", "report")}
    print("RUN", run.id, run.status.value)
    print("OUTPUTS", json.dumps({"submitter": os.getpid(), **outputs}))
"""

RUN_EACH = """
import json
import os
import sys

import k8s_op_steps
from wharf import Client

if __name__ == "__main__":
    for name, parameters in json.loads(sys.argv[1]):
        run = getattr(k8s_op_steps, name)(**parameters)
        outputs = {}
        if run.status.value == "completed" and name.endswith("_training"):
            with Client() as client:
                outputs = {n: client.load_step_output(run.id, n) for n in ("train", "report")}
        print("RUN", run.id, run.status.value, flush=True)
        print("OUTPUTS", json.dumps({"submitter": os.getpid(), **outputs}), flush=True)
"""


@dataclass
class Submitted:
    run: PipelineRunRecord
    outputs: dict[str, Any]
    output: str


@pytest.fixture
def bed(make_bed: BedFactory) -> Bed:
    made = make_bed(
        {"k8s_op_steps.py": STEPS_MODULE, "run.py": SCRIPT, "run_each.py": RUN_EACH},
        active_stack="operated",
        user_kubeconfig=False,  # the operator names its kubeconfig
    )
    ws, kubeconfig = made.workspace, str(made.emulator.kubeconfig_path)
    stacks.register_component(
        ws,
        OPERATOR,
        ComponentType.STEP_OPERATOR,
        "kubernetes",
        {
            "namespace": "default",
            "image": IMAGE,
            "kubeconfig": kubeconfig,
            "pod_settings": '{"labels": {"team": "vision"}}',
        },
    )
    stacks.register_component(
        ws,
        "k8s",
        ComponentType.ORCHESTRATOR,
        "kubernetes",
        {"image": IMAGE, "kubeconfig": kubeconfig, "job_monitoring_interval": 0.5},
    )
    for stack, orchestrator, artifact_store in STACKS:
        stacks.register_stack(
            ws,
            stack,
            orchestrator=orchestrator,
            artifact_store=artifact_store,
            step_operator=OPERATOR,
        )
    return made


def submit(bed: Bed, pipeline: str, stack: str = "operated", **parameters: Any) -> Submitted:
    """:func:`run_script`, which must succeed: its run, the outputs it loaded, its output."""
    done = run_script(bed, pipeline, stack, **parameters)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    lines = done.stdout.splitlines()
    outputs = json.loads(next(line for line in lines if line.startswith("OUTPUTS "))[8:])
    return Submitted(bed.workspace.store.runs.get(reported_run_id(done)), outputs, output)


def submit_each(
    bed: Bed, *pipelines: tuple[str, dict[str, Any]], stack: str = "operated"
) -> list[Submitted]:
    """The ``(name, parameters)`` pipelines run one after the other by one process on
    ``stack``, which must succeed: each run with the outputs it loaded; the process's whole
    output with each."""
    done = run_in_project(
        bed, sys.executable, "run_each.py", json.dumps(pipelines), WHARF_ACTIVE_STACK=stack
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    lines = done.stdout.splitlines()
    runs = [UUID(line.split()[1]) for line in lines if line.startswith("RUN ")]
    outputs = [json.loads(line[8:]) for line in lines if line.startswith("OUTPUTS ")]
    assert len(runs) == len(outputs) == len(pipelines), output
    return [
        Submitted(bed.workspace.store.runs.get(run), loaded, output)
        for run, loaded in zip(runs, outputs, strict=True)
    ]


def step_jobs(bed: Bed, run: PipelineRunRecord) -> list[dict[str, Any]]:
    """The Jobs created for ``run``'s steps."""
    return bed.seen.of_run("Job", str(run.id))


def wait_for_running_step(bed: Bed, name: str) -> StepRunRecord:
    """The step run ``name`` once it runs (and its pod has started), read until a deadline."""
    found: list[StepRunRecord] = []

    def running() -> bool:
        steps = bed.workspace.store.steps.list(StepRunFilter(names=(name,))).items
        found[:] = [s for s in steps if s.status is ExecutionStatus.RUNNING]
        return bool(found) and any(
            p["metadata"].get("labels", {}).get(STEP_KEY) == name for p in bed.seen.of_kind("Pod")
        )

    assert wait_until(running, BOUND), f"step {name} never ran"
    return found[0]
