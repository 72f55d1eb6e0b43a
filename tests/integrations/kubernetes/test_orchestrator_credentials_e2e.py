"""The store URL (which may hold a database password) is never a plain env value of a Job or
CronJob, end to end on the test bed (emulator on its FakeClock, process kubelet, moto S3).

The user's store URL carries a password-like marker: it names the bed's SQLite file through a
directory (a symlink to the bed's home) whose name is the marker, so the pods open the same
file. The user's script runs a pipeline, then schedules one (one process): the manual run
completes with its orchestrator pod reading the URL from the run's Secret, which is gone after
the run; the schedule's CronJob reads it from the schedule's Secret (owned by the CronJob), a
fired run completes with it, and ``wharf schedule delete`` takes the Secret away with the
CronJob. The pure manifests: ``test_orchestrator_credentials``.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.integrations.kubernetes.testbed import (
    BOUND,
    IMAGE,
    NAMESPACE,
    Bed,
    BedFactory,
    register_kubernetes_stack,
    remaining_secrets,
    reported_run_id,
    run_in_project,
    schedule_objects,
    scheduled_id,
    step_statuses,
    wharf_cli,
)
from tests.kube.emulator.clock import FakeClock
from tests.kube.emulator.resources import CRONJOBS, SECRETS
from tests.waiting import wait_until
from wharf.core.enums import ExecutionStatus
from wharf.integrations.kubernetes.orchestrator_launch import token_secret_name
from wharf.integrations.kubernetes.schedules import schedule_secret_name
from wharf.integrations.kubernetes.step_backend_secret import STORE_URL_ENV
from wharf.store.models import PipelineRunRecord, RunFilter, ScheduleRecord

MARKER = "pa55w0rd-s3cr3t"
START = datetime(2026, 1, 5, 10, 0, 30, tzinfo=UTC)  # "*/5 * * * *" is next due at 10:05

# One step each: its pod reads the store URL from its own Secret as any step pod does (what
# passes between steps is not this module's subject).
STEPS_MODULE = """
from wharf import Schedule, pipeline, step


@step
def double(value: int) -> int:
    return value * 2


@pipeline(name="guarded")
def guarded(value: int = 3) -> None:
    double(value)


@pipeline(name="guarded", schedule=Schedule(name="guarded-five", cron_expression="*/5 * * * *"))
def guarded_nightly(value: int = 4) -> None:
    double(value)
"""

SCRIPT = """
import k8s_steps

if __name__ == "__main__":
    run = k8s_steps.guarded()
    print("RUN", run.id, run.status.value, flush=True)
    print("SCHEDULED", k8s_steps.guarded_nightly().schedule.id)
"""


@pytest.fixture
def bed(make_bed: BedFactory) -> Bed:
    """The bed on the emulator's clock with the ``k8s`` stack; the user's store URL names the
    bed's SQLite file through the marker directory."""
    made = make_bed(
        {"k8s_steps.py": STEPS_MODULE, "run.py": SCRIPT},
        active_stack="k8s",
        clock=FakeClock(START),
    )
    register_kubernetes_stack(
        made.workspace, "k8s", {"image": IMAGE, "job_monitoring_interval": 0.5}
    )
    home = made.workspace.config.home
    guarded_dir = home.parent / f"db-{MARKER}"
    guarded_dir.symlink_to(home, target_is_directory=True)
    made.env[STORE_URL_ENV] = f"sqlite:///{guarded_dir / 'wharf.db'}"
    return made


def manifests_of(bed: Bed) -> list[dict[str, Any]]:
    """Every Job and CronJob the emulator created, as created."""
    with bed.seen.lock:
        return [dict(o) for kind in ("Job", "CronJob") for o in bed.seen.created.get(kind, [])]


def plain_values(manifest: dict[str, Any]) -> dict[str, str]:
    """The plain env values of every container of a Job's or a CronJob's pod template."""
    spec = manifest["spec"]
    template = (spec.get("jobTemplate") or {}).get("spec", spec)["template"]
    return {
        entry["name"]: entry["value"]
        for container in template["spec"]["containers"]
        for entry in container.get("env") or []
        if "value" in entry
    }


