# ruff: noqa: F811  (the workspace fixture is imported from first_hour_k8s_bed)
"""A user's first hour on Kubernetes, once a run is submitted: a step's Job the cluster cannot
take or whose image cannot be pulled, following refused, stopping a run whose pod never started
(the cluster reachable or not) and a schedule whose CronJob was deleted by hand (before
anything runs: ``test_first_hour_k8s.py``).

Each failure is one clear line (the CLI: one line on stderr, a non-zero exit, no traceback; the
SDK: a :class:`WharfError` whose message is one line) and loses no data. On the API emulator,
without a kubelet unless a test asks for one: an asynchronous run's pod stays pending, as on a
cluster with no room for it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.test_cli import assert_one_line_error, wharf
from tests.integrations.kubernetes.first_hour_k8s_bed import (  # noqa: F401 (fixture)
    NAMESPACE,
    closed_port_url,
    kubeconfig_variant,
    names,
    one,
    submitted_async,
    tiny,
    update_orchestrator,
    workspace,
)
from tests.integrations.kubernetes.step_backend_bed import launch
from tests.kube.emulator import Emulator
from tests.kube.emulator.resources import CRONJOBS, JOBS, SECRETS
from tests.kube.kubelet import Kubelet
from tests.store.conftest import World
from tests.waiting import wait_until
from wharf import Schedule, pipeline, step
from wharf.artifacts.store import LocalArtifactStore
from wharf.config.global_config import load_config
from wharf.core.enums import ComponentType, ExecutionStatus
from wharf.core.errors import WharfError
from wharf.integrations.kubernetes.clients import kube_clients
from wharf.integrations.kubernetes.settings import KubernetesOrchestratorSettings
from wharf.integrations.kubernetes.step_backend import KubernetesStepBackend, job_name_for
from wharf.integrations.kubernetes.step_backend_deletes import delete_jobs_of_step_run
from wharf.sdk import stacks
from wharf.sdk.run_failure import RunFailedError
from wharf.sdk.workspace import Workspace
from wharf.store.models import StepRunFilter


@pipeline(code_source="image", schedule=Schedule(name="nightly", cron_expression="0 3 * * *"))
def nightly() -> None:
    one()


@step(step_operator="gpu")
def on_the_cluster() -> int:
    return 1


@pipeline(code_source="image", enable_cache=False)
def sends_a_step() -> None:
    on_the_cluster()


# --------------------------------------------------------------------- steps and following


def test_a_step_job_the_cluster_cannot_take_is_one_line(
    emulator: Emulator, tmp_path: Path, world: World, logs: LocalArtifactStore
) -> None:
    """What a step's reason says when its Job cannot be created (here, once the client's
    retries are spent: a ``kubernetes`` step operator or orchestrator pod retries for a minute)."""
    unreachable = kubeconfig_variant(emulator, tmp_path, server=closed_port_url())
    clients = kube_clients(kubeconfig=str(unreachable))
    backend = KubernetesStepBackend(
        clients,
        KubernetesOrchestratorSettings(namespace=NAMESPACE),
        image="wharf/python:3.11",
        labels={"wharf.io/pipeline": "training"},
    )
    attempt = launch(world, logs, STAND_IN="ok")
    try:
        with pytest.raises(WharfError) as raised:
            backend.submit(attempt, None)
    finally:
        backend.close()
        clients.close()
    message = str(raised.value)
    assert "\n" not in message
    job = job_name_for(backend.settings, attempt.record)
    step_name = attempt.record.name
    assert message.startswith(f"Cannot create the Job {job} of step {step_name} in {NAMESPACE}")
    assert "the Kubernetes API is unreachable" in message


def test_a_step_whose_image_cannot_be_pulled_says_so_and_not_that_a_heartbeat_was_lost(
    workspace: Workspace, kubelet: Kubelet, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A local run whose step goes to the step operator with an image the node cannot pull."""
    missing = "registry.example/wharf-missing:1"
    config = {"image": missing, "mounts_artifact_store": True}
    stacks.register_component(workspace, "gpu", ComponentType.STEP_OPERATOR, "kubernetes", config)
    stacks.register_stack(
        workspace, "operated", orchestrator="default", artifact_store="default", step_operator="gpu"
    )
    monkeypatch.setenv("WHARF_ACTIVE_STACK", "operated")
    operated = Workspace.open(load_config())
    try:
        with pytest.raises(RunFailedError) as raised:
            sends_a_step.run_in(operated)
    finally:
        operated.close()
    run = raised.value.run
    (step_run,) = workspace.store.steps.list(StepRunFilter(run_id=run.id)).items
    reason = step_run.status_reason or ""
    assert reason.startswith(
        f'The step process could not start: ErrImagePull for image "{missing}" ('
    ), reason
    assert reason.endswith(").") and "\n" not in reason, reason


