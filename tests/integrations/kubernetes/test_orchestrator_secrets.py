"""The run token Secret and the orchestrator pod's entry point against the API emulator (no
kubelet): the token travels only in a Secret owned by the orchestrator Job (collected with it),
a Job the API refuses leaves no Secret; the pod deletes the Secret only once the run ended, and
a pod restarted after its run started ends the run rather than run its steps twice."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from tests.integrations.kubernetes.test_orchestrator_e2e import IMAGE
from tests.kube.emulator import Emulator
from tests.waiting import wait_until
from wharf import pipeline, step
from wharf.config.global_config import API_KEY_ENV, load_config
from wharf.core.enums import ComponentType, ExecutionStatus
from wharf.core.errors import InputError, WharfError
from wharf.execution.run_lifecycle import start_run
from wharf.execution.run_loop import RunJob
from wharf.integrations.kubernetes.clients import kube_clients
from wharf.integrations.kubernetes.labels import RUN_ID_KEY
from wharf.integrations.kubernetes.orchestrator_follow import read_job
from wharf.integrations.kubernetes.orchestrator_launch import (
    OrchestratorArgs,
    pod_environment,
    token_secret_name,
)
from wharf.integrations.kubernetes.orchestrator_main import run_orchestrator
from wharf.integrations.kubernetes.orchestrator_submit import (
    create_orchestrator_job,
    delete_job,
    delete_token_secret,
)
from wharf.sdk import stacks
from wharf.sdk.workspace import Workspace
from wharf.store.models import PipelineRunRecord, RunStart


@step
def constant() -> int:
    return 1


@pipeline(code_source="image")
def token_pipeline() -> None:
    constant()


def test_the_run_token_travels_in_a_secret_that_a_refused_job_does_not_leave_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WHARF_HOME", str(tmp_path / "home"))
    for name in ("WHARF_STORE_URL", "WHARF_ARTIFACT_ROOT", "WHARF_ACTIVE_STACK"):
        monkeypatch.delenv(name, raising=False)
    token = "s3cr3t-run-token"
    with Emulator() as emulator:
        ws = Workspace.open(load_config())
        clients = kube_clients(kubeconfig=str(emulator.kubeconfig_path))
        try:
            stacks.register_component(
                ws, "k8s", ComponentType.ORCHESTRATOR, "kubernetes", {"image": IMAGE}
            )
            stacks.register_stack(ws, "k8s", orchestrator="k8s", artifact_store="default")
            stack = ws.store.stacks.get_stack_by_name("k8s")
            orchestrator = ws.component_instance(stack, ComponentType.ORCHESTRATOR)
            artifact_store = ws.component_instance(stack, ComponentType.ARTIFACT_STORE)

            def submit_with_token(name: str) -> tuple[RunJob, OrchestratorArgs, Any]:
                _, snapshot, run = ws.store.runs.record(
                    ws.project.id,
                    "token_pipeline",
                    stack.id,
                    token_pipeline.compile(),
                    RunStart(name=name),
                )
                job = RunJob(snapshot, run, ws.run_services(artifact_store))
                args = orchestrator.orchestrator_args(job)
                args = OrchestratorArgs(**{**vars(args), "token_secret": token_secret_name(run.id)})
                environment = pod_environment({**job.services.child_env, API_KEY_ENV: token})
                return (
                    job,
                    args,
                    lambda: create_orchestrator_job(
                        clients,
                        orchestrator.settings,
                        job,
                        args,
                        image=IMAGE,
                        environment=environment,
                    ),
                )

            job, args, create = submit_with_token("first")
            submitted = create()
            assert submitted.token_secret == args.token_secret
            secret = clients.core.read_namespaced_secret(args.token_secret, "default")
            assert base64.b64decode(secret.data["token"]).decode() == token
            assert secret.metadata.labels[RUN_ID_KEY] == str(job.run.id)
            created = read_job(clients, "default", args.job_name)
            assert created is not None and token not in json.dumps(created)
            (owner,) = secret.metadata.owner_references
            assert (owner.kind, owner.name) == ("Job", args.job_name)
            assert delete_token_secret(clients, "default", args.token_secret)
            assert not delete_token_secret(clients, "default", args.token_secret)

            # A Secret nobody deleted goes with its Job (the emulator's garbage collector).
            _, collected_args, create_collected = submit_with_token("second")
            create_collected()
            assert delete_job(clients, "default", collected_args.job_name)

            def secret_gone() -> bool:
                secrets = clients.core.list_namespaced_secret("default").items
                return collected_args.token_secret not in [s.metadata.name for s in secrets]

            assert wait_until(secret_gone, timeout=30)

            emulator.access.deny("create", "jobs")
            _, refused_args, create_refused = submit_with_token("third")
            with pytest.raises(WharfError, match="Cannot create the orchestrator Job"):
                create_refused()
            names = [s.metadata.name for s in clients.core.list_namespaced_secret("default").items]
            assert refused_args.token_secret not in names
        finally:
            clients.close()
            ws.close()


def test_the_orchestrator_pod_deletes_the_token_secret_once_the_run_ended_and_never_reruns_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WHARF_HOME", str(tmp_path / "home"))
    for name in ("WHARF_STORE_URL", "WHARF_ARTIFACT_ROOT", "WHARF_ACTIVE_STACK"):
        monkeypatch.delenv(name, raising=False)
    with Emulator() as emulator:
        monkeypatch.setenv("KUBECONFIG", str(emulator.kubeconfig_path))  # as in a pod
        ws = Workspace.open(load_config())
        clients = kube_clients()
        try:
            stacks.register_component(
                ws, "k8s", ComponentType.ORCHESTRATOR, "kubernetes", {"image": IMAGE}
            )
            stacks.register_stack(ws, "k8s", orchestrator="k8s", artifact_store="default")
            stack = ws.store.stacks.get_stack_by_name("k8s")
            environ = {"WHARF_HOME": str(ws.config.home), "WHARF_STORE_URL": ws.config.store_url}

            def pod_of(name: str) -> tuple[OrchestratorArgs, PipelineRunRecord]:
                _, snapshot, run = ws.store.runs.record(
                    ws.project.id,
                    "token_pipeline",
                    stack.id,
                    token_pipeline.compile(),
                    RunStart(name=name),
                )
                secret = token_secret_name(run.id)
                body = {"metadata": {"name": secret}, "stringData": {"token": "t"}}
                clients.core.create_namespaced_secret("default", body)
                args = OrchestratorArgs(
                    snapshot_id=snapshot.id,
                    run_id=run.id,
                    namespace="default",
                    job_name=f"orchestrator-{name}",  # never created here
                    settings_json="{}",
                    token_secret=secret,
                )
                return args, run

            def secrets() -> list[str]:
                return [
                    s.metadata.name for s in clients.core.list_namespaced_secret("default").items
                ]

            # A pod that fails before the run started leaves the token to the Job's next pod.
            early, _ = pod_of("early")
            with pytest.raises(InputError, match="does not exist"):
                run_orchestrator(early, environ)
            assert early.token_secret in secrets()

            # A pod that finds its run ended (the last pod of a Job) takes the token away.
            ended, run = pod_of("ended")
            ws.store.runs.finish(run.id, ExecutionStatus.FAILED, "ended elsewhere")
            assert run_orchestrator(ended, environ) == 1
            assert ended.token_secret not in secrets()

            # A pod restarted after an earlier one started the run ends it: no step runs twice.
            restarted, run = pod_of("restarted")
            start_run(ws.store, run, "kubernetes-earlier-pod")
            assert run_orchestrator(restarted, environ) == 1
            failed = ws.store.runs.get(run.id)
            assert failed.status is ExecutionStatus.FAILED
            assert "restarted mid-run" in (failed.status_reason or "")
            assert restarted.token_secret not in secrets()
        finally:
            clients.close()
            ws.close()
