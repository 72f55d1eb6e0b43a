"""The orchestrator pod's credentials never as plain values, without a cluster: the pod's
environment split, the run's Secret named whenever there is a credential, the orchestrator Job
and the schedule's CronJob reading every credential (``SECRET_ENV``) through ``secretKeyRef``,
and the schedule's Secret. End to end on the test bed: ``test_orchestrator_credentials_e2e``."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import pytest

from tests.integrations.kubernetes.manifest_checks import server_accepts
from wharf.config.global_config import API_KEY_ENV, SERVER_URL_ENV
from wharf.config.spec import PipelineSpec
from wharf.integrations.kubernetes.manifests import orchestrator_job_for
from wharf.integrations.kubernetes.orchestrator_launch import (
    OrchestratorArgs,
    pod_environment,
    token_secret_name,
)
from wharf.integrations.kubernetes.orchestrator_submit import with_run_secret
from wharf.integrations.kubernetes.schedules import (
    SCHEDULE_ID_KEY,
    schedule_cron_job,
    schedule_secret_name,
)
from wharf.integrations.kubernetes.settings import KubernetesOrchestratorSettings
from wharf.integrations.kubernetes.step_backend_secret import SECRET_ENV, STORE_URL_ENV
from wharf.store.models import ScheduleRecord, SnapshotRecord

PASSWORD = "pa55-w0rd-s3cr3t"
STORE_URL = f"postgresql://wharf:{PASSWORD}@db.internal:5432/wharf"
T0 = datetime(2026, 1, 5, tzinfo=UTC)
RUN_ID = UUID(int=42)
SETTINGS = KubernetesOrchestratorSettings(namespace="ml")


def _env(job: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The orchestrator container's env entries, by name."""
    pod = job["spec"]["template"]["spec"]
    return {entry["name"]: entry for entry in pod["containers"][0].get("env", [])}


def _args(token_secret: str | None = None) -> OrchestratorArgs:
    return OrchestratorArgs(UUID(int=1), RUN_ID, "ml", "wharf-nightly-0000", "{}", token_secret)


def test_every_credential_variable_leaves_the_plain_environment() -> None:
    environment = pod_environment(
        {
            STORE_URL_ENV: STORE_URL,
            API_KEY_ENV: "run-token",
            SERVER_URL_ENV: "https://wharf.example",
            "WHARF_HOME": "/home/me/.wharf",  # the submitter's own: not passed at all
            "WHARF_HEARTBEAT_INTERVAL": "15.0",
        }
    )
    assert set(environment.secrets) == set(SECRET_ENV)
    assert environment.env == {
        SERVER_URL_ENV: "https://wharf.example",
        "WHARF_HEARTBEAT_INTERVAL": "15.0",
    }
    assert environment.token == "run-token"
    assert environment.secret_data() == {"token": "run-token", "store-url": STORE_URL}
    assert environment.secret_env("s") == {
        API_KEY_ENV: ("s", "token"),
        STORE_URL_ENV: ("s", "store-url"),
    }


def test_the_run_gets_a_secret_whenever_its_pod_needs_a_credential() -> None:
    with_url = pod_environment({STORE_URL_ENV: STORE_URL})
    named = with_run_secret(_args(), with_url, RUN_ID)
    assert named.token_secret == token_secret_name(RUN_ID)
    assert with_run_secret(named, with_url, RUN_ID) == named  # already named: kept
    nothing = pod_environment({SERVER_URL_ENV: "https://wharf.example"})
    assert with_run_secret(_args(), nothing, RUN_ID).token_secret is None
    with pytest.raises(ValueError, match="no credential"):
        with_run_secret(_args("wharf-run-env-x"), nothing, RUN_ID)


def test_the_orchestrator_job_reads_the_store_url_from_the_runs_secret() -> None:
    environment = pod_environment({STORE_URL_ENV: STORE_URL, "WHARF_HEARTBEAT_INTERVAL": "2"})
    secret = token_secret_name(RUN_ID)
    job = orchestrator_job_for(
        SETTINGS,
        name="wharf-nightly-0000",
        image="img:1",
        args=[],
        labels={},
        annotations={},
        env=environment.env,
        secret_env=environment.secret_env(secret),
    )
    env = _env(job)
    assert env[STORE_URL_ENV] == {
        "name": STORE_URL_ENV,
        "valueFrom": {"secretKeyRef": {"name": secret, "key": "store-url"}},
    }
    assert env["WHARF_HEARTBEAT_INTERVAL"] == {"name": "WHARF_HEARTBEAT_INTERVAL", "value": "2"}
    assert PASSWORD not in json.dumps(job)
    server_accepts(job)


def _schedule(active: bool = True) -> ScheduleRecord:
    return ScheduleRecord(
        id=UUID(int=7 << 100),
        project_id=UUID(int=2),
        pipeline_id=UUID(int=3),
        snapshot_id=UUID(int=4),
        name="every-five",
        cron_expression="*/5 * * * *",
        interval_seconds=None,
        run_once_start_time=None,
        start_time=None,
        end_time=None,
        catchup=False,
        active=active,
        created=T0,
    )


def _snapshot() -> SnapshotRecord:
    return SnapshotRecord(
        id=UUID(int=4),
        project_id=UUID(int=2),
        pipeline_id=UUID(int=3),
        stack_id=None,
        spec=PipelineSpec(name="nightly", source="flows:nightly"),
        created=T0,
    )


def test_a_schedules_cronjob_reads_the_store_url_from_the_schedules_secret() -> None:
    schedule = _schedule()
    environment = pod_environment({STORE_URL_ENV: STORE_URL})
    objects = schedule_cron_job(
        SETTINGS, _snapshot(), schedule, image="img:1", environment=environment
    )
    cron, secret = objects.cron_job, objects.secret
    assert secret is not None
    name = cron["metadata"]["name"]
    assert secret["metadata"]["name"] == schedule_secret_name(name) == f"{name}-env"
    assert secret["metadata"]["namespace"] == "ml"
    assert secret["metadata"]["labels"][SCHEDULE_ID_KEY] == str(schedule.id)  # found by it
    assert secret["stringData"] == {"store-url": STORE_URL}
    template = cron["spec"]["jobTemplate"]
    assert _env(template)[STORE_URL_ENV]["valueFrom"] == {
        "secretKeyRef": {"name": f"{name}-env", "key": "store-url"}
    }
    assert PASSWORD not in json.dumps(cron)
    server_accepts(cron)
    server_accepts(secret)
    paused = schedule_cron_job(
        SETTINGS, _snapshot(), _schedule(active=False), image="img:1", environment=environment
    )
    assert paused.cron_job["spec"]["suspend"] is True


def test_a_schedule_whose_pods_need_no_credential_has_no_secret() -> None:
    environment = pod_environment({"WHARF_HEARTBEAT_INTERVAL": "2"})
    objects = schedule_cron_job(
        SETTINGS, _snapshot(), _schedule(), image="img:1", environment=environment
    )
    assert objects.secret is None
    assert "valueFrom" not in json.dumps(objects.cron_job)
