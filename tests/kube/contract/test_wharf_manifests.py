"""Wharf's own manifests (``wharf.integrations.kubernetes.manifests``) on the server under test.

The orchestrator Job, a step Job owned by it, the run-token Secret and the schedule's CronJob,
built with every pod setting and with names and labels long and odd enough to need sanitising,
must be accepted as built — by the emulator and by a real kube-apiserver (where 1.20 takes the
CronJob as batch/v1beta1 and drops the Job's ``podFailurePolicy``, a newer field).
"""

from __future__ import annotations

import base64
from typing import Any

import pytest

from tests.kube.contract.conftest import Target
from wharf.integrations.kubernetes.labels import resource_name, run_annotations, run_labels
from wharf.integrations.kubernetes.manifests import (
    ORCHESTRATOR_COMMAND,
    CronJobSpec,
    JobSpec,
    cron_job,
    orchestrator_job,
    run_token_secret,
    step_job,
)
from wharf.integrations.kubernetes.settings import KubernetesPodSettings

PIPELINE = "Nightly Training: ResNet-50 / ImageNet (full fine-tune, " + "x" * 60 + ")"
RUN_ID = "0f8e2c8a-6a55-4d8e-9d61-3c1f7c1e2b4a"
RUN_NAME = f"{PIPELINE} run 2026-01-05T09:00:00"
STEP = "Evaluate_Model.on-Holdout_Set"

POD_SETTINGS = KubernetesPodSettings(
    node_selectors={"accelerator": "h200"},
    affinity={
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
                ]
            }
        }
    },
    tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    resources={"requests": {"cpu": "2", "memory": "4Gi"}, "limits": {"nvidia.com/gpu": "1"}},
    annotations={"team": "ml"},
    labels={"team": "ml"},
    env=[{"name": "EXTRA", "value": "1"}],
    env_from=[{"configMapRef": {"name": "shared-env"}}],
    volumes=[{"name": "data", "emptyDir": {}}],
    volume_mounts=[{"name": "data", "mountPath": "/data"}],
    image_pull_secrets=["regcred"],
    service_account_name="wharf-steps",
)


def _labels(step: str | None = None) -> dict[str, str]:
    return dict(run_labels(PIPELINE, RUN_ID, RUN_NAME, step))


def _annotations(step: str | None = None) -> dict[str, str]:
    return dict(run_annotations(PIPELINE, RUN_ID, RUN_NAME, step))


def _orchestrator_job(target: Target) -> dict[str, Any]:
    return orchestrator_job(
        JobSpec(
            name=resource_name("wharf", RUN_ID[:8], PIPELINE),
            namespace=target.namespace,
            image="registry.example.com/team/wharf:1.0",
            command=ORCHESTRATOR_COMMAND,
            args=["--run", RUN_ID],
            labels=_labels(),
            annotations=_annotations(),
            pod_settings=POD_SETTINGS,
            service_account_name="wharf-orchestrator",
            backoff_limit=3,
            active_deadline_seconds=3600,
            ttl_seconds_after_finished=600,
            pod_failure_policy=None,
            grace_period_seconds=30,
            env={"WHARF_RUN_ID": RUN_ID},
            secret_env={"WHARF_TOKEN": ("wharf-token-run", "token")},
        )
    )


def _created_job(target: Target, body: dict[str, Any]) -> dict[str, Any]:
    created: dict[str, Any] = target.raw(target.batch.create_namespaced_job, target.namespace, body)
    return created


def _assert_kept(target: Target, built: dict[str, Any], stored: dict[str, Any]) -> None:
    assert stored["metadata"]["labels"] == built["metadata"]["labels"]
    assert stored["metadata"]["annotations"] == built["metadata"]["annotations"]
    built_main = built["spec"]["template"]["spec"]["containers"][0]
    stored_main = stored["spec"]["template"]["spec"]["containers"][0]
    for key in ("name", "image", "command", "args", "env", "envFrom", "volumeMounts"):
        assert stored_main.get(key) == built_main.get(key), key
    _, minor = target.server_version()
    if target.is_emulator or minor >= 26:
        assert stored["spec"]["podFailurePolicy"] == built["spec"]["podFailurePolicy"]
    else:
        assert "podFailurePolicy" not in stored["spec"]


