"""A cron schedule on a Kubernetes stack whose store is a real workspace server, fired by the
emulator's clock.

A project member schedules the pipeline from a script (``WHARF_SERVER_URL`` + the member's login
token): the CronJob's pods get a token of the schedule, through the schedule's Secret, never the
member's credential. When the clock passes the schedule, the fired orchestrator pod -- a process
of the process kubelet -- reads its schedule and snapshot with that token, fires the schedule's
run on the server (created there, recorded with the schedule) and gets the run's token, which it
uses for everything else and hands to its step pods. ``wharf schedule delete`` then revokes the
schedule's token at once. The server is the server tests' ``world``; artifacts on moto S3."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.artifacts.s3_server import MotoServer
from tests.integrations.kubernetes.team_bed import TeamBed, env_of, open_team_bed, secret_values
from tests.integrations.kubernetes.testbed import (
    BOUND,
    run_script,
    schedule_objects,
    scheduled_id,
    scheduling_runner_script,
    wharf_cli,
)
from tests.kube.emulator.clock import FakeClock
from tests.kube.emulator.resources import CRONJOBS, SECRETS
from tests.server.conftest import (  # noqa: F401 (fixtures)
    World,
    live,
    world,
)
from tests.waiting import wait_until
from wharf.core.enums import ExecutionStatus, MetadataResourceType
from wharf.execution.services import run_token_scope
from wharf.integrations.kubernetes.labels import RUN_ID_KEY, STEP_KEY
from wharf.store.models import PipelineRunRecord, RunFilter, ScheduleRecord, StepRunFilter

START = datetime(2026, 1, 5, 10, 0, 30, tzinfo=UTC)  # "*/5 * * * *" is next due at 10:05

STEPS_MODULE = """
from wharf import Schedule, pipeline, step


@step
def make(value: int) -> int:
    return value


@step
def double(value: int) -> int:
    return value * 2


@pipeline(name="nightly", schedule=Schedule(name="every-five", cron_expression="*/5 * * * *"))
def nightly(value: int = 3) -> None:
    double(make(value))
"""


@pytest.fixture
def schedule_bed(
    world: World,  # noqa: F811 (the fixture)
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    s3_server: MotoServer,
    s3_bucket: str,
) -> Iterator[TeamBed]:
    files = {"team_schedule.py": STEPS_MODULE, "run.py": scheduling_runner_script("team_schedule")}
    clock = FakeClock(START)
    with open_team_bed(
        world, tmp_path, monkeypatch, s3_server, s3_bucket, files, clock=clock
    ) as bed:
        yield bed


def schedule_it(bed: TeamBed) -> ScheduleRecord:
    done = run_script(bed, "nightly")
    assert done.returncode == 0, done.stdout + done.stderr
    return bed.workspace.store.schedules.get(scheduled_id(done))


def token_type(credential: str) -> str | None:
    """A server token's ``typ`` claim (unverified); None for anything else."""
    parts = credential.split(".")
    if len(parts) != 3:
        return None
    claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    return str(claims.get("typ"))


def fired_runs(bed: TeamBed, schedule: ScheduleRecord) -> list[PipelineRunRecord]:
    runs = bed.workspace.store.runs.list(RunFilter(snapshot_id=schedule.snapshot_id)).items
    return sorted(runs, key=lambda r: r.created)


