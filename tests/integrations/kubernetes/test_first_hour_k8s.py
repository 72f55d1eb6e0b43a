"""A user's first hour on Kubernetes: bad input and a cluster that cannot be used.

Each failure is one clear line (the CLI: one line on stderr, a non-zero exit, no traceback; the
SDK: a :class:`WharfError` whose message is one line) and loses no data: nothing half-recorded in
the store (no run left initializing or running) and nothing left in the cluster (no Secret, no
Job). On the API emulator, without a kubelet: every failure here comes before any pod runs (an
asynchronous run's pod stays pending, as on a cluster with no room for it).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_cli import assert_one_line_error, wharf
from tests.integrations.kubernetes.step_backend_bed import launch
from tests.kube.emulator import Emulator
from tests.kube.emulator.resources import CRONJOBS, JOBS, SECRETS
from tests.kube.kubelet import Kubelet
from tests.store.conftest import World
from tests.waiting import wait_until
from wharf import Schedule, pipeline, step
from wharf.artifacts.store import LocalArtifactStore
from wharf.config.global_config import SERVER_URL_ENV, load_config
from wharf.core.enums import ComponentType, ExecutionStatus
from wharf.core.errors import InputError, WharfError
from wharf.integrations.kubernetes.clients import kube_clients
from wharf.integrations.kubernetes.settings import KubernetesOrchestratorSettings
from wharf.integrations.kubernetes.step_backend import KubernetesStepBackend, job_name_for
from wharf.integrations.kubernetes.step_backend_deletes import delete_jobs_of_step_run
from wharf.sdk import stacks
from wharf.sdk.run_failure import RunFailedError
from wharf.sdk.workspace import Workspace
from wharf.store.models import StepRunFilter

IMAGE = "wharf/python:3.11"
NAMESPACE = "default"


@step
def one() -> int:
    return 1


@pipeline(code_source="image")
def tiny() -> None:
    one()


@step(
    settings={
        "orchestrator.kubernetes": {
            "pod_settings": {"tolerations": [{"key": "gpu", "operator": "Sometimes"}]}
        }
    }
)
def tolerant() -> int:
    return 1


@pipeline(code_source="image")
def badly_tolerant() -> None:
    tolerant()


@step(settings={"orchestrator.kubernetes": {"namespace": "elsewhere"}})
def moved() -> int:
    return 1


@pipeline(code_source="image")
def with_a_moved_step() -> None:
    moved()


@pipeline(code_source="image", schedule=Schedule(name="nightly", cron_expression="0 3 * * *"))
def nightly() -> None:
    one()


@step(step_operator="gpu")
def on_the_cluster() -> int:
    return 1


@pipeline(code_source="image", enable_cache=False)
def sends_a_step() -> None:
    on_the_cluster()


@pytest.fixture
def workspace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, emulator: Emulator
) -> Iterator[Workspace]:
    """A fresh home whose active stack ``k8s`` runs on the emulator (the user's kubeconfig),
    with the local artifact store (mounted, as the pods of this bed would see it)."""
    monkeypatch.setenv("WHARF_HOME", str(tmp_path / "home"))
    for name in ("WHARF_STORE_URL", "WHARF_ARTIFACT_ROOT", SERVER_URL_ENV, "PYTHONPATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("WHARF_ACTIVE_STACK", "k8s")
    monkeypatch.setenv("KUBECONFIG", str(emulator.kubeconfig_path))
    ws = Workspace.open(load_config())
    config = {"image": IMAGE, "mounts_artifact_store": True}
    stacks.register_component(ws, "k8s", ComponentType.ORCHESTRATOR, "kubernetes", config)
    stacks.register_stack(ws, "k8s", orchestrator="k8s", artifact_store="default")
    yield ws
    ws.close()


def names(emulator: Emulator, kind: Any, namespace: str = NAMESPACE) -> list[str]:
    return [i["metadata"]["name"] for i in emulator.store.list(kind, namespace)["items"]]


def kubeconfig_variant(emulator: Emulator, tmp_path: Path, **changes: str) -> Path:
    """The emulator's kubeconfig with another ``server`` and/or ``token``."""
    config = json.loads(emulator.kubeconfig_path.read_text())
    if "server" in changes:
        config["clusters"][0]["cluster"]["server"] = changes["server"]
    if "token" in changes:
        config["users"][0]["user"]["token"] = changes["token"]
    path = tmp_path / f"kubeconfig-{len(list(tmp_path.glob('kubeconfig-*')))}"
    path.write_text(json.dumps(config))
    return path


def closed_port_url() -> str:
    """An address nothing listens on (port 1 is reserved and never bound by tests)."""
    return "http://127.0.0.1:1"


def update_orchestrator(ws: Workspace, **options: Any) -> None:
    stacks.update_component(ws, "k8s", ComponentType.ORCHESTRATOR, options)


# ----------------------------------------------------------------------------- registering


def test_register_refuses_a_mistyped_key_in_one_line_and_records_nothing(
    workspace: Workspace,
) -> None:
    command = ["component", "register", "k8s-2", "--type", "orchestrator", "--flavor"]
    result = wharf(*command, "kubernetes", "-c", f"image={IMAGE}", "-c", "namespaec=ml")
    assert_one_line_error(
        result,
        "Invalid Kubernetes orchestrator settings: 'namespaec' is not a known field "
        "(did you mean 'namespace'?)",
    )
    registered = stacks.list_components(workspace, ComponentType.ORCHESTRATOR).items
    assert "k8s-2" not in {c.name for c in registered}


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"namespace": "ML_Team"}, "'namespace': 'ML_Team' is not a valid namespace"),
        ({"max_parallelism": -1}, "'max_parallelism' must be more than 0"),
        ({"synchronous": "maybe"}, "'synchronous' must be true or false (got 'maybe')"),
        ({"pod_settings": "{node_selectors: 5}"}, "'pod_settings' must be JSON"),
        ({"pod_settings": {"node_selectors": 5}}, "'pod_settings.node_selectors' must be a"),
        (
            {"pod_settings": {"tolerations": [{"key": "gpu", "effect": "NoSchedul"}]}},
            "'pod_settings.tolerations': entry 0 "
            '({"key": "gpu", "effect": "NoSchedul"}): '
            "effect 'NoSchedul' must be one of NoSchedule, PreferNoSchedule, NoExecute",
        ),
    ],
)
def test_register_refuses_bad_values_naming_the_field(
    workspace: Workspace, options: dict[str, Any], expected: str
) -> None:
    with pytest.raises(InputError) as raised:
        stacks.register_component(
            workspace, "k8s-2", ComponentType.ORCHESTRATOR, "kubernetes", options
        )
    message = str(raised.value)
    assert message.startswith("Invalid Kubernetes orchestrator settings: "), message
    assert expected in message and "\n" not in message, message
    registered = stacks.list_components(workspace, ComponentType.ORCHESTRATOR).items
    assert "k8s-2" not in {c.name for c in registered}