def test_the_orchestrator_job_is_accepted_as_built(target: Target) -> None:
    built = _orchestrator_job(target)
    stored = _created_job(target, built)
    _assert_kept(target, built, stored)
    pod_spec = stored["spec"]["template"]["spec"]
    assert pod_spec["nodeSelector"] == {"accelerator": "h200"}
    built_spec = built["spec"]["template"]["spec"]
    assert pod_spec["serviceAccountName"] == built_spec["serviceAccountName"]
    assert stored["spec"]["template"]["metadata"]["labels"]["job-name"] == built["metadata"]["name"]


def test_a_step_job_owned_by_the_orchestrator_job_is_accepted_as_built(target: Target) -> None:
    orchestrator = _created_job(target, _orchestrator_job(target))
    built = step_job(
        JobSpec(
            name=resource_name("wharf", RUN_ID[:8], STEP, PIPELINE),
            namespace=target.namespace,
            image="registry.example.com/team/wharf:1.0",
            command=["python", "-m", "wharf.execution.entrypoint", "sr-1"],
            env={"WHARF_STEP": STEP},
            secret_env={"WHARF_TOKEN": ("wharf-token-run", "token")},
            labels=_labels(STEP),
            annotations=_annotations(STEP),
            pod_settings=POD_SETTINGS,
            service_account_name=None,
            backoff_limit=2,
            active_deadline_seconds=None,
            ttl_seconds_after_finished=None,
            pod_failure_policy=None,
            grace_period_seconds=45,
            owners=[orchestrator],
        )
    )
    stored = _created_job(target, built)
    _assert_kept(target, built, stored)
    [owner] = stored["metadata"]["ownerReferences"]
    assert owner["uid"] == orchestrator["metadata"]["uid"] and owner["controller"] is False
    # a pod template is not defaulted as a pod is: requests do not take the limits here
    # (the Job's pods get them when they are created)
    resources = stored["spec"]["template"]["spec"]["containers"][0]["resources"]
    assert resources == built["spec"]["template"]["spec"]["containers"][0]["resources"]
    listed = target.batch.list_namespaced_job(
        target.namespace, label_selector=",".join(f"{k}={v}" for k, v in _labels(STEP).items())
    )
    assert [job.metadata.name for job in listed.items] == [built["metadata"]["name"]]


@pytest.mark.parametrize("base64_data", [False, True])
def test_the_run_token_secret_is_accepted_as_built(target: Target, base64_data: bool) -> None:
    built = run_token_secret(
        name="wharf-token-run",
        namespace=target.namespace,
        token="run-scoped-token",
        labels=_labels(),
        annotations=_annotations(),
        base64_data=base64_data,
    )
    stored = target.raw(target.core.create_namespaced_secret, target.namespace, built)
    assert stored["type"] == "Opaque"
    [value] = stored["data"].values()
    assert base64.b64decode(value) == b"run-scoped-token"


def test_the_schedules_cronjob_is_accepted_as_built(target: Target) -> None:
    built = cron_job(
        CronJobSpec(
            name=resource_name("wharf", PIPELINE, max_length=52),
            schedule="0 3 * * 1-5",
            job=_orchestrator_job(target),
            successful_jobs_history_limit=2,
            failed_jobs_history_limit=1,
            concurrency_policy="Forbid",
            starting_deadline_seconds=300,
        )
    )
    _, minor = target.server_version()
    if not target.is_emulator and minor < 21:
        built["apiVersion"] = "batch/v1beta1"
    path = f"/apis/{built['apiVersion']}/namespaces/{target.namespace}/cronjobs"
    status, stored = target.request("POST", path, built)
    assert status == 201, stored
    assert stored["metadata"]["labels"] == built["metadata"]["labels"]
    assert stored["spec"]["concurrencyPolicy"] == "Forbid"
    template = stored["spec"]["jobTemplate"]
    assert template["metadata"]["labels"] == built["spec"]["jobTemplate"]["metadata"]["labels"]
    main = template["spec"]["template"]["spec"]["containers"][0]
    assert main["args"] == ["--run", RUN_ID]