def test_a_schedule_on_a_workspace_server_fires_with_its_own_token_and_delete_revokes_it(
    schedule_bed: TeamBed,
) -> None:
    bed = schedule_bed
    member_key = str(bed.server.credentials["member"])
    schedule = schedule_it(bed)
    assert fired_runs(bed, schedule) == []  # nothing ran, no run recorded
    (cron,) = schedule_objects(bed.emulator, CRONJOBS, schedule.id)
    template = cron["spec"]["jobTemplate"]["spec"]["template"]
    assert all(e.get("value") != member_key for e in env_of(template))
    (secret,) = schedule_objects(bed.emulator, SECRETS, schedule.id)
    values = secret_values(secret)
    assert member_key not in values
    (schedule_token,) = [v for v in values if token_type(v) == "schedule"]

    # The clock passes 10:05: the fired pod creates the run on the server and runs it.
    bed.emulator.advance_to(START.replace(minute=5, second=0))

    def ended() -> bool:
        runs = fired_runs(bed, schedule)
        return bool(runs) and runs[0].status.is_finished

    assert wait_until(ended, BOUND), "the fired run did not end"
    (fired,) = fired_runs(bed, schedule)
    assert fired.status is ExecutionStatus.COMPLETED, fired.status_reason
    assert fired.orchestrator_run_id is not None
    assert fired.orchestrator_run_id.startswith("kubernetes-")
    assert fired.user_id == bed.server.users["member"].id  # the schedule token's issuer
    steps = bed.workspace.store.steps.list(StepRunFilter(run_id=fired.id)).items
    assert {s.name: s.status for s in steps} == {
        "make": ExecutionStatus.COMPLETED,
        "double": ExecutionStatus.COMPLETED,
    }
    assert all(s.pid is not None for s in steps)  # recorded by the step pods' run token
    records = bed.workspace.store.run_metadata.list(MetadataResourceType.PIPELINE_RUN, fired.id)
    metadata = {m.key: m.value for m in records}
    assert metadata["schedule_id"] == str(schedule.id)
    assert metadata["schedule_name"] == "every-five"
    assert metadata["kubernetes_cronjob"] == cron["metadata"]["name"]

    # The step pods got the run's token, never the schedule's nor the member's.
    step_pods = [
        p
        for p in bed.seen.of_kind("Pod")
        if p["metadata"].get("labels", {}).get(RUN_ID_KEY) == str(fired.id)
        and STEP_KEY in p["metadata"]["labels"]
    ]
    assert len(step_pods) == 2
    step_secrets = [
        s for s in bed.seen.of_kind("Secret") if s["metadata"]["name"] != secret["metadata"]["name"]
    ]
    handed = [v for s in step_secrets for v in secret_values(s) if token_type(v) is not None]
    assert handed and all(run_token_scope(v) == fired.id for v in handed)
    assert schedule_token not in handed and member_key not in handed

    # The schedule's token works until the schedule is deleted, then never again.
    pod = bed.server.client(schedule_token)
    assert pod.get(f"/api/v1/schedules/{schedule.id}").status_code == 200
    deleted = wharf_cli(bed, "schedule", "delete", "every-five", "--yes")
    assert deleted.returncode == 0, deleted.stdout + deleted.stderr
    assert (
        schedule_objects(bed.emulator, CRONJOBS, schedule.id) == []
        and schedule_objects(bed.emulator, SECRETS, schedule.id) == []
    )
    refused = pod.get(f"/api/v1/schedules/{schedule.id}")
    assert refused.status_code == 401 and "deleted" in refused.text
    fire = {"orchestrator_run_id": "kubernetes-late", "name": "late"}
    assert pod.post(f"/api/v1/schedules/{schedule.id}/runs", json=fire).status_code == 401
    assert [r.id for r in fired_runs(bed, schedule)] == [fired.id]


def test_a_viewer_deleting_a_schedule_leaves_its_cron_job(schedule_bed: TeamBed) -> None:
    """``wharf schedule delete`` changes the platform before the record: it must first learn
    that the server lets this account change the schedule, or a viewer (who may reach the
    cluster) deletes the CronJob and is then refused, leaving a recorded, active schedule that
    never fires."""
    bed = schedule_bed
    schedule = schedule_it(bed)
    viewer = str(bed.server.credentials["viewer"])
    refused = wharf_cli(bed, "schedule", "delete", "every-five", "--yes", WHARF_API_KEY=viewer)
    assert refused.returncode != 0 and "Traceback" not in refused.stderr, refused.stderr
    assert "viewer role" in refused.stderr, refused.stderr
    assert len(schedule_objects(bed.emulator, CRONJOBS, schedule.id)) == 1
    assert len(schedule_objects(bed.emulator, SECRETS, schedule.id)) == 1
    assert bed.workspace.store.schedules.get(schedule.id).active  # left as it was

    deleted = wharf_cli(bed, "schedule", "delete", "every-five", "--yes")  # the member
    assert deleted.returncode == 0, deleted.stdout + deleted.stderr
    assert schedule_objects(bed.emulator, CRONJOBS, schedule.id) == []