def test_update_and_the_step_operator_are_checked_the_same_way(workspace: Workspace) -> None:
    updated = wharf("component", "update", "k8s", "--type", "orchestrator", "-c", "namespace=A")
    assert_one_line_error(updated, "'A' is not a valid namespace")
    assert stacks.find_component(workspace, ComponentType.ORCHESTRATOR, "k8s").configuration == {
        "image": IMAGE,
        "mounts_artifact_store": True,
    }
    command = ["component", "register", "gpu", "--type", "step_operator", "--flavor"]
    operator = wharf(*command, "kubernetes", "-c", "max_parallelism=2")
    assert_one_line_error(operator, "Kubernetes step operator settings: 'max_parallelism'")


def test_a_context_the_kubeconfig_lacks_is_registered_and_refused_by_the_run(
    workspace: Workspace, emulator: Emulator
) -> None:
    """The kubeconfig is the submitting user's (another machine, one set up later): the
    context is checked when a run needs it, in one line naming it, and nothing is left."""
    update_orchestrator(workspace, context="prod")
    with pytest.raises(InputError) as raised:
        tiny.run_in(workspace)
    message = str(raised.value)
    assert "\n" not in message and "context prod" in message, message
    assert workspace.store.runs.list().items == []
    assert names(emulator, SECRETS) == [] and names(emulator, JOBS) == []


