"""Every manifest Wharf sends to a cluster, checked against the upstream Kubernetes OpenAPI
schemas: kubernetes-validate's strict ones (an unknown or misspelt field is an error) of the
oldest Kubernetes Wharf supports and the newest the package ships (``SCHEMA_VERSIONS``).

The manifests come from the real builders (``step_job_for``, ``orchestrator_job_for``,
``cron_job_for``, ``credentials_secret``, ``run_token_secret``, allocation's
``allocated_settings``, the step backend's ``StepEnvSecret``), once with default settings and
once with every setting set. The test bed's emulator (``test_manifests*``) checks what a server
does with them, but only for the fields it implements; this check is independent of it. The one
exemption, :func:`_schema_gap`, is a field the 1.26.0 schema gets wrong.
"""

from __future__ import annotations

import re
from typing import Any

import kubernetes_validate
import pytest

from tests.integrations.kubernetes.manifest_checks import (
    OLDEST_SUPPORTED,
    SCHEMA_VERSIONS,
    schema_errors,
)
from tests.integrations.kubernetes.test_allocation import CPU_2, GPU_2, MEM_1GIB, _allocation
from tests.integrations.kubernetes.test_allocation import _request as _allocation_request
from tests.integrations.kubernetes.test_manifests import FULL_POD, OWNER_JOB
from wharf.integrations.kubernetes.allocation import allocated_settings
from wharf.integrations.kubernetes.labels import run_annotations, run_labels
from wharf.integrations.kubernetes.manifests import (
    ORCHESTRATOR_COMMAND,
    credentials_secret,
    cron_job_for,
    orchestrator_job_for,
    owner_reference,
    run_token_secret,
    step_job_for,
)
from wharf.integrations.kubernetes.settings import (
    KubernetesOrchestratorSettings,
    KubernetesPodSettings,
    KubernetesStepOperatorSettings,
)
from wharf.integrations.kubernetes.step_backend_secret import StepEnvSecret

RUN_ID = "0f3c2a1e-5b7d-4c9a-8e21-3d4f5a6b7c8d"
STEP_RUN_ID = "7a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
TOKEN_SECRET = "wharf-run-env-0f3c2a1e5b7d"
SECRET_ENV = {"WHARF_TOKEN": (TOKEN_SECRET, "token"), "WHARF_STORE_URL": (TOKEN_SECRET, "url")}
ORCHESTRATOR_ARGS = ["--snapshot-id", "s1", "--run-id", RUN_ID, "--namespace", "ml"]

