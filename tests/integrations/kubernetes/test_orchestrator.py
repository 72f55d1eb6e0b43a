"""The kubernetes orchestrator without a cluster: its component configuration parsed, the runs it
refuses (a local artifact store, schedules without cron, a scheduled dynamic pipeline defined in a
script, no image) before any pod, dynamic pipelines' steps each in a pod of their own, and the
orchestrator pod's command line and environment (the run token never a plain value)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from wharf import pipeline, step
from wharf.artifacts.store import LocalArtifactStore
from wharf.config.global_config import API_KEY_ENV, SERVER_URL_ENV, load_config
from wharf.config.settings import Schedule
from wharf.config.spec import PipelineConfig, PipelineSpec
from wharf.core.enums import ComponentType
from wharf.core.errors import InputError
from wharf.execution.run_loop import RunJob
from wharf.integrations.kubernetes.labels import PIPELINE_KEY, RUN_ID_KEY, is_dns1123_label
from wharf.integrations.kubernetes.manifests import ORCHESTRATOR_MODULE
from wharf.integrations.kubernetes.orchestrator import KubernetesOrchestrator, is_local_path
from wharf.integrations.kubernetes.orchestrator_follow import job_end, stuck_container
from wharf.integrations.kubernetes.orchestrator_launch import (
    OrchestratorArgs,
    orchestrator_command,
    orchestrator_job_name,
    parse_orchestrator_args,
    pod_environment,
    token_secret_name,
)
from wharf.integrations.kubernetes.orchestrator_main import (
    STEP_POD_ENV,
    step_environment,
    with_parallelism,
)
from wharf.integrations.kubernetes.orchestrator_submit import orchestrator_manifest
from wharf.integrations.kubernetes.settings import KubernetesOrchestratorSettings
from wharf.sdk import stacks
from wharf.sdk.workspace import Workspace
from wharf.store.models import RunStart


@step
def one() -> int:
    return 1


@pipeline(code_source="image")
def tiny() -> None:
    one()


@pipeline(
    code_source="image",
    settings={
        "orchestrator.kubernetes": {
            "namespace": "team-a",
            "image": "registry.example/team-a:2",
            "synchronous": False,
            "orchestrator_pod_settings": {"annotations": {"team": "a"}},
        }
    },
)
def tiny_for_team_a() -> None:
    one()


@pipeline(code_source="image", schedule=Schedule(name="poll", interval_seconds=600))
def tiny_every_ten_minutes() -> None:
    one()


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Workspace]:
    monkeypatch.setenv("WHARF_HOME", str(tmp_path / "home"))
    for name in ("WHARF_STORE_URL", "WHARF_ARTIFACT_ROOT", "WHARF_ACTIVE_STACK", SERVER_URL_ENV):
        monkeypatch.delenv(name, raising=False)
    ws = Workspace.open(load_config())
    yield ws
    ws.close()


def kubernetes_stack(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch, **configuration: Any
) -> KubernetesOrchestrator:
    """A stack ``k8s`` (kubernetes orchestrator, the default local artifact store), active."""
    stacks.register_component(ws, "k8s", ComponentType.ORCHESTRATOR, "kubernetes", configuration)
    stacks.register_stack(ws, "k8s", orchestrator="k8s", artifact_store="default")
    monkeypatch.setenv("WHARF_ACTIVE_STACK", "k8s")
    ws.config = load_config()
    orchestrator = ws.component_instance(ws.active_stack(), ComponentType.ORCHESTRATOR)
    assert isinstance(orchestrator, KubernetesOrchestrator)
    return orchestrator


def test_the_component_configuration_is_parsed_into_settings(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    orchestrator = kubernetes_stack(
        workspace,
        monkeypatch,
        namespace="ml",
        context="prod",
        kubeconfig="/etc/kube/config",
        image="registry.example/wharf:1",
        synchronous="false",
        max_parallelism="4",
        pod_settings='{"node_selectors": {"pool": "cpu"}}',
    )
    settings = orchestrator.settings
    assert (settings.namespace, settings.context, settings.kubeconfig) == (
        "ml",
        "prod",
        "/etc/kube/config",
    )
    assert settings.image == "registry.example/wharf:1" == orchestrator.image()
    assert settings.synchronous is False and settings.max_parallelism == 4
    assert settings.pod_settings is not None
    assert settings.pod_settings.node_selectors == {"pool": "cpu"}
    assert orchestrator.flavor == "kubernetes" and orchestrator.code_travels
    assert not orchestrator.starts_runs_in_process
    assert orchestrator.supports_isolated_steps and orchestrator.isolates_static_steps


def test_a_bad_configuration_names_the_component(tmp_path: Path) -> None:
    from wharf.store.models import ComponentRecord

    record = ComponentRecord.model_validate(
        {
            "id": uuid.uuid4(),
            "name": "k8s",
            "type": ComponentType.ORCHESTRATOR,
            "flavor": "kubernetes",
            "configuration": {"namespace": "Not_A_Namespace"},
            "created": "2026-01-01T00:00:00Z",
        }
    )
    with pytest.raises(InputError, match=r"Orchestrator 'k8s'.*namespace"):
        KubernetesOrchestrator(record)


def test_a_local_artifact_store_is_refused_and_nothing_is_left_behind(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    kubernetes_stack(workspace, monkeypatch, image="wharf/python:3.11")
    with pytest.raises(InputError, match=r"local artifact store.*mounts_artifact_store=true"):
        tiny.run_in(workspace)
    assert workspace.store.runs.list().items == []


def test_a_mounted_local_artifact_store_is_accepted(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    orchestrator = kubernetes_stack(workspace, monkeypatch, mounts_artifact_store="true")
    orchestrator.check_artifact_store(LocalArtifactStore(tmp_path))  # no error


@pytest.mark.parametrize(
    ("path", "local"),
    [
        ("/data/artifacts", True),
        ("file:///data/artifacts", True),
        ("s3://bucket/prefix", False),
        ("gs://bucket", False),
    ],
)
def test_which_artifact_store_paths_are_local(path: str, local: bool) -> None:
    assert is_local_path(path) is local


@pytest.mark.parametrize(
    ("definition", "match"),
    [(tiny_every_ten_minutes, "schedules need cron_expression")],
)
def test_runs_it_cannot_run_yet_are_refused_before_anything_is_recorded(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch, definition: Any, match: str
) -> None:
    kubernetes_stack(workspace, monkeypatch, image="wharf/python:3.11")
    with pytest.raises(InputError, match=match):
        definition.run_in(workspace)
    assert workspace.store.runs.list().items == []
    assert workspace.store.schedules.list().items == []


def test_a_dynamic_pipeline_runs_every_step_isolated_and_only_a_script_one_cannot_be_scheduled(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    orchestrator = kubernetes_stack(workspace, monkeypatch, image="wharf/python:3.11")
    in_module = PipelineSpec(name="fan_out", source="project.flows:fan_out", dynamic=True)
    runtimes = orchestrator.runtime_policy(in_module)
    assert runtimes.isolate_all and runtimes.has_isolation  # each step in its own pod
    nightly = PipelineConfig(schedule=Schedule(name="nightly", cron_expression="0 3 * * *"))
    scheduled = in_module.model_copy(update={"config": nightly})
    assert orchestrator.runtime_policy(scheduled).isolate_all
    in_script = scheduled.model_copy(update={"source": "__main__:fan_out"})
    with pytest.raises(InputError, match="define the pipeline in a module the script imports"):
        orchestrator.runtime_policy(in_script)
    # Run now rather than on a schedule, a pipeline of the script is loaded from the script.
    assert orchestrator.runtime_policy(in_module.model_copy(update={"source": "__main__:f"}))


def test_an_orchestrator_without_an_image_says_how_to_set_one(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    orchestrator = kubernetes_stack(workspace, monkeypatch, mounts_artifact_store=True)
    with pytest.raises(InputError, match="-c image="):
        tiny.run_in(workspace)
    assert orchestrator.settings.image is None
    assert workspace.store.runs.list().items == []


# ----------------------------------------------------------------------------- the pod's launch


def test_the_pod_environment_keeps_the_token_out_of_plain_values() -> None:
    child_env = {
        SERVER_URL_ENV: "https://wharf.example",
        API_KEY_ENV: "run-token",
        "PYTHONPATH": "/home/me/project",
        "WHARF_HOME": "/home/me/.wharf",
        "WHARF_ARTIFACT_ROOT": "/home/me/.wharf/artifacts",
        "WHARF_HEARTBEAT_INTERVAL": "15.0",
    }
    environment = pod_environment(child_env)
    assert environment.token == "run-token"
    assert environment.env == {
        SERVER_URL_ENV: "https://wharf.example",
        "WHARF_HEARTBEAT_INTERVAL": "15.0",
    }
    embedded = pod_environment({"WHARF_STORE_URL": "sqlite:////data/wharf.db"})
    assert embedded.token is None and embedded.env == {}  # a store URL is a credential too
    assert embedded.secrets == {"WHARF_STORE_URL": "sqlite:////data/wharf.db"}


def test_step_pods_get_the_orchestrator_pods_wharf_settings_only() -> None:
    environ = {
        "WHARF_STORE_URL": "sqlite:////data/wharf.db",
        API_KEY_ENV: "run-token",
        "WHARF_PROJECT": "vision",
        "WHARF_HEARTBEAT_INTERVAL": "5",
        "HOSTNAME": "wharf-tiny-1234",
        "WHARF_HOME": "/image/home",  # the image's, as the step pods' is
        "KUBECONFIG": "/var/run/kube",
        "PATH": "/usr/bin",
    }
    assert step_environment(environ) == {
        "WHARF_STORE_URL": "sqlite:////data/wharf.db",
        API_KEY_ENV: "run-token",
        "WHARF_PROJECT": "vision",
        "WHARF_HEARTBEAT_INTERVAL": "5",
    }


def test_step_pods_get_only_the_wharf_settings_named_in_the_allow_list() -> None:
    """Before, every ``WHARF_*`` variable of the orchestrator pod went on to its step pods: a
    pod setting's ``WHARF_SERVER_SECRET_KEY`` or a code-cache path of the image as well."""
    environ = {
        SERVER_URL_ENV: "https://wharf.example",
        API_KEY_ENV: "run-token",
        "WHARF_SERVER_SECRET_KEY": "not-for-steps",
        "WHARF_RM_API_KEY": "not-for-steps-either",
        "WHARF_CODE_ARCHIVE_LIMIT_MIB": "64",
        "WHARF_ACTIVE_STACK": "k8s",
        "WHARF_SOMETHING_NEW": "1",
    }
    assert step_environment(environ) == {
        SERVER_URL_ENV: "https://wharf.example",
        API_KEY_ENV: "run-token",
    }
    assert {SERVER_URL_ENV, API_KEY_ENV, "WHARF_STORE_URL"} <= STEP_POD_ENV