def test_a_refusal_while_following_a_run_is_one_line_and_the_run_goes_on(
    workspace: Workspace,
    emulator: Emulator,
    kubelet: Kubelet,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A submitter allowed to create Jobs but not to read pod logs: the run is not lost."""
    emulator.access.deny("get", "pods/log")
    run = tiny.run_in(workspace)
    out = capsys.readouterr().out
    (stopped,) = [line for line in out.splitlines() if line.startswith("Stopped following")]
    assert "(Cannot follow the orchestrator Job (HTTP 403): " in stopped, out
    assert stopped.endswith(
        f"it goes on in the cluster (stop it with `wharf runs stop {run.name}`)."
    )
    assert "HTTP response headers" not in out
    # Kept and run by its pod to its end (here its step cannot import this test's module).
    assert wait_until(lambda: workspace.store.runs.get(run.id).status.is_finished, 60)


# ----------------------------------------------------------------------------- stopping


def test_a_forced_stop_of_a_run_whose_pod_never_started_removes_its_job_and_secret(
    workspace: Workspace, emulator: Emulator
) -> None:
    name = submitted_async(workspace, emulator)
    logs = wharf("runs", "logs", name)  # a follower would otherwise wait in silence
    assert logs.returncode == 0, logs.stderr
    assert logs.stdout.splitlines() == [
        f"Run '{name}' is initializing: its orchestrator has not started it yet (--follow waits "
        f"for it); `wharf runs stop {name} --force` ends it."
    ]
    asked = wharf("runs", "stop", name)  # gracefully: nothing runs it yet to end it
    assert asked.returncode == 0, asked.stderr
    assert asked.stdout.strip() == (
        f"Run '{name}' is stopping: no orchestrating process has taken it over yet (e.g. a "
        "Kubernetes run whose pod has not started); it ends when one does, or now with "
        f"`wharf runs stop {name} --force`."
    )
    stopped = wharf("runs", "stop", name, "--force")
    assert stopped.returncode == 0, stopped.stderr
    assert stopped.stdout.startswith(f"Run '{name}' is stopped: Stopped by force")
    assert ".." not in stopped.stdout
    assert workspace.store.runs.list().items[0].status is ExecutionStatus.STOPPED
    assert names(emulator, SECRETS) == []
    assert wait_until(lambda: not names(emulator, JOBS), 30)  # its pod first (background)


def test_a_forced_stop_with_the_cluster_unreachable_says_what_is_left_in_one_line(
    workspace: Workspace, emulator: Emulator, tmp_path: Path
) -> None:
    name = submitted_async(workspace, emulator)
    unreachable = kubeconfig_variant(emulator, tmp_path, server=closed_port_url())
    logs = wharf("runs", "logs", name, env={"KUBECONFIG": str(unreachable)})  # the store's only
    assert logs.returncode == 0 and logs.stderr == "" and "is initializing" in logs.stdout
    stopped = wharf("runs", "stop", name, "--force", env={"KUBECONFIG": str(unreachable)})
    (job,) = names(emulator, JOBS)
    assert_one_line_error(
        stopped, f"Run '{name}' is stopped, but its orchestrator Job {NAMESPACE}/{job} is left"
    )
    assert "the Kubernetes API is unreachable" in stopped.stderr
    assert f"kubectl -n {NAMESPACE} delete job {job}" in stopped.stderr
    assert workspace.store.runs.list().items[0].status is ExecutionStatus.STOPPED


def test_deleting_a_step_runs_jobs_with_the_cluster_unreachable_is_one_line(
    emulator: Emulator, tmp_path: Path
) -> None:
    """What ``wharf runs stop --force`` meets for each running step pod of a run."""
    from uuid import uuid4

    unreachable = kubeconfig_variant(emulator, tmp_path, server=closed_port_url())
    clients = kube_clients(kubeconfig=str(unreachable))
    try:
        step_run_id = uuid4()
        with pytest.raises(WharfError) as raised:
            delete_jobs_of_step_run(clients.batch, NAMESPACE, step_run_id)
    finally:
        clients.close()
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith(f"Cannot delete the Jobs of step run {step_run_id} in default")
    assert "the Kubernetes API is unreachable" in message


# ----------------------------------------------------------------------------- schedules


def test_a_schedule_whose_cronjob_was_deleted_by_hand_cannot_be_resumed_and_is_deletable(
    workspace: Workspace, emulator: Emulator
) -> None:
    nightly.run_in(workspace)
    (cron_job,) = names(emulator, CRONJOBS)
    emulator.store.delete(CRONJOBS, NAMESPACE, cron_job)  # kubectl delete cronjob ...
    for command in ("pause", "resume"):
        result = wharf("schedule", command, "nightly")
        assert_one_line_error(
            result,
            f"Schedule 'nightly' has no CronJob in namespace {NAMESPACE} (deleted outside "
            "Wharf?): nothing fires it. Delete it with `wharf schedule delete nightly`",
        )
        assert workspace.store.schedules.list().items[0].active  # as it was
    deleted = wharf("schedule", "delete", "nightly", "--yes")
    assert deleted.returncode == 0 and deleted.stdout.strip() == "Deleted schedule 'nightly'."
    assert workspace.store.schedules.list().items == []
