"""The bed of the allocation tests (:mod:`.testbed`'s): pipelines on an asynchronous Kubernetes
stack ``k8s`` whose steps ask for a licence, held until a file exists; ``operated`` runs on the
local orchestrator with the ``k8s-op`` step operator. Every pod (orchestrator and step) asks,
renews and releases through the embedded Resource Manager beside the SQLite store; a step pod
beats every ``HEARTBEAT`` s and is given ``GRACE`` s to stop. Its contended pool,
:func:`contended_pool`, is the local reclaim tests' (:mod:`tests.resource_beds`)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integrations.kubernetes.testbed import (
    IMAGE,
    NAMESPACE,
    REMOTE_STORE,
    Bed,
    BedFactory,
    register_kubernetes_stack,
    reported_run_id,
    run_script,
    runner_script,
)
from tests.resource_beds import contended_pool  # noqa: F401 (the bed's pool, re-exported)
from wharf.core.enums import ComponentType
from wharf.integrations.kubernetes.allocation import REQUEST_ID_ANNOTATION
from wharf.integrations.kubernetes.labels import STEP_RUN_ID_KEY
from wharf.resource_manager.contract.models import ResourceRequestInfo
from wharf.sdk import stacks
from wharf.sdk.workspace import Workspace
from wharf.store.models import PipelineRunRecord, StepRunRecord

GRACE = 30  # the step pods' pod_stop_grace_period (the default)
HEARTBEAT = 3  # seconds between a step's heartbeats (a step pod is lost 16 s without one)

STEPS_MODULE = """
import os
import pathlib
import time

from wharf import ResourceSettings, pipeline, step


def _hold(path: str, started: str, marker: str) -> str:
    if started:
        pathlib.Path(started).write_text(os.environ.get("HOSTNAME", ""))
    try:
        deadline = time.monotonic() + 200
        while not pathlib.Path(path).exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        return os.environ.get("HOSTNAME", "")
    finally:
        if marker:
            with open(marker, "a") as out:
                out.write("cleanup\\n")


@step(enable_cache=False, settings={"resources": ResourceSettings(resources={"license": 1})})
def hold_licence(path: str, started: str = "", marker: str = "") -> str:
    return _hold(path, started, marker)


@pipeline(enable_cache=False, raise_on_failure=False)
def licensed(path: str, started: str = "", marker: str = "") -> None:
    hold_licence(path, started, marker)


@step(
    enable_cache=False,
    retry={"max_retries": 1},
    settings={
        "resources": ResourceSettings(resources={"license": 1}, reclaim_tolerance="coordinated")
    },
)
def hold_reclaimable(path: str, started: str = "", marker: str = "") -> str:
    return _hold(path, started, marker)


@pipeline(name="low_pipe", enable_cache=False, raise_on_failure=False)
def low_pipe(path: str, started: str, marker: str) -> None:
    hold_reclaimable(path, started, marker)


@pipeline(name="high_pipe", enable_cache=False, raise_on_failure=False)
def high_pipe(path: str) -> None:
    hold_licence(path)


@step(
    step_operator="k8s-op",
    enable_cache=False,
    settings={"resources": ResourceSettings(resources={"license": 1})},
)
def hold_on_operator(path: str, started: str = "") -> str:
    return _hold(path, started, "")


@pipeline(enable_cache=False, raise_on_failure=False)
def operated(path: str, started: str = "") -> None:
    hold_on_operator(path, started)
"""

SCRIPT = runner_script("k8s_alloc_steps")


@pytest.fixture
def bed(make_bed: BedFactory) -> Bed:
    made = make_bed(
        {"k8s_alloc_steps.py": STEPS_MODULE, "run.py": SCRIPT},
        active_stack="k8s",
        heartbeat_interval=HEARTBEAT,
    )
    register_allocation_stacks(made, GRACE)
    return made


def register_allocation_stacks(bed: Bed, grace: int) -> None:
    """The asynchronous stack ``k8s`` (its step pods given ``grace`` s to stop) and the stack
    ``operated`` (the local orchestrator with the ``k8s-op`` step operator)."""
    ws = bed.workspace
    register_kubernetes_stack(
        ws,
        "k8s",
        {
            "image": IMAGE,
            "namespace": NAMESPACE,
            "synchronous": False,
            "job_monitoring_interval": 0.5,
            "pod_stop_grace_period": grace,
        },
    )
    stacks.register_component(
        ws,
        "k8s-op",
        ComponentType.STEP_OPERATOR,
        "kubernetes",
        {"image": IMAGE, "kubeconfig": str(bed.emulator.kubeconfig_path)},
    )
    stacks.register_stack(
        ws, "operated", orchestrator="default", artifact_store=REMOTE_STORE, step_operator="k8s-op"
    )


def submit(bed: Bed, pipeline: str, **parameters: Any) -> PipelineRunRecord:
    """Submit ``pipeline`` through the project's script (returns once the orchestrator Job
    exists: the stack is asynchronous); its run."""
    done = run_script(bed, pipeline, **parameters)
    assert done.returncode == 0, done.stdout + done.stderr
    return bed.workspace.store.runs.get(reported_run_id(done))


def pod_of(bed: Bed, step: StepRunRecord) -> dict[str, Any]:
    """The (first) pod of a step run's Job, as created."""
    pods = [
        p
        for p in bed.seen.step_objects("Pod", bed.workspace.store.runs.get(step.run_id))
        if p["metadata"]["labels"].get(STEP_RUN_ID_KEY) == str(step.id)
    ]
    assert pods, f"step run {step.id} has no pod"
    return pods[0]


def assert_request_annotated(bed: Bed, step: StepRunRecord) -> None:
    """The step's pod carries the id of the step's own resource request."""
    annotations = pod_of(bed, step)["metadata"]["annotations"]
    assert annotations[REQUEST_ID_ANNOTATION] == str(step.resource_request_id)


def request_of(workspace: Workspace, step: StepRunRecord) -> ResourceRequestInfo:
    """The resource request of ``step`` (which must have one), as the RM has it now."""
    assert step.resource_request_id is not None, f"step run {step.id} has no request"
    return workspace.resource_manager().requests.get(step.resource_request_id)