POD = FULL_POD.model_copy(
    update={
        "env": [
            *FULL_POD.env,
            {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            {
                "name": "MEM_LIMIT",
                "valueFrom": {
                    "resourceFieldRef": {
                        "containerName": "main",
                        "resource": "limits.memory",
                        "divisor": "1Mi",
                    }
                },
            },
            {
                "name": "LEVEL",
                "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "level", "optional": True}},
            },
            {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}},
        ],
        "env_from": [*FULL_POD.env_from, {"secretRef": {"name": "more-env"}, "prefix": "X_"}],
        "volumes": [
            *FULL_POD.volumes,
            {"name": "scratch", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}},
            {"name": "cfg", "configMap": {"name": "cfg", "items": [{"key": "a", "path": "a"}]}},
            {"name": "creds", "secret": {"secretName": "creds", "defaultMode": 0o400}},
            {"name": "ckpt", "persistentVolumeClaim": {"claimName": "ckpt", "readOnly": False}},
        ],
        "volume_mounts": [
            *FULL_POD.volume_mounts,
            {"name": "scratch", "mountPath": "/scratch"},
            {"name": "cfg", "mountPath": "/etc/cfg", "readOnly": True},
            {"name": "creds", "mountPath": "/etc/creds/key", "subPath": "key"},
            {"name": "ckpt", "mountPath": "/ckpt"},
        ],
        "image_pull_secrets": ["regcred", "mirror"],
    },
    deep=True,
)
"""The manifest tests' full pod settings, with every kind of env and volume entry."""
ORCHESTRATOR_POD = KubernetesPodSettings(
    node_selectors={"pool": "system"},
    tolerations=[{"key": "system", "operator": "Equal", "value": "yes", "effect": "NoExecute"}],
    resources={"limits": {"memory": "1Gi"}},
    annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"},
    labels={"tier": "orchestrator"},
    service_account_name="orch-pod-sa",
)
FAILURE_POLICY = {
    "rules": [
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
        {
            "action": "FailJob",
            "onExitCodes": {"containerName": "main", "operator": "In", "values": [42]},
        },
        {"action": "Count", "onExitCodes": {"operator": "NotIn", "values": [0]}},
    ]
}
FULL = KubernetesOrchestratorSettings(
    namespace="ml",
    image="registry.example.com/wharf:1.2",
    image_pull_policy="Always",
    service_account_name="wharf-orchestrator",
    step_pod_service_account_name="wharf-step",
    privileged=True,
    pod_settings=POD,
    orchestrator_pod_settings=ORCHESTRATOR_POD,
    job_name_prefix="nightly",
    backoff_limit_margin=2,
    ttl_seconds_after_finished=3600,
    active_deadline_seconds=86400,
    pod_failure_policy=FAILURE_POLICY,
    pod_stop_grace_period=120,
    orchestrator_job_backoff_limit=5,
    successful_jobs_history_limit=2,
    failed_jobs_history_limit=4,
    concurrency_policy="Forbid",
    starting_deadline_seconds=300,
)
"""Orchestrator settings with every field that reaches a manifest set to a non-default value."""
CONTROLLER_REFERENCE = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "name": "wharf-train-0f3c2a1e5b",
    "uid": "1b2c-uid",
    "controller": True,
    "blockOwnerDeletion": True,
}
ALLOCATION = _allocation_request(
    _allocation(
        0,
        GPU_2,
        {
            "node_selectors": {"accelerator": "h200"},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
            "image": "registry.example.com/cuda:12",
        },
    ),
    _allocation(1, CPU_2, {"pod_settings": {"labels": {"pool": "gpu"}}}),
    _allocation(2, MEM_1GIB),
)


def _step_job(
    settings: KubernetesOrchestratorSettings | KubernetesStepOperatorSettings, **extra: Any
) -> dict[str, Any]:
    return step_job_for(
        settings,
        name="wharf-train-0f3c2a1e5b-train-1",
        image="wharf/python:3.11",
        command=["python", "-m", "wharf.execution.entrypoint", STEP_RUN_ID],
        env={"WHARF_STEP": "train", "WHARF_STOP_GRACE": "30"},
        secret_env=SECRET_ENV,
        labels=run_labels("train", RUN_ID, "nightly", "train"),
        annotations=run_annotations("train", RUN_ID, "nightly", "train"),
        **extra,
    )


def _orchestrator_job(settings: KubernetesOrchestratorSettings, **extra: Any) -> dict[str, Any]:
    return orchestrator_job_for(
        settings,
        name="wharf-train-0f3c2a1e5b",
        image="wharf/python:3.11",
        args=ORCHESTRATOR_ARGS,
        labels=run_labels("train", RUN_ID, "nightly"),
        annotations=run_annotations("train", RUN_ID, "nightly"),
        **extra,
    )


class _RecordingCoreApi:
    """Stands in for the Kubernetes client's ``CoreV1Api``: keeps the Secrets it is asked to
    create."""

    def __init__(self) -> None:
        self.created: list[dict[str, Any]] = []

    def create_namespaced_secret(self, namespace: str, body: dict[str, Any]) -> None:
        self.created.append(body)


def _step_env_secret(owner: dict[str, Any] | None) -> dict[str, Any]:
    """The Secret a step backend creates for its steps' credentials."""
    core = _RecordingCoreApi()
    secret = StepEnvSecret(
        core,  # type: ignore[arg-type]
        "ml",
        "wharf-step-env-1a2b",
        labels=run_labels("train", RUN_ID, "nightly"),
        owner_references=[owner_reference(owner)] if owner is not None else None,
    )
    secret.split({"WHARF_API_KEY": "token", "WHARF_STORE_URL": "postgresql://u:p@db/wharf"})
    (body,) = core.created
    return body