# ----------------------------------------------------------------------------- submitting


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("missing kubeconfig", "No kubeconfig found at"),
        ("malformed kubeconfig", "Cannot read the kubeconfig"),
        ("unreachable", "the Kubernetes API is unreachable (HTTPConnection(host='127.0.0.1'"),
        ("wrong token", "(HTTP 401): Unauthorized (the cluster refused the kubeconfig's"),
        (
            "no such namespace",
            '(HTTP 404): namespaces "ml-team" not found (create it, e.g. '
            "`kubectl create namespace ml-team`, or set the component's or the pipeline's "
            "`namespace` to one that exists)",
        ),
        ("jobs forbidden", '(HTTP 403): jobs.batch is forbidden: User "wharf-test" cannot'),
        ("secrets unpatchable", "Cannot let the Job own the run's Secret default/wharf-run-env"),
        ("failing exec plugin", 'User "system:anonymous" cannot create resource "secrets"'),
    ],
)
def test_a_run_the_cluster_cannot_take_fails_in_one_line_and_leaves_nothing(
    workspace: Workspace,
    emulator: Emulator,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    case: str,
    expected: str,
) -> None:
    if case == "missing kubeconfig":
        monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    elif case == "malformed kubeconfig":
        (tmp_path / "broken").write_text("clusters: [\n")
        monkeypatch.setenv("KUBECONFIG", str(tmp_path / "broken"))
    elif case == "unreachable":
        monkeypatch.setenv(
            "KUBECONFIG", str(kubeconfig_variant(emulator, tmp_path, server=closed_port_url()))
        )
    elif case == "wrong token":
        monkeypatch.setenv("KUBECONFIG", str(kubeconfig_variant(emulator, tmp_path, token="x")))
    elif case == "failing exec plugin":  # the client goes on without credentials
        config = json.loads(emulator.kubeconfig_path.read_text())
        config["users"][0]["user"] = {
            "exec": {
                "apiVersion": "client.authentication.k8s.io/v1beta1",
                "command": str(tmp_path / "no-such-cloud-cli"),
            }
        }
        (tmp_path / "exec").write_text(json.dumps(config))
        monkeypatch.setenv("KUBECONFIG", str(tmp_path / "exec"))
    elif case == "no such namespace":
        update_orchestrator(workspace, namespace="ml-team")
    elif case == "jobs forbidden":  # the run's Secret is created, then its Job refused
        emulator.access.deny("create", "jobs")
    else:  # the Job is created, then the Secret cannot be given to it: both go
        emulator.access.deny("patch", "secrets")
    with pytest.raises(WharfError) as raised:
        tiny.run_in(workspace)
    message = str(raised.value)
    assert "\n" not in message and expected in message, message
    if case == "failing exec plugin":
        assert message.endswith(
            "an exec plugin such as a cloud CLI may have failed, see the message above)"
        ), message
    assert workspace.store.runs.list().items == []  # the placeholder went with the failure
    assert names(emulator, SECRETS) == []
    assert wait_until(lambda: not names(emulator, JOBS), 30)  # a created Job: its pod first


def test_an_invalid_toleration_of_a_step_is_refused_before_anything_is_recorded(
    workspace: Workspace, emulator: Emulator
) -> None:
    with pytest.raises(InputError) as raised:
        badly_tolerant.run_in(workspace)
    message = str(raised.value)
    assert message.startswith("Invalid settings['orchestrator.kubernetes'] of step 'tolerant'")
    assert "'pod_settings.tolerations': entry 0" in message
    assert "operator 'Sometimes' must be one of Equal, Exists" in message
    assert workspace.store.runs.list().items == []
    assert names(emulator, SECRETS) == [] and names(emulator, JOBS) == []


def test_a_step_moving_its_job_to_another_namespace_is_refused_before_anything_is_recorded(
    workspace: Workspace, emulator: Emulator
) -> None:
    """The orchestrator pod would fail the step before its pod; the user learns it now."""
    with pytest.raises(InputError) as raised:
        with_a_moved_step.run_in(workspace)
    assert str(raised.value) == (
        "Step 'moved': settings['orchestrator.kubernetes'] sets namespace to 'elsewhere', but "
        "the step's Job runs where the run's other steps run (namespace 'default'): set "
        "namespace on the component or for the whole pipeline."
    )
    assert workspace.store.runs.list().items == []
    assert names(emulator, SECRETS) == [] and names(emulator, JOBS) == []


@pytest.mark.parametrize(
    ("toleration", "expected"),
    [
        ({"operator": "Equal", "value": "x"}, "without a key needs operator Exists"),
        ({"key": "gpu", "operator": "Exists", "value": "a"}, "value must be empty"),
        ({"key": "gpu", "value": "not valid!"}, "is not a valid label value"),
        ({"key": "bad key"}, "key 'bad key' is not a valid label key"),
        ({"key": "gpu", "tolerationSeconds": 30}, "tolerationSeconds needs effect NoExecute"),
        ({"key": "gpu", "effect": "NoExecute", "tolerationSeconds": "30"}, "whole number"),
        ({"key": "gpu", "operater": "Exists"}, "unknown field 'operater'"),
    ],
)
def test_tolerations_the_api_server_would_refuse_are_refused_here(
    toleration: dict[str, Any], expected: str
) -> None:
    with pytest.raises(InputError, match="tolerations") as raised:
        KubernetesOrchestratorSettings.from_component(
            {"pod_settings": {"tolerations": [toleration]}}
        )
    assert expected in str(raised.value)


def test_valid_tolerations_are_kept_as_given() -> None:
    tolerations = [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "tolerationSeconds": 60},
        {"operator": "Exists"},
    ]
    settings = KubernetesOrchestratorSettings(pod_settings={"tolerations": tolerations})
    assert settings.pod_settings is not None
    assert settings.pod_settings.tolerations == tolerations


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


def submitted_async(ws: Workspace, emulator: Emulator) -> str:
    """The name of an asynchronous run whose orchestrator Job exists and whose pod never
    starts (no kubelet)."""
    update_orchestrator(ws, synchronous=False)
    run = tiny.run_in(ws)
    assert run.status is ExecutionStatus.INITIALIZING
    assert len(names(emulator, JOBS)) == 1 and len(names(emulator, SECRETS)) == 1
    return run.name


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
