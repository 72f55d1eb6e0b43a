"""Step Job manifests (and what every Job shares: pod settings, env, owners): every setting lands
where the API reads it, and a server accepts them all. The orchestrator Job, the CronJob and the
run token Secret: ``test_manifests_orchestrator``."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integrations.kubernetes.manifest_checks import server_accepts
from tests.kube.emulator.errors import ApiError
from wharf.integrations.kubernetes.labels import run_annotations, run_labels
from wharf.integrations.kubernetes.manifests import (
    STEP_OPERATOR_JOB_TTL_SECONDS,
    JobSpec,
    default_pod_failure_policy,
    env_entries,
    owner_reference,
    step_backoff_limit,
    step_job,
    step_job_for,
)
from wharf.integrations.kubernetes.settings import (
    KubernetesOrchestratorSettings,
    KubernetesPodSettings,
    KubernetesStepOperatorSettings,
)

OWNER_JOB = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {"name": "wharf-1a2b-train", "namespace": "ml", "uid": "0c5e-uid"},
}
FULL_POD = KubernetesPodSettings(
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
    tolerations=[{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
    resources={"requests": {"cpu": "2", "memory": "4Gi"}, "limits": {"nvidia.com/gpu": "1"}},
    annotations={"team": "ml", "wharf.io/step": "user-value"},
    labels={"team": "ml", "wharf.io/pipeline": "user-value"},
    env=[{"name": "EXTRA", "value": "1"}, {"name": "WHARF_STEP", "value": "overridden"}],
    env_from=[{"configMapRef": {"name": "shared-env"}}],
    volumes=[{"name": "data", "emptyDir": {}}],
    volume_mounts=[{"name": "data", "mountPath": "/data"}],
    image_pull_secrets=["regcred"],
    service_account_name="pod-sa",
)


def _step(**overrides: Any) -> dict[str, Any]:
    arguments: dict[str, Any] = {
        "name": "wharf-1a2b-train-step",
        "namespace": "ml",
        "image": "wharf/python:3.11",
        "command": ["python", "-m", "wharf.execution.entrypoint", "sr-1"],
        "env": {"WHARF_STEP": "train"},
        "secret_env": {"WHARF_TOKEN": ("wharf-token-run", "token")},
        "labels": run_labels("train", "r1", "nightly", "train"),
        "annotations": run_annotations("train", "r1", "nightly", "train"),
        "pod_settings": None,
        "service_account_name": None,
        "backoff_limit": 2,
        "active_deadline_seconds": None,
        "ttl_seconds_after_finished": None,
        "pod_failure_policy": None,
        "grace_period_seconds": 30,
    }
    owner = overrides.pop("owner", None)
    owners = [*([owner] if owner is not None else []), *overrides.pop("owner_references", ())]
    arguments.update(overrides)
    return step_job(JobSpec(**arguments, owners=owners))


def _pod_spec(job: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = job["spec"]["template"]["spec"]
    return spec


def _main(job: dict[str, Any]) -> dict[str, Any]:
    container: dict[str, Any] = _pod_spec(job)["containers"][0]
    return container


def test_a_plain_step_job() -> None:
    job = _step()
    assert job["apiVersion"] == "batch/v1" and job["kind"] == "Job"
    assert job["metadata"]["name"] == "wharf-1a2b-train-step"
    assert job["metadata"]["labels"] == run_labels("train", "r1", "nightly", "train")
    assert job["metadata"]["annotations"]["wharf.io/run-name"] == "nightly"
    assert "ownerReferences" not in job["metadata"]
    assert job["spec"]["backoffLimit"] == 2
    assert job["spec"]["podFailurePolicy"] == default_pod_failure_policy()
    assert {"activeDeadlineSeconds", "ttlSecondsAfterFinished"}.isdisjoint(job["spec"])
    spec = _pod_spec(job)
    assert spec["restartPolicy"] == "Never"
    assert spec["terminationGracePeriodSeconds"] == 30
    assert job["spec"]["template"]["metadata"]["labels"] == job["metadata"]["labels"]
    assert _main(job) == {
        "name": "main",
        "image": "wharf/python:3.11",
        "command": ["python", "-m", "wharf.execution.entrypoint", "sr-1"],
        "env": [
            {"name": "WHARF_STEP", "value": "train"},
            {
                "name": "WHARF_TOKEN",
                "valueFrom": {"secretKeyRef": {"name": "wharf-token-run", "key": "token"}},
            },
        ],
    }
    stored = server_accepts(job)
    assert stored["spec"]["template"]["metadata"]["labels"]["job-name"] == job["metadata"]["name"]


def test_the_default_failure_policy_ignores_disruptions_first_and_counts_main_failures() -> None:
    assert default_pod_failure_policy() == {
        "rules": [
            {
                "action": "Ignore",
                "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
            },
            {
                "action": "Count",
                "onExitCodes": {"containerName": "main", "operator": "NotIn", "values": [0]},
            },
        ]
    }
    rules = default_pod_failure_policy([45, 0, 45])["rules"]
    assert rules[1] == {
        "action": "FailJob",
        "onExitCodes": {"containerName": "main", "operator": "In", "values": [45]},
    }
    assert [rule["action"] for rule in rules] == ["Ignore", "FailJob", "Count"]


@pytest.mark.parametrize(
    ("overrides", "path", "expected"),
    [
        ({"backoff_limit": 0}, ("spec", "backoffLimit"), 0),
        ({"active_deadline_seconds": 600}, ("spec", "activeDeadlineSeconds"), 600),
        ({"ttl_seconds_after_finished": 0}, ("spec", "ttlSecondsAfterFinished"), 0),
        ({"ttl_seconds_after_finished": 3600}, ("spec", "ttlSecondsAfterFinished"), 3600),
        (
            {
                "pod_failure_policy": {
                    "rules": [
                        {
                            "action": "Ignore",
                            "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
                        }
                    ]
                }
            },
            ("spec", "podFailurePolicy", "rules", 0, "action"),
            "Ignore",
        ),
        (
            {"grace_period_seconds": 5},
            ("spec", "template", "spec", "terminationGracePeriodSeconds"),
            5,
        ),
        (
            {"grace_period_seconds": 0},
            ("spec", "template", "spec", "terminationGracePeriodSeconds"),
            0,
        ),
        (
            {"service_account_name": "steps"},
            ("spec", "template", "spec", "serviceAccountName"),
            "steps",
        ),
        (
            {"image_pull_policy": "Always"},
            ("spec", "template", "spec", "containers", 0, "imagePullPolicy"),
            "Always",
        ),
        (
            {"privileged": True},
            ("spec", "template", "spec", "containers", 0, "securityContext"),
            {"privileged": True},
        ),
        (
            {"args": ["--x", "1"]},
            ("spec", "template", "spec", "containers", 0, "args"),
            ["--x", "1"],
        ),
        (
            {"owner": OWNER_JOB},
            ("metadata", "ownerReferences"),
            [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": "wharf-1a2b-train",
                    "uid": "0c5e-uid",
                    "controller": False,
                    "blockOwnerDeletion": True,
                }
            ],
        ),
    ],
)
def test_step_job_arguments(
    overrides: dict[str, Any], path: tuple[Any, ...], expected: Any
) -> None:
    job = _step(**overrides)
    value: Any = job
    for part in path:
        value = value[part]
    assert value == expected
    server_accepts(job)


@pytest.mark.parametrize(
    ("field", "path", "expected"),
    [
        ("node_selectors", ("nodeSelector",), {"accelerator": "h200"}),
        ("affinity", ("affinity",), FULL_POD.affinity),
        ("tolerations", ("tolerations",), FULL_POD.tolerations),
        ("volumes", ("volumes",), [{"name": "data", "emptyDir": {}}]),
        ("image_pull_secrets", ("imagePullSecrets",), [{"name": "regcred"}]),
        ("service_account_name", ("serviceAccountName",), "pod-sa"),
        ("resources", ("containers", 0, "resources"), FULL_POD.resources),
        (
            "volume_mounts",
            ("containers", 0, "volumeMounts"),
            [{"name": "data", "mountPath": "/data"}],
        ),
        ("env_from", ("containers", 0, "envFrom"), [{"configMapRef": {"name": "shared-env"}}]),
    ],
)
def test_every_pod_setting_reaches_the_pod(
    field: str, path: tuple[Any, ...], expected: Any
) -> None:
    pod = KubernetesPodSettings.model_validate({field: getattr(FULL_POD, field)})
    if field == "volume_mounts":  # a mount needs its volume
        pod = pod.model_copy(update={"volumes": FULL_POD.volumes})
    job = _step(pod_settings=pod, service_account_name="fallback-sa")
    value: Any = _pod_spec(job)
    for part in path:
        value = value[part]
    assert value == expected
    server_accepts(job)


def test_wharf_labels_annotations_and_env_win_over_pod_settings() -> None:
    job = _step(pod_settings=FULL_POD)
    template = job["spec"]["template"]["metadata"]
    assert template["labels"] == {"team": "ml", **run_labels("train", "r1", "nightly", "train")}
    assert template["annotations"]["wharf.io/step"] == "train"
    assert template["annotations"]["team"] == "ml"
    names = [entry["name"] for entry in _main(job)["env"]]
    assert names == ["EXTRA", "WHARF_STEP", "WHARF_TOKEN"]
    assert _main(job)["env"][1] == {"name": "WHARF_STEP", "value": "train"}
    assert job["metadata"]["labels"] == run_labels("train", "r1", "nightly", "train")
    server_accepts(job)


def test_builders_share_nothing_with_their_inputs() -> None:
    pod = FULL_POD.model_copy(deep=True)
    job = _step(pod_settings=pod)
    _pod_spec(job)["tolerations"][0]["key"] = "changed"
    _main(job)["resources"]["requests"]["cpu"] = "99"
    assert pod == FULL_POD


def test_env_entries_literal_then_secret_and_a_literal_wins_over_a_secret() -> None:
    entries = env_entries(
        {"A": "1"}, {"A": ("s", "k"), "B": ("s", "k")}, [{"name": "C", "value": "x"}]
    )
    assert entries == [
        {"name": "C", "value": "x"},
        {"name": "A", "value": "1"},
        {"name": "B", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
    ]


def test_owner_reference_from_a_reference_and_refused_without_a_uid() -> None:
    reference = {"apiVersion": "batch/v1", "kind": "Job", "name": "o", "uid": "u"}
    assert owner_reference(reference) == {
        **reference,
        "controller": False,
        "blockOwnerDeletion": True,
    }
    with pytest.raises(ValueError, match="uid"):
        owner_reference({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "o"}})


def test_a_job_name_longer_than_a_label_value_is_refused() -> None:
    with pytest.raises(ValueError, match="longer than 63"):
        _step(name="a" * 64)


def test_a_server_refuses_what_the_builder_is_given_wrong() -> None:
    # The check is real: a bad name reaches the server's validation and is refused there.
    with pytest.raises(ApiError, match=r"metadata\.name"):
        server_accepts(_step(name="Not_A_Name"))


@pytest.mark.parametrize(
    ("retries", "margin", "expected"), [(None, 0, 0), (2, 0, 2), (2, 3, 5), (0, 1, 1)]
)
def test_step_backoff_limit_is_retries_plus_margin(
    retries: int | None, margin: int, expected: int
) -> None:
    assert step_backoff_limit(retries, margin) == expected


# ----------------------------------------------------------------------------- from settings


def test_step_job_for_reads_every_setting() -> None:
    settings = KubernetesOrchestratorSettings(
        namespace="ml",
        image_pull_policy="IfNotPresent",
        service_account_name="orchestrator-sa",
        step_pod_service_account_name="step-sa",
        privileged=True,
        pod_settings=KubernetesPodSettings(node_selectors={"pool": "cpu"}),
        backoff_limit_margin=1,
        ttl_seconds_after_finished=60,
        active_deadline_seconds=900,
        pod_failure_policy={
            "rules": [{"action": "Count", "onExitCodes": {"operator": "In", "values": [1]}}]
        },
        pod_stop_grace_period=12,
    )
    job = step_job_for(
        settings,
        name="s",
        image="img:1",
        command=["python"],
        env={},
        secret_env={},
        labels={},
        annotations={},
        max_retries=2,
        owner=OWNER_JOB,
    )
    spec = _pod_spec(job)
    assert job["metadata"]["namespace"] == "ml"
    assert job["spec"]["backoffLimit"] == 3
    assert job["spec"]["ttlSecondsAfterFinished"] == 60
    assert job["spec"]["activeDeadlineSeconds"] == 900
    assert job["spec"]["podFailurePolicy"] == settings.pod_failure_policy
    assert spec["terminationGracePeriodSeconds"] == 12
    assert spec["serviceAccountName"] == "step-sa"
    assert spec["nodeSelector"] == {"pool": "cpu"}
    assert _main(job)["imagePullPolicy"] == "IfNotPresent"
    assert _main(job)["securityContext"] == {"privileged": True}
    assert job["metadata"]["ownerReferences"][0]["name"] == "wharf-1a2b-train"
    server_accepts(job)
    fallback = step_job_for(
        settings.merged({"step_pod_service_account_name": None}),
        name="s",
        image="img:1",
        command=["python"],
        env={},
        secret_env={},
        labels={},
        annotations={},
        max_retries=None,
        pod_settings=KubernetesPodSettings(node_selectors={"pool": "gpu"}),
    )
    assert _pod_spec(fallback)["serviceAccountName"] == "orchestrator-sa"
    assert _pod_spec(fallback)["nodeSelector"] == {"pool": "gpu"}
    assert fallback["spec"]["backoffLimit"] == 1


def test_step_job_for_a_step_operator_uses_its_service_account_and_image() -> None:
    settings = KubernetesStepOperatorSettings(service_account_name="gpu-sa", image="cuda:12")
    job = step_job_for(
        settings,
        name="s",
        image="img:1",
        command=["python"],
        env={},
        secret_env={},
        labels={},
        annotations={},
        max_retries=0,
    )
    assert _pod_spec(job)["serviceAccountName"] == "gpu-sa"
    assert _main(job)["image"] == "cuda:12"
    server_accepts(job)


@pytest.mark.parametrize(
    ("settings", "ttl"),
    [
        (KubernetesStepOperatorSettings(), STEP_OPERATOR_JOB_TTL_SECONDS),
        (KubernetesStepOperatorSettings(ttl_seconds_after_finished=1), 1),
        (KubernetesStepOperatorSettings(ttl_seconds_after_finished=0), 0),
        (KubernetesOrchestratorSettings(), None),
        (KubernetesOrchestratorSettings(ttl_seconds_after_finished=60), 60),
    ],
)
def test_a_step_operator_job_is_deleted_a_day_after_it_finished_unless_its_settings_say(
    settings: KubernetesOrchestratorSettings | KubernetesStepOperatorSettings, ttl: int | None
) -> None:
    """The step operator's process deletes its Jobs at cleanup; the default TTL only removes
    those of a process that died first. The orchestrator's step Jobs (owned by its Job) get
    none unless set."""
    assert STEP_OPERATOR_JOB_TTL_SECONDS == 86400
    job = step_job_for(
        settings,
        name="s",
        image="img:1",
        command=["python"],
        env={},
        secret_env={},
        labels={},
        annotations={},
        max_retries=0,
    )
    assert job["spec"].get("ttlSecondsAfterFinished") == ttl
    server_accepts(job)


def test_more_owner_references_become_non_controller_references_once_per_uid() -> None:
    controller = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": "wharf-1a2b-train",
        "uid": "0c5e-uid",
        "controller": True,
        "blockOwnerDeletion": True,
    }
    other = {"apiVersion": "v1", "kind": "ConfigMap", "name": "state", "uid": "cm-uid"}
    job = _step(owner=OWNER_JOB, owner_references=[controller, other])
    references = job["metadata"]["ownerReferences"]
    assert [ref["uid"] for ref in references] == ["0c5e-uid", "cm-uid"]
    assert all(ref["controller"] is False and ref["blockOwnerDeletion"] for ref in references)
    server_accepts(job)