def _defaults() -> dict[str, dict[str, Any]]:
    settings = KubernetesOrchestratorSettings()
    job = _orchestrator_job(settings)
    return {
        "step-job": _step_job(settings, max_retries=None),
        "step-operator-job": _step_job(KubernetesStepOperatorSettings(), max_retries=None),
        "orchestrator-job": job,
        "cron-job": cron_job_for(settings, name="wharf-train-nightly", schedule="@daily", job=job),
        "credentials-secret": credentials_secret(
            name=TOKEN_SECRET, namespace="default", data={"token": "t"}, labels={}
        ),
        "run-token-secret": run_token_secret(
            name=TOKEN_SECRET, namespace="default", token="t", labels={}
        ),
        "step-env-secret": _step_env_secret(None),
    }


def _every_setting() -> dict[str, dict[str, Any]]:
    job = _orchestrator_job(
        FULL,
        env={"WHARF_LOGGING_VERBOSITY": "DEBUG"},
        secret_env=SECRET_ENV,
        fail_job_exit_codes=[1, 3],
    )
    labels = run_labels("train", RUN_ID, "nightly")
    annotations = run_annotations("train", RUN_ID, "nightly")
    operator = KubernetesStepOperatorSettings(
        **FULL.model_dump(include=set(KubernetesStepOperatorSettings.model_fields))
    )
    return {
        "step-job": _step_job(
            FULL,
            max_retries=3,
            owner=OWNER_JOB,
            owner_references=[CONTROLLER_REFERENCE],
            args=["--verbose"],
        ),
        "step-job-allocated": _step_job(
            allocated_settings(FULL, ALLOCATION), max_retries=0, owner=OWNER_JOB
        ),
        "step-operator-job": _step_job(operator, max_retries=1, owner=CONTROLLER_REFERENCE),
        "step-operator-job-allocated": _step_job(
            allocated_settings(operator, ALLOCATION), max_retries=1
        ),
        "step-job-own-pod-settings": _step_job(
            FULL, max_retries=None, pod_settings=ORCHESTRATOR_POD
        ),
        "orchestrator-job": job,
        "cron-job": cron_job_for(
            FULL,
            name="nightly-train-daily",
            schedule="0 3 * * 1-5",
            job=job,
            suspend=True,
            time_zone="Europe/Paris",
        ),
        "credentials-secret": credentials_secret(
            name=TOKEN_SECRET,
            namespace="ml",
            data={"token": "t", "url": "https://wharf.example.com"},
            labels=labels,
            annotations=annotations,
            owner=OWNER_JOB,
        ),
        "credentials-secret-base64": credentials_secret(
            name=TOKEN_SECRET,
            namespace="ml",
            data={"token": "t"},
            labels=labels,
            annotations=annotations,
            base64_data=True,
            owner=CONTROLLER_REFERENCE,
        ),
        "run-token-secret": run_token_secret(
            name=TOKEN_SECRET,
            namespace="ml",
            token="t",
            labels=labels,
            annotations=annotations,
            key="run-token",
            base64_data=True,
            owner=OWNER_JOB,
        ),
        "step-env-secret": _step_env_secret(OWNER_JOB),
    }


MANIFESTS = {
    **{f"defaults/{name}": obj for name, obj in _defaults().items()},
    **{f"every-setting/{name}": obj for name, obj in _every_setting().items()},
}

_RULE_PATH = re.compile(r"(spec\.jobTemplate\.)?spec\.podFailurePolicy\.rules\.(\d+)")


