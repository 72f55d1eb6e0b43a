"""The orchestrator pod decides caching per step once the step has its slot, against the store
as it is then: a step that another run cached after the orchestrator pod started is cached, end
to end on the test bed (see ``test_orchestrator_e2e``).

A ``gate`` step's pod waits for a file; while it waits, a local run of the same ``late`` step
(same code and parameters, same artifact store: the same cache key) completes; then the gate
opens. ``late`` runs after the gate (an ordering without data), or beside it with one slot for
both: then the pod's first decision looks at ``late`` ahead of its slot, finds nothing and
leaves it, and decides it again once it gets the slot.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integrations.kubernetes.testbed import (
    IMAGE,
    REMOTE_STORE,
    Bed,
    BedFactory,
    register_kubernetes_stack,
    runner_script,
    steps_of,
    submit_script,
    wait_for_run_end,
    wait_for_step,
)
from wharf.core.enums import ComponentType, ExecutionStatus
from wharf.integrations.kubernetes.labels import STEP_KEY
from wharf.sdk import stacks

STEPS_MODULE = """
from wharf import pipeline, step


@step(enable_cache=False)
def gate(path: str) -> int:
    import pathlib
    import time

    while not pathlib.Path(path).exists():
        time.sleep(0.05)  # the pod polls for the test's file
    return 1


@step
def late(value: int) -> int:
    return value * 10


@pipeline
def gated(path: str, value: int) -> None:
    late(value, after=gate(path))


@pipeline(max_parallelism=1)
def one_slot(path: str, value: int) -> None:
    gate(path)
    late(value)


@pipeline
def only_late(value: int) -> None:
    late(value)
"""

SCRIPT = runner_script("cache_steps")


@pytest.fixture
def bed(make_bed: BedFactory) -> Bed:
    """Stacks ``k8s-async`` (the run returns at once) and ``local-remote`` (a local orchestrator
    with the same artifact store)."""
    made = make_bed({"cache_steps.py": STEPS_MODULE, "run.py": SCRIPT}, active_stack="k8s-async")
    ws = made.workspace
    register_kubernetes_stack(
        ws, "k8s-async", {"image": IMAGE, "synchronous": False, "job_monitoring_interval": 0.5}
    )
    stacks.register_component(ws, "here", ComponentType.ORCHESTRATOR, "local", {})
    stacks.register_stack(ws, "local-remote", orchestrator="here", artifact_store=REMOTE_STORE)
    return made


@pytest.mark.parametrize("pipeline", ["gated", "one_slot"])
def test_a_step_cached_by_another_run_after_the_pod_started_is_cached(
    bed: Bed, tmp_path: Path, pipeline: str
) -> None:
    release = tmp_path / "release"
    run, _ = submit_script(bed, pipeline, stack="k8s-async", path=str(release), value=7)
    wait_for_step(bed, run, "gate", ExecutionStatus.RUNNING)  # the orchestrator pod is at work
    assert "late" not in steps_of(bed, run)

    other, _ = submit_script(bed, "only_late", stack="local-remote", value=7)
    assert other.status is ExecutionStatus.COMPLETED, other.status_reason
    original = steps_of(bed, other)["late"]
    assert original.status is ExecutionStatus.COMPLETED
    release.touch()

    ended = wait_for_run_end(bed, run)
    assert ended.status is ExecutionStatus.COMPLETED, ended.status_reason
    late = steps_of(bed, ended)["late"]
    assert late.status is ExecutionStatus.CACHED
    assert late.original_step_run_id == original.id
    assert late.source_code is not None and "value * 10" in late.source_code
    step_pods = bed.seen.step_objects("Pod", ended)
    assert [p["metadata"]["labels"][STEP_KEY] for p in step_pods] == ["gate"]
