"""The orchestrator Job, the schedule's CronJob and the run token Secret: every setting lands
where the API reads it, the CronJob's template is exactly the orchestrator Job, and a server
accepts them all. Step Jobs and what every Job shares: ``test_manifests``."""

from __future__ import annotations

import base64
import copy
from typing import Any

import pytest

from tests.integrations.kubernetes.manifest_checks import server_accepts
from wharf.core.errors import InputError
from wharf.integrations.kubernetes.labels import resource_name, run_annotations, run_labels
from wharf.integrations.kubernetes.manifests import (
    ORCHESTRATOR_COMMAND,
    CronJobSpec,
    JobSpec,
    cron_job,
    cron_job_for,
    orchestrator_job,
    orchestrator_job_for,
    run_token_secret,
)
from wharf.integrations.kubernetes.settings import (
    KubernetesOrchestratorSettings,
    KubernetesPodSettings,
)

OWNER_JOB = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {"name": "wharf-1a2b-train", "namespace": "ml", "uid": "0c5e-uid"},
}


def _pod_spec(job: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = job["spec"]["template"]["spec"]
    return spec


def _main(job: dict[str, Any]) -> dict[str, Any]:
    container: dict[str, Any] = _pod_spec(job)["containers"][0]
    return container


def _orchestrator(**overrides: Any) -> dict[str, Any]:
    arguments: dict[str, Any] = {
        "name": "wharf-1a2b-train",
        "namespace": "ml",
        "image": "wharf/python:3.11",
        "args": ["--snapshot-id", "s1", "--run-id", "r1"],
        "labels": run_labels("train", "r1", "nightly"),
        "annotations": run_annotations("train", "r1", "nightly"),
        "pod_settings": None,
        "service_account_name": "wharf-orchestrator",
        "backoff_limit": 3,
        "active_deadline_seconds": None,
        "ttl_seconds_after_finished": None,
        "pod_failure_policy": None,
        "grace_period_seconds": 30,
        "command": ORCHESTRATOR_COMMAND,
    }
    arguments.update(overrides)
    return orchestrator_job(JobSpec(**arguments))


def test_the_orchestrator_job_runs_the_entry_point_with_default_requests() -> None:
    job = _orchestrator()
    main = _main(job)
    assert main["command"] == list(ORCHESTRATOR_COMMAND)
    assert main["command"][-1] == "wharf.integrations.kubernetes.orchestrator_main"
    assert main["args"] == ["--snapshot-id", "s1", "--run-id", "r1"]
    assert main["resources"] == {"requests": {"memory": "400Mi", "cpu": "100m"}}
    assert job["spec"]["backoffLimit"] == 3
    assert _pod_spec(job)["serviceAccountName"] == "wharf-orchestrator"
    assert job["metadata"]["labels"] == run_labels("train", "r1", "nightly")
    assert "ownerReferences" not in job["metadata"]
    server_accepts(job)


def test_orchestrator_pod_settings_keep_the_users_requests() -> None:
    pod = KubernetesPodSettings(resources={"requests": {"memory": "1Gi"}, "limits": {"cpu": "50m"}})
    job = _orchestrator(pod_settings=pod, fail_job_exit_codes=[45], env={"A": "1"})
    assert _main(job)["resources"] == {"requests": {"memory": "1Gi"}, "limits": {"cpu": "50m"}}
    assert [rule["action"] for rule in job["spec"]["podFailurePolicy"]["rules"]] == [
        "Ignore",
        "FailJob",
        "Count",
    ]
    assert _main(job)["env"] == [{"name": "A", "value": "1"}]
    server_accepts(job)


def test_the_orchestrator_job_of_a_scheduled_run_has_only_the_pipeline_label() -> None:
    job = _orchestrator(labels=run_labels("train"), annotations=run_annotations("train"))
    assert job["metadata"]["labels"] == {"wharf.io/pipeline": "train"}
    assert job["spec"]["template"]["metadata"]["labels"] == {"wharf.io/pipeline": "train"}


def test_cron_job_template_is_exactly_the_orchestrator_job() -> None:
    job = _orchestrator(labels=run_labels("train"), annotations=run_annotations("train"))
    name = resource_name("wharf", "nightly", "train" * 20, max_length=52)
    cron = cron_job(
        CronJobSpec(
            name=name,
            schedule="0 3 * * *",
            job=job,
            successful_jobs_history_limit=2,
            failed_jobs_history_limit=5,
            concurrency_policy="Forbid",
            starting_deadline_seconds=120,
        )
    )
    assert cron["apiVersion"] == "batch/v1" and cron["kind"] == "CronJob"
    assert cron["metadata"] == {
        "name": name,
        "namespace": "ml",
        "labels": job["metadata"]["labels"],
        "annotations": job["metadata"]["annotations"],
    }
    assert cron["spec"]["jobTemplate"] == {
        "metadata": {
            "labels": job["metadata"]["labels"],
            "annotations": job["metadata"]["annotations"],
        },
        "spec": job["spec"],
    }
    assert cron["spec"] | {"jobTemplate": None} == {
        "schedule": "0 3 * * *",
        "suspend": False,
        "concurrencyPolicy": "Forbid",
        "startingDeadlineSeconds": 120,
        "successfulJobsHistoryLimit": 2,
        "failedJobsHistoryLimit": 5,
        "jobTemplate": None,
    }
    original = copy.deepcopy(job)
    cron["spec"]["jobTemplate"]["spec"]["backoffLimit"] = 99
    assert job == original
    server_accepts(cron)


def test_cron_job_defaults_are_the_servers() -> None:
    cron = cron_job(CronJobSpec(name="c", schedule="@daily", job=_orchestrator(), suspend=True))
    assert cron["spec"]["suspend"] is True
    assert {"concurrencyPolicy", "successfulJobsHistoryLimit"}.isdisjoint(cron["spec"])
    stored = server_accepts(cron)
    assert stored["spec"]["concurrencyPolicy"] == "Allow"


@pytest.mark.parametrize(
    ("schedule", "message"),
    [
        ("0 3 * *", "five fields"),
        ("*/5 * * * * *", "five fields"),
        ("TZ=Europe/Paris 0 3 * * *", "TZ="),
        ("CRON_TZ=UTC 0 3 * * *", "TZ="),
        ("every day", "five fields"),
    ],
)
def test_cron_job_refuses_schedules_kubernetes_does_not_take(schedule: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        cron_job(CronJobSpec(name="c", schedule=schedule, job=_orchestrator()))


def test_cron_job_names_are_at_most_52_characters() -> None:
    with pytest.raises(ValueError, match="longer than 52"):
        cron_job(CronJobSpec(name="a" * 53, schedule="0 3 * * *", job=_orchestrator()))
    server_accepts(cron_job(CronJobSpec(name="a" * 52, schedule="0 3 * * *", job=_orchestrator())))


@pytest.mark.parametrize("base64_data", [False, True])
def test_run_token_secret(base64_data: bool) -> None:
    secret = run_token_secret(
        name="wharf-token-r1",
        namespace="ml",
        token="tok-123",
        labels=run_labels("train", "r1"),
        base64_data=base64_data,
        owner=OWNER_JOB,
    )
    assert secret["type"] == "Opaque"
    assert secret["metadata"]["labels"] == run_labels("train", "r1")
    assert secret["metadata"]["ownerReferences"][0]["uid"] == "0c5e-uid"
    if base64_data:
        assert secret["data"] == {"token": base64.b64encode(b"tok-123").decode()}
    else:
        assert secret["stringData"] == {"token": "tok-123"}
    stored = server_accepts(secret)
    assert base64.b64decode(stored["data"]["token"]) == b"tok-123"


def test_orchestrator_and_cron_job_for_read_every_setting() -> None:
    settings = KubernetesOrchestratorSettings(
        namespace="ml",
        service_account_name="orchestrator-sa",
        step_pod_service_account_name="step-sa",
        orchestrator_pod_settings=KubernetesPodSettings(
            tolerations=[{"key": "a", "operator": "Exists"}]
        ),
        pod_settings=KubernetesPodSettings(node_selectors={"pool": "gpu"}),
        orchestrator_job_backoff_limit=1,
        ttl_seconds_after_finished=30,
        pod_stop_grace_period=7,
        successful_jobs_history_limit=1,
        failed_jobs_history_limit=0,
        concurrency_policy="Replace",
        starting_deadline_seconds=30,
    )
    job = orchestrator_job_for(
        settings,
        name="o",
        image="img:1",
        args=["--snapshot-id", "s1"],
        labels=run_labels("train"),
        annotations={},
        secret_env={"WHARF_TOKEN": ("wharf-token-s1", "token")},
    )
    spec = _pod_spec(job)
    assert job["spec"]["backoffLimit"] == 1
    assert job["spec"]["ttlSecondsAfterFinished"] == 30
    assert spec["serviceAccountName"] == "orchestrator-sa"
    assert spec["tolerations"] == [{"key": "a", "operator": "Exists"}]
    assert "nodeSelector" not in spec  # step pod settings are not the orchestrator's
    assert spec["terminationGracePeriodSeconds"] == 7
    assert _main(job)["resources"] == {"requests": {"memory": "400Mi", "cpu": "100m"}}
    server_accepts(job)
    cron = cron_job_for(
        settings, name="nightly", schedule="0 3 * * *", job=job, time_zone="Europe/Paris"
    )
    assert cron["spec"]["timeZone"] == "Europe/Paris"
    assert cron["metadata"]["namespace"] == "ml"
    assert cron["spec"]["concurrencyPolicy"] == "Replace"
    assert cron["spec"]["successfulJobsHistoryLimit"] == 1
    assert cron["spec"]["failedJobsHistoryLimit"] == 0
    assert cron["spec"]["startingDeadlineSeconds"] == 30
    assert cron["spec"]["jobTemplate"]["spec"] == job["spec"]
    server_accepts(cron)