def test_the_command_line_round_trips() -> None:
    run_id, snapshot_id = uuid.uuid4(), uuid.uuid4()
    args = OrchestratorArgs(
        snapshot_id=snapshot_id,
        run_id=run_id,
        namespace="ml",
        job_name=orchestrator_job_name(None, "tiny", run_id),
        settings_json='{"namespace": "ml"}',
        token_secret=token_secret_name(run_id),
    )
    command = orchestrator_command(args)
    assert command[:3] == ["python", "-m", ORCHESTRATOR_MODULE]
    assert parse_orchestrator_args(command[3:]) == args
    scheduled = OrchestratorArgs(**{**vars(args), "run_id": None, "token_secret": None})
    assert parse_orchestrator_args(orchestrator_command(scheduled)[3:]) == scheduled


def test_resource_names_are_valid_and_stable() -> None:
    run_id = uuid.uuid4()
    name = orchestrator_job_name("team", "A Pipeline_With Odd Characters " * 4, run_id)
    assert is_dns1123_label(name) and name.startswith("team-")
    assert name == orchestrator_job_name("team", "A Pipeline_With Odd Characters " * 4, run_id)
    assert is_dns1123_label(token_secret_name(run_id))


def test_bad_command_lines_exit_with_usage() -> None:
    with pytest.raises(SystemExit) as exited:
        parse_orchestrator_args(["--run-id", "not-a-uuid"])
    assert exited.value.code == 2