def _schema_gap(obj: dict[str, Any], version: str, error: str) -> bool:
    """Errors of the package's schemas that a real server of that version does not make.

    1.26 (only): its OpenAPI marks a pod failure policy rule's ``onPodConditions`` required,
    though a rule takes one of ``onExitCodes`` and ``onPodConditions`` and the API server's
    validation refuses both (kubernetes/kubernetes#120204, "Mark Job onPodConditions as
    optional", cherry-picked to release-1.26 in #120210; the package ships 1.26.0's schema).
    Exempt only a rule that has ``onExitCodes``: one with neither is still an error.
    """
    path, _, message = error.partition(": ")
    match = _RULE_PATH.fullmatch(path)
    if version != "1.26" or match is None or message != "'onPodConditions' is a required property":
        return False
    spec = obj["spec"]["jobTemplate"]["spec"] if match[1] else obj["spec"]
    return "onExitCodes" in spec["podFailurePolicy"]["rules"][int(match[2])]


def _real_errors(obj: dict[str, Any], version: str) -> list[str]:
    return [error for error in schema_errors(obj, version) if not _schema_gap(obj, version, error)]


@pytest.mark.parametrize("version", SCHEMA_VERSIONS)
@pytest.mark.parametrize("name", sorted(MANIFESTS))
def test_every_manifest_is_valid_for_the_upstream_schema(name: str, version: str) -> None:
    assert _real_errors(MANIFESTS[name], version) == []


def test_the_full_manifests_carry_every_setting() -> None:
    """The every-setting manifests hold what the test means to check (not silently dropped)."""
    step = MANIFESTS["every-setting/step-job"]
    pod = step["spec"]["template"]["spec"]
    main = pod["containers"][0]
    assert {"backoffLimit", "activeDeadlineSeconds", "ttlSecondsAfterFinished"} <= set(step["spec"])
    assert len(step["metadata"]["ownerReferences"]) == 2
    assert {"nodeSelector", "affinity", "tolerations", "volumes", "imagePullSecrets"} <= set(pod)
    assert pod["serviceAccountName"] == "pod-sa"
    assert {"env", "envFrom", "resources", "volumeMounts", "securityContext"} <= set(main)
    assert any("fieldRef" in entry.get("valueFrom", {}) for entry in main["env"])
    allocated = MANIFESTS["every-setting/step-job-allocated"]["spec"]["template"]["spec"]
    assert allocated["nodeSelector"]["accelerator"] == "h200"
    resources = allocated["containers"][0]["resources"]
    allocated_amounts = {"nvidia.com/gpu": "2", "cpu": "2", "memory": "1024Mi"}
    assert resources["requests"].items() >= allocated_amounts.items()
    assert resources["limits"].items() >= allocated_amounts.items()
    cron = MANIFESTS["every-setting/cron-job"]["spec"]
    assert {"timeZone", "concurrencyPolicy", "startingDeadlineSeconds"} <= set(cron)
    assert cron["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["command"] == list(
        ORCHESTRATOR_COMMAND
    )


@pytest.mark.parametrize("version", SCHEMA_VERSIONS)
def test_the_check_refuses_a_misspelt_field_as_the_package_does(version: str) -> None:
    job = _step_job(FULL, max_retries=None)
    job["spec"]["template"]["spec"]["nodeSelectors"] = {"pool": "gpu"}
    job["spec"]["template"]["spec"]["containers"][0]["resources"]["limit"] = {"cpu": "1"}
    assert _real_errors(job, version) == [
        "spec.template.spec: Additional properties are not allowed "
        "('nodeSelectors' was unexpected)",
        "spec.template.spec.containers.0.resources: Additional properties are not allowed "
        "('limit' was unexpected)",
    ]
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(job, version, strict=True)


def test_the_1_26_schema_gap_is_exempt_narrowly() -> None:
    """The default policy's exit-code rule is the gap's one error at 1.26 (when the package's
    1.26 schema is fixed, this fails: drop the exemption); a rule with neither requirement
    stays an error."""
    job = _step_job(KubernetesOrchestratorSettings(), max_retries=None)
    assert schema_errors(job, OLDEST_SUPPORTED) == [
        "spec.podFailurePolicy.rules.1: 'onPodConditions' is a required property"
    ]
    job["spec"]["podFailurePolicy"]["rules"].append({"action": "Count"})
    assert _real_errors(job, OLDEST_SUPPORTED) == [
        "spec.podFailurePolicy.rules.2: 'onPodConditions' is a required property"
    ]
