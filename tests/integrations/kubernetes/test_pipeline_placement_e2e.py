"""A pipeline's own namespace and context (``settings={"orchestrator.kubernetes": ...}``) are
where ``wharf schedule pause|resume|delete`` and the client's part of ``wharf runs stop
--force`` look, end to end on the test bed (emulator on its FakeClock, process kubelet, moto S3).

The component says namespace ``default``; the pipelines say ``team-a`` and the emulator's
context by name. A schedule's CronJob and Secret are created in ``team-a``, and the CLI
suspends, resumes and deletes them there (it used to look in the component's namespace and
find nothing). A run records its namespace and context in its metadata; the client's backend
for a forced stop is built from them, and the forced stop ends the run and its step there.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.integrations.kubernetes.testbed import (
    BOUND,
    IMAGE,
    Bed,
    BedFactory,
    job_exists,
    metadata_of,
    register_kubernetes_stack,
    reported_run_id,
    run_script,
    schedule_objects,
    scheduled_id,
    scheduling_runner_script,
    wait_for_run_end,
    wait_for_step,
    wharf_cli,
)
from tests.kube.emulator import CONTEXT_NAME
from tests.kube.emulator.clock import FakeClock
from tests.kube.emulator.resources import CRONJOBS, NAMESPACES, SECRETS
from tests.waiting import wait_until
from wharf import Client
from wharf.core.enums import ComponentType, ExecutionStatus
from wharf.integrations.kubernetes.labels import STEP_KEY
from wharf.integrations.kubernetes.orchestrator import (
    CONTEXT_KEY,
    NAMESPACE_KEY,
    KubernetesOrchestrator,
)
from wharf.integrations.kubernetes.schedules import schedule_secret_name

TEAM = "team-a"
START = datetime(2026, 1, 5, 10, 0, 30, tzinfo=UTC)

STEPS_MODULE = f"""
from wharf import Schedule, pipeline, step

TEAM = {{"orchestrator.kubernetes": {{"namespace": "{TEAM}", "context": "{CONTEXT_NAME}"}}}}


@step
def make(value: int) -> int:
    return value


@step(enable_cache=False)
def wait_for(path: str) -> int:
    import pathlib
    import time

    while not pathlib.Path(path).exists():
        time.sleep(0.05)
    return 1


@pipeline(settings=TEAM, schedule=Schedule(name="team-five", cron_expression="*/5 * * * *"))
def team_nightly(value: int = 3) -> None:
    make(value)


@pipeline(
    enable_cache=False,
    raise_on_failure=False,
    settings={{"orchestrator.kubernetes": {{**TEAM["orchestrator.kubernetes"], "synchronous": False}}}},
)
def team_stoppable(path: str) -> None:
    make(wait_for(path))
"""

SCRIPT = scheduling_runner_script("k8s_steps")


@pytest.fixture
def bed(make_bed: BedFactory) -> Bed:
    """The bed on the emulator's clock, a namespace ``team-a`` and the ``k8s`` stack, whose
    component names the ``default`` namespace and no context."""
    made = make_bed(
        {"k8s_steps.py": STEPS_MODULE, "run.py": SCRIPT},
        active_stack="k8s",
        clock=FakeClock(START),
    )
    made.emulator.store.create(NAMESPACES, None, {"metadata": {"name": TEAM}})
    register_kubernetes_stack(
        made.workspace,
        "k8s",
        {"image": IMAGE, "namespace": "default", "job_monitoring_interval": 0.5},
    )
    return made


def test_schedule_pause_resume_and_delete_act_in_the_pipelines_namespace(bed: Bed) -> None:
    done = run_script(bed, "team_nightly")
    assert done.returncode == 0, done.stdout + done.stderr
    schedule_id = scheduled_id(done)
    assert schedule_objects(bed.emulator, CRONJOBS, schedule_id, "default") == []
    (cron,) = schedule_objects(bed.emulator, CRONJOBS, schedule_id, TEAM)
    name = cron["metadata"]["name"]
    assert bed.emulator.store.get(SECRETS, TEAM, schedule_secret_name(name))

    def suspended() -> bool:
        return bool(bed.emulator.store.get(CRONJOBS, TEAM, name)["spec"]["suspend"])

    paused = wharf_cli(bed, "schedule", "pause", "team-five")
    assert paused.returncode == 0, paused.stderr
    assert suspended()
    resumed = wharf_cli(bed, "schedule", "resume", "team-five")
    assert resumed.returncode == 0, resumed.stderr
    assert not suspended()

    deleted = wharf_cli(bed, "schedule", "delete", "team-five", "--yes")
    assert deleted.returncode == 0, deleted.stderr
    assert schedule_objects(bed.emulator, CRONJOBS, schedule_id, TEAM) == []
    assert schedule_objects(bed.emulator, SECRETS, schedule_id, TEAM) == []
    assert bed.workspace.store.schedules.list().items == []


def test_a_forced_stop_finds_the_steps_of_a_run_in_its_pipelines_namespace(
    bed: Bed, tmp_path: Path
) -> None:
    done = run_script(bed, "team_stoppable", path=str(tmp_path / "never"))
    assert done.returncode == 0, done.stdout + done.stderr
    run = bed.workspace.store.runs.get(reported_run_id(done))
    waiting = wait_for_step(bed, run, "wait_for", ExecutionStatus.RUNNING)
    metadata = metadata_of(bed, run)
    assert (metadata[NAMESPACE_KEY], metadata[CONTEXT_KEY]) == (TEAM, CONTEXT_NAME)
    assert wait_until(lambda: len(bed.seen.step_objects("Job", run)) == 1, BOUND)
    (step_job,) = bed.seen.step_objects("Job", run)
    assert step_job["metadata"]["namespace"] == TEAM

    # The backend the client stops the run's steps through looks where the run is.
    orchestrator = bed.workspace.component_instance(
        bed.workspace.active_stack(), ComponentType.ORCHESTRATOR
    )
    assert isinstance(orchestrator, KubernetesOrchestrator)
    backend = orchestrator.run_step_backend(metadata)
    try:
        assert backend.namespace == TEAM
    finally:
        backend.close()

    with Client(bed.workspace.config, bed.workspace.store) as client:
        client.stop_run(run.id, force=True)
    ended = wait_for_run_end(bed, run)
    assert ended.status is ExecutionStatus.STOPPED, ended.status_reason
    stopped = bed.workspace.store.steps.get(waiting.id)
    assert stopped.status is ExecutionStatus.STOPPED, stopped.status_reason
    assert STEP_KEY in step_job["metadata"]["labels"]
    assert wait_until(
        lambda: not job_exists(bed.emulator, step_job["metadata"]["name"], TEAM), BOUND
    )