def test_hints_name_both_ways_to_follow() -> None:
    from wharf.integrations.kubernetes.orchestrator import _print_follow_hints
    from wharf.integrations.kubernetes.orchestrator_submit import SubmittedJob

    out = io.StringIO()
    run: Any = type("Run", (), {"name": "tiny-2026"})()
    _print_follow_hints(out, run, SubmittedJob("ml", "wharf-tiny-ab12", "uid", None))
    text = out.getvalue()
    assert "wharf runs logs tiny-2026 --follow" in text
    assert "kubectl -n ml logs -f job/wharf-tiny-ab12" in text


# ----------------------------------------------------------------------------- the Job submitted


def test_the_orchestrator_job_runs_the_entry_point_with_the_token_from_a_secret(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    orchestrator = kubernetes_stack(
        workspace, monkeypatch, image="registry.example/wharf:1", namespace="ml"
    )
    spec = tiny.compile()
    stack = workspace.active_stack()
    _, snapshot, run = workspace.store.runs.record(
        workspace.project.id, "tiny", stack.id, spec, RunStart(name="tiny-1")
    )
    artifact_store = workspace.component_instance(stack, ComponentType.ARTIFACT_STORE)
    job = RunJob(snapshot, run, workspace.run_services(artifact_store))
    args = orchestrator.orchestrator_args(job)
    args = OrchestratorArgs(**{**vars(args), "token_secret": token_secret_name(run.id)})
    environment = pod_environment(
        {
            **job.services.child_env,
            SERVER_URL_ENV: "https://wharf.example",
            API_KEY_ENV: "s3cr3t-run-token",
        }
    )
    manifest = orchestrator_manifest(
        orchestrator.settings, job, args, image=orchestrator.image(), environment=environment
    )

    assert manifest["kind"] == "Job"
    assert manifest["metadata"]["name"] == args.job_name
    assert manifest["metadata"]["namespace"] == "ml" == args.namespace
    labels = manifest["metadata"]["labels"]
    assert labels[RUN_ID_KEY] == str(run.id) and labels[PIPELINE_KEY] == "tiny"
    pod = manifest["spec"]["template"]
    assert pod["metadata"]["labels"][RUN_ID_KEY] == str(run.id)
    assert manifest["spec"]["backoffLimit"] == orchestrator.settings.orchestrator_job_backoff_limit
    fail_rules = [
        r for r in manifest["spec"]["podFailurePolicy"]["rules"] if r["action"] == "FailJob"
    ]
    assert [r["onExitCodes"]["values"] for r in fail_rules] == [[1]]  # a run that ended failed

    (container,) = pod["spec"]["containers"]
    assert container["image"] == "registry.example/wharf:1"
    assert [*container["command"], *container["args"]] == orchestrator_command(args)
    assert parse_orchestrator_args(container["args"]) == args
    settings = KubernetesOrchestratorSettings.model_validate_json(args.settings_json)
    assert settings == orchestrator.settings
    env = {entry["name"]: entry for entry in container["env"]}
    assert env[API_KEY_ENV] == {
        "name": API_KEY_ENV,
        "valueFrom": {"secretKeyRef": {"name": token_secret_name(run.id), "key": "token"}},
    }
    assert env[SERVER_URL_ENV]["value"] == "https://wharf.example"
    assert not {"PYTHONPATH", "WHARF_HOME", "WHARF_ARTIFACT_ROOT"} & set(env)
    assert "s3cr3t-run-token" not in json.dumps(manifest)  # the token is only in the Secret
    requests = container["resources"]["requests"]
    assert requests == {"memory": "400Mi", "cpu": "100m"}  # the orchestrator pod's defaults


def test_a_pipelines_orchestrator_settings_shape_its_orchestrator_pod(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    orchestrator = kubernetes_stack(
        workspace, monkeypatch, image="registry.example/wharf:1", namespace="ml"
    )
    spec = tiny_for_team_a.compile()
    stack = workspace.active_stack()
    _, snapshot, run = workspace.store.runs.record(
        workspace.project.id, "tiny_for_team_a", stack.id, spec, RunStart(name="team-a-1")
    )
    artifact_store = workspace.component_instance(stack, ComponentType.ARTIFACT_STORE)
    job = RunJob(snapshot, run, workspace.run_services(artifact_store))

    settings = orchestrator.run_settings(spec)
    args = orchestrator.orchestrator_args(job)
    manifest = orchestrator_manifest(
        settings,
        job,
        args,
        image=settings.image or orchestrator.image(),
        environment=pod_environment(job.services.child_env),
    )

    assert (settings.namespace, settings.synchronous) == ("team-a", False)
    assert args.namespace == "team-a" == manifest["metadata"]["namespace"]
    pod = manifest["spec"]["template"]
    assert pod["metadata"]["annotations"]["team"] == "a"
    assert pod["spec"]["containers"][0]["image"] == "registry.example/team-a:2"
    passed_on = KubernetesOrchestratorSettings.model_validate_json(args.settings_json)
    assert passed_on == settings  # the pod's step Jobs start from the pipeline's settings too
    assert orchestrator.settings.namespace == "ml"  # the component is unchanged


# ----------------------------------------------------------------------------- following the Job


def test_how_a_job_ended_is_read_from_its_conditions() -> None:
    def job(*conditions: dict[str, str]) -> dict[str, Any]:
        return {"status": {"conditions": list(conditions)}}

    assert job_end(job()) is None
    assert job_end(job({"type": "Complete", "status": "False"})) is None
    complete = job_end(job({"type": "Complete", "status": "True"}))
    assert complete is not None and complete.succeeded
    failed = job_end(
        job({"type": "Failed", "status": "True", "reason": "PodFailurePolicy", "message": "x"})
    )
    assert failed is not None and not failed.succeeded
    assert failed.detail == "failed: PodFailurePolicy (x)"


def test_a_pod_waiting_for_a_configured_reason_is_stuck() -> None:
    pod = {
        "spec": {"containers": [{"name": "main", "image": "nope:1"}]},
        "status": {
            "containerStatuses": [
                {"name": "main", "state": {"waiting": {"reason": "ErrImagePull", "message": "m"}}}
            ]
        },
    }
    reasons = KubernetesOrchestratorSettings().fail_on_container_waiting_reasons
    assert stuck_container(pod, reasons) == "image 'nope:1': ErrImagePull: m"
    assert stuck_container(pod, ["ImagePullBackOff"]) is None
    creating = {"status": {"containerStatuses": [{"state": {"waiting": {"reason": "X"}}}]}}
    assert stuck_container(creating, reasons) is None
    assert stuck_container({}, reasons) is None


def test_the_orchestrators_max_parallelism_caps_the_pipelines(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    kubernetes_stack(workspace, monkeypatch, image="wharf/python:3.11")
    stack = workspace.active_stack()

    def snapshot_with(limit: int | None) -> Any:
        spec = tiny.compile()
        spec = spec.model_copy(
            update={"config": spec.config.model_copy(update={"max_parallelism": limit})}
        )
        _, snapshot, _ = workspace.store.runs.record(
            workspace.project.id, "tiny", stack.id, spec, RunStart(name=f"tiny-{limit}")
        )
        return snapshot

    def effective(pipeline: int | None, orchestrator: int | None) -> int | None:
        settings = KubernetesOrchestratorSettings(max_parallelism=orchestrator)
        capped = with_parallelism(snapshot_with(pipeline), settings)
        limit: int | None = capped.spec.config.max_parallelism
        return limit

    assert effective(None, None) is None
    assert effective(None, 4) == 4
    assert effective(8, 4) == 4
    assert effective(2, 4) == 2
    assert effective(3, None) == 3


def test_the_cli_registers_a_kubernetes_orchestrator_as_the_issue_shows(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    command = [sys.executable, "-m", "wharf.cli.main", "component", "register", "k8s"]
    command += ["--type", "orchestrator", "--flavor", "kubernetes", "-c", "namespace=ml"]
    command += ["-c", "context=prod", "-c", "image=registry.example/wharf:1"]
    command += ["-c", "synchronous=false", "-c", "fail_on_container_waiting_reasons=ErrImagePull"]
    done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    record = stacks.find_component(workspace, ComponentType.ORCHESTRATOR, "k8s")
    settings = KubernetesOrchestrator(record).settings
    assert (settings.namespace, settings.context, settings.synchronous) == ("ml", "prod", False)
    assert settings.fail_on_container_waiting_reasons == ["ErrImagePull"]