def assert_no_plain_store_url(bed: Bed) -> None:
    manifests = manifests_of(bed)
    assert manifests
    for manifest in manifests:
        values = plain_values(manifest)
        assert STORE_URL_ENV not in values, manifest["metadata"]["name"]
        assert MARKER not in json.dumps(manifest), manifest["metadata"]["name"]


def secret_ref(manifest: dict[str, Any]) -> dict[str, str]:
    """Where the orchestrator container of a Job or CronJob reads the store URL."""
    spec = manifest["spec"]
    template = (spec.get("jobTemplate") or {}).get("spec", spec)["template"]
    (container,) = template["spec"]["containers"]
    (entry,) = [e for e in container["env"] if e["name"] == STORE_URL_ENV]
    ref: dict[str, str] = entry["valueFrom"]["secretKeyRef"]
    return ref


def fired_run(bed: Bed, schedule: ScheduleRecord) -> PipelineRunRecord | None:
    runs = bed.workspace.store.runs.list(RunFilter(snapshot_id=schedule.snapshot_id)).items
    return runs[0] if runs and runs[0].status.is_finished else None


def test_manual_and_fired_runs_read_the_store_url_from_secrets_that_go_after_them(
    bed: Bed,
) -> None:
    done = run_in_project(bed, sys.executable, "run.py")
    assert done.returncode == 0, done.stdout + done.stderr
    run = bed.workspace.store.runs.get(reported_run_id(done))
    assert run.status is ExecutionStatus.COMPLETED, run.status_reason
    assert step_statuses(bed, run) == {"double": ExecutionStatus.COMPLETED}
    assert len(bed.seen.step_objects("Job", run)) == 1  # its step's pod: checked below too
    (orchestrator_job,) = [
        j for j in bed.seen.of_run("Job", str(run.id)) if j not in bed.seen.step_objects("Job", run)
    ]
    assert secret_ref(orchestrator_job) == {"name": token_secret_name(run.id), "key": "store-url"}
    created_secrets = [s["metadata"]["name"] for s in bed.seen.created.get("Secret", [])]
    assert token_secret_name(run.id) in created_secrets

    schedule = bed.workspace.store.schedules.get(scheduled_id(done))
    (cron,) = schedule_objects(bed.emulator, CRONJOBS, schedule.id)
    secret_name = schedule_secret_name(cron["metadata"]["name"])
    assert secret_ref(cron) == {"name": secret_name, "key": "store-url"}
    secret = bed.emulator.store.get(SECRETS, NAMESPACE, secret_name)
    [owner] = secret["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["uid"]) == ("CronJob", cron["metadata"]["uid"])
    # The manual run left no Secret: only the schedule's is there.
    assert wait_until(lambda: remaining_secrets(bed.emulator) == [secret_name], BOUND), (
        remaining_secrets(bed.emulator)
    )

    bed.emulator.advance_to(START.replace(minute=5, second=0))  # fires a Job
    assert wait_until(lambda: fired_run(bed, schedule) is not None, BOUND)
    fired = fired_run(bed, schedule)
    assert fired is not None and fired.status is ExecutionStatus.COMPLETED, fired
    assert fired.id != run.id  # of the schedule's snapshot, not the manual run's
    assert step_statuses(bed, fired) == {"double": ExecutionStatus.COMPLETED}
    assert len(bed.seen.step_objects("Job", fired)) == 1  # its step's pod: checked below too
    assert_no_plain_store_url(bed)  # the manual run's Jobs, the CronJob, the fired run's Jobs
    assert secret_name in remaining_secrets(bed.emulator)  # every firing needs it

    deleted = wharf_cli(bed, "schedule", "delete", "guarded-five", "--yes")
    assert deleted.returncode == 0, deleted.stderr
    assert schedule_objects(bed.emulator, CRONJOBS, schedule.id) == []
    assert schedule_objects(bed.emulator, SECRETS, schedule.id) == []
