"""Schedules on a Kubernetes stack, end to end on the test bed with the emulator's clock.

A script (in a directory of its own, as in ``test_orchestrator_e2e``) calls a cron-scheduled
pipeline: a CronJob whose job template is a manual run's orchestrator Job is created and no run
is recorded. Moving the emulator's FakeClock past the schedule fires a Job (the emulator's
CronJob controller); the process kubelet runs its pod, which creates its own run (recorded with
its schedule) and runs it; the next firing's run is fully cached. ``wharf schedule pause``,
``resume`` and ``delete`` suspend, resume and delete the CronJob. Artifacts on moto S3, the
embedded SQLite store opened by the pods directly.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.integrations.kubernetes.testbed import (
    BOUND,
    IMAGE,
    Bed,
    BedFactory,
    metadata_of,
    register_kubernetes_stack,
    run_script,
    schedule_objects,
    scheduled_id,
    scheduling_runner_script,
    step_statuses,
    steps_of,
    wharf_cli,
)
from tests.kube.emulator.clock import FakeClock
from tests.kube.emulator.resources import CRONJOBS, JOBS, NAMESPACES
from tests.waiting import wait_until
from wharf.core.enums import ExecutionStatus
from wharf.integrations.kubernetes.labels import RUN_ID_KEY, STEP_KEY
from wharf.integrations.kubernetes.orchestrator_main import (
    CRON_JOB_KEY,
    SCHEDULE_ID_KEY,
    SCHEDULE_NAME_KEY,
)
from wharf.store.models import PipelineRunRecord, RunFilter, ScheduleRecord

START = datetime(2026, 1, 5, 10, 0, 30, tzinfo=UTC)  # "*/5 * * * *" is next due at 10:05


def at(minute: int) -> datetime:
    return START.replace(minute=minute, second=0)


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


@pipeline(name="nightly")
def nightly_now(value: int = 3) -> None:
    double(make(value))


@pipeline(schedule=Schedule(name="poll", interval_seconds=600))
def polling() -> None:
    make(1)
"""

SCRIPT = scheduling_runner_script("k8s_steps")


@pytest.fixture
def bed(make_bed: BedFactory) -> Bed:
    """The bed on the emulator's clock (at ``START``) with the ``k8s`` stack."""
    made = make_bed(
        {"k8s_steps.py": STEPS_MODULE, "run.py": SCRIPT},
        active_stack="k8s",
        clock=FakeClock(START),
    )
    register_kubernetes_stack(
        made.workspace,
        "k8s",
        {
            "image": IMAGE,
            "job_monitoring_interval": 0.5,
            "successful_jobs_history_limit": 2,
            "failed_jobs_history_limit": 1,
            "concurrency_policy": "Forbid",
            "starting_deadline_seconds": 600,
        },
    )
    return made


def schedule_it(bed: Bed, **parameters: Any) -> ScheduleRecord:
    done = run_script(bed, "nightly", **parameters)
    assert done.returncode == 0, done.stdout + done.stderr
    return bed.workspace.store.schedules.get(scheduled_id(done))


def cron_jobs_of(bed: Bed, schedule: ScheduleRecord) -> list[dict[str, Any]]:
    return schedule_objects(bed.emulator, CRONJOBS, schedule.id)


def fired_jobs(bed: Bed, cron_name: str) -> list[dict[str, Any]]:
    jobs = bed.emulator.store.list(JOBS, "default")["items"]
    return [
        j
        for j in jobs
        if any(r["name"] == cron_name for r in j["metadata"].get("ownerReferences") or [])
    ]


def fired_runs(bed: Bed, schedule: ScheduleRecord) -> list[PipelineRunRecord]:
    runs = bed.workspace.store.runs.list(RunFilter(snapshot_id=schedule.snapshot_id)).items
    return sorted(runs, key=lambda r: r.created)


def wait_for_fired_run(bed: Bed, schedule: ScheduleRecord, count: int) -> PipelineRunRecord:
    """The ``count``-th run of the schedule, once it ended (read until a deadline)."""

    def ended() -> bool:
        runs = fired_runs(bed, schedule)
        return len(runs) >= count and runs[count - 1].status.is_finished

    assert wait_until(ended, BOUND), f"run {count} of {schedule.name} did not end"
    return fired_runs(bed, schedule)[count - 1]


def step_reasons(bed: Bed, run: PipelineRunRecord) -> str:
    """The run's reason and each of its steps' (a failed step says why: e.g. its heartbeat)."""
    steps = {name: step.status_reason for name, step in steps_of(bed, run).items()}
    return f"{run.status_reason} {steps}"


def normalised_args(args: list[str]) -> list[str]:
    """The orchestrator's arguments without what names one run or schedule (a manual run's
    pod also names the run's Secret, which it deletes at the run's end)."""
    out, skip = [], False
    for i, arg in enumerate(args):
        if skip:
            skip = False
            continue
        if arg in ("--run-id", "--schedule-id", "--token-secret"):
            skip = True
            continue
        named = i > 0 and args[i - 1] in ("--snapshot-id", "--job-name")
        out.append("<value>" if named else arg)
    return out


def comparable_job_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """A Job spec without its selector and pod labels (the server's, the run's), with the
    orchestrator's arguments :func:`normalised_args` and without the name of the Secret its
    credentials come from (the run's, or the schedule's)."""
    spec = json.loads(json.dumps(spec))
    spec.pop("selector", None)
    template = spec.pop("template")
    (container,) = template["spec"]["containers"]
    container["args"] = normalised_args(container["args"])
    for entry in container.get("env") or []:
        if "valueFrom" in entry:
            entry["valueFrom"]["secretKeyRef"]["name"] = "<secret>"
    return {"job": spec, "pod": template["spec"]}


def test_a_cron_schedule_becomes_a_cronjob_whose_runs_create_themselves_and_cache(
    bed: Bed,
) -> None:
    schedule = schedule_it(bed)
    assert schedule.active and schedule.cron_expression == "*/5 * * * *"
    assert bed.workspace.store.runs.list().items == []  # nothing ran, no run recorded
    (cron,) = cron_jobs_of(bed, schedule)
    name = cron["metadata"]["name"]
    assert len(name) <= 52 and "every-five" in name
    spec = cron["spec"]
    assert spec["schedule"] == "*/5 * * * *" and spec["suspend"] is False
    assert spec["successfulJobsHistoryLimit"] == 2 and spec["failedJobsHistoryLimit"] == 1
    assert spec["concurrencyPolicy"] == "Forbid" and spec["startingDeadlineSeconds"] == 600
    assert cron["metadata"]["labels"]["wharf.io/pipeline"] == "nightly"

    # Scheduling it again (the script run again) keeps the schedule and its one CronJob.
    assert schedule_it(bed).id == schedule.id
    assert [c["metadata"]["name"] for c in cron_jobs_of(bed, schedule)] == [name]

    template = cron_jobs_of(bed, schedule)[0]["spec"]["jobTemplate"]
    args = template["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--run-id" not in args and args[-2:] == ["--schedule-id", str(schedule.id)]
    assert args[args.index("--snapshot-id") + 1] == str(schedule.snapshot_id)

    # The clock passes 10:05: a Job fires; its pod creates its run, which completes.
    bed.emulator.advance_to(at(4))
    assert fired_jobs(bed, name) == []
    bed.emulator.advance_to(at(5))
    (fired_job,) = fired_jobs(bed, name)
    first = wait_for_fired_run(bed, schedule, 1)
    assert first.status is ExecutionStatus.COMPLETED, step_reasons(bed, first)
    assert first.orchestrator_run_id is not None
    assert first.orchestrator_run_id.startswith("kubernetes-")
    assert step_statuses(bed, first) == {
        "make": ExecutionStatus.COMPLETED,
        "double": ExecutionStatus.COMPLETED,
    }
    metadata = metadata_of(bed, first)
    assert metadata[SCHEDULE_ID_KEY] == str(schedule.id)
    assert metadata[SCHEDULE_NAME_KEY] == "every-five"
    assert metadata[CRON_JOB_KEY] == name

    # The template is the orchestrator Job of a manual run (of the same steps, cached now: its
    # pod starts no step pod), as the API server defaulted both: the same Job but for the
    # run-specific arguments.
    done = run_script(bed, "nightly_now")
    assert done.returncode == 0, done.stdout + done.stderr
    (manual_job,) = [
        j
        for j in bed.seen.created.get("Job", [])
        if RUN_ID_KEY in j["metadata"]["labels"] and STEP_KEY not in j["metadata"]["labels"]
    ]
    assert comparable_job_spec(fired_job["spec"]) == comparable_job_spec(manual_job["spec"])

    # The next firing (after the first Job finished): a run of its own, fully cached.
    assert wait_until(
        lambda: (
            not bed.emulator.store.get(CRONJOBS, "default", name).get("status", {}).get("active")
        ),
        BOUND,
    )
    bed.emulator.advance_to(at(10))
    second = wait_for_fired_run(bed, schedule, 2)
    assert second.id != first.id
    assert second.status is ExecutionStatus.COMPLETED, step_reasons(bed, second)
    assert set(step_statuses(bed, second).values()) == {ExecutionStatus.CACHED}
    assert bed.seen.step_objects("Pod", second) == []
    assert wait_until(
        lambda: (
            not bed.emulator.store.get(CRONJOBS, "default", name).get("status", {}).get("active")
        ),
        BOUND,
    )

    # Paused: the CronJob is suspended and the clock fires nothing; resumed: no longer.
    paused = wharf_cli(bed, "schedule", "pause", "every-five")
    assert paused.returncode == 0, paused.stderr
    assert bed.emulator.store.get(CRONJOBS, "default", name)["spec"]["suspend"] is True
    assert not bed.workspace.store.schedules.get(schedule.id).active
    fired = len(fired_jobs(bed, name))
    bed.emulator.advance_to(at(15))
    assert len(fired_jobs(bed, name)) == fired and len(fired_runs(bed, schedule)) == 2
    resumed = wharf_cli(bed, "schedule", "resume", "every-five")
    assert resumed.returncode == 0, resumed.stderr
    assert bed.emulator.store.get(CRONJOBS, "default", name)["spec"]["suspend"] is False
    assert bed.workspace.store.schedules.get(schedule.id).active

    # Deleted: the CronJob is gone with the record; the runs it started stay.
    deleted = wharf_cli(bed, "schedule", "delete", "every-five", "--yes")
    assert deleted.returncode == 0, deleted.stderr
    assert cron_jobs_of(bed, schedule) == []
    assert bed.workspace.store.schedules.list().items == []
    bed.emulator.advance_to(at(20))
    assert len(fired_runs(bed, schedule)) == 2


def test_a_schedule_without_a_cron_expression_is_refused_before_anything_is_recorded(
    bed: Bed,
) -> None:
    done = run_script(bed, "polling")
    assert done.returncode != 0
    message = done.stderr.strip().splitlines()[-1]
    assert (
        "Kubernetes schedules need cron_expression; interval_seconds and run_once_start_time "
        "are not supported" in message
    ), done.stderr
    assert bed.workspace.store.schedules.list().items == []
    assert bed.workspace.store.runs.list().items == []
    assert bed.emulator.store.list(CRONJOBS, "default")["items"] == []


def test_an_unchanged_schedule_called_on_another_stack_is_refused(bed: Bed) -> None:
    """The schedule is kept with its own snapshot, whose stack is the one ``wharf schedule
    pause/delete`` then reach: calling it again on another Kubernetes stack must not hand it to
    that stack's cluster too (a second CronJob, in another namespace, that delete never finds)."""
    bed.emulator.store.create(NAMESPACES, None, {"metadata": {"name": "other"}})
    register_kubernetes_stack(
        bed.workspace,
        "k8s-other",
        {"image": IMAGE, "namespace": "other", "job_monitoring_interval": 0.5},
    )
    schedule = schedule_it(bed)
    again = run_script(bed, "nightly", stack="k8s-other")
    assert schedule_objects(bed.emulator, CRONJOBS, schedule.id, namespace="other") == []
    assert again.returncode != 0
    assert "is on stack 'k8s'" in again.stderr and "wharf schedule delete every-five" in (
        again.stderr
    ), again.stderr
    assert len(cron_jobs_of(bed, schedule)) == 1
    assert bed.workspace.store.schedules.get(schedule.id).snapshot_id == schedule.snapshot_id

    deleted = wharf_cli(bed, "schedule", "delete", "every-five", "--yes")
    assert deleted.returncode == 0, deleted.stderr
    assert cron_jobs_of(bed, schedule) == []
    moved = run_script(bed, "nightly", stack="k8s-other")  # now scheduled there, and only there
    assert moved.returncode == 0, moved.stdout + moved.stderr
    assert len(schedule_objects(bed.emulator, CRONJOBS, scheduled_id(moved), "other")) == 1


def test_a_schedule_stays_as_it_was_while_its_cluster_cannot_be_reached_or_moves(
    bed: Bed, tmp_path: Path
) -> None:
    """A cluster that cannot be reached leaves the schedule as it was (its pause and its delete
    fail, nothing changed). Then the orchestrator's configuration: a CronJob lives where, and
    runs what, the orchestrator's configuration said when it was scheduled, and ``wharf
    schedule pause/delete`` look for it where the configuration says now: changing the
    namespace would leave the CronJob firing where delete never finds it. (One schedule for
    both: the first part leaves it as the second starts from.)"""
    bed.emulator.store.create(NAMESPACES, None, {"metadata": {"name": "other"}})
    schedule = schedule_it(bed)
    (cron,) = cron_jobs_of(bed, schedule)
    unreachable = tmp_path / "unreachable-kubeconfig"
    config = json.loads(bed.emulator.kubeconfig_path.read_text())
    config["clusters"][0]["cluster"]["server"] = "http://127.0.0.1:9"  # nothing listens
    unreachable.write_text(json.dumps(config))

    paused = wharf_cli(bed, "schedule", "pause", "every-five", KUBECONFIG=str(unreachable))
    assert paused.returncode != 0 and "Traceback" not in paused.stderr
    (line,) = paused.stderr.strip().splitlines()
    assert "Cannot list the CronJobs of schedule" in line and "unreachable" in line, line
    assert bed.workspace.store.schedules.get(schedule.id).active  # rolled back
    assert (
        bed.emulator.store.get(CRONJOBS, "default", cron["metadata"]["name"])["spec"]["suspend"]
        is False
    )

    deleted = wharf_cli(
        bed, "schedule", "delete", "every-five", "--yes", KUBECONFIG=str(unreachable)
    )
    assert deleted.returncode != 0 and len(deleted.stderr.strip().splitlines()) == 1
    assert bed.workspace.store.schedules.get(schedule.id).active  # kept: nothing changed
    assert len(cron_jobs_of(bed, schedule)) == 1

    # The orchestrator's configuration is kept while the schedule uses it.
    moved = wharf_cli(
        bed, "component", "update", "k8s", "--type", "orchestrator", "-c", "namespace=other"
    )
    assert moved.returncode != 0 and "Traceback" not in moved.stderr, moved.stderr
    assert "used by schedule(s) every-five" in moved.stderr, moved.stderr
    deleted = wharf_cli(bed, "schedule", "delete", "every-five", "--yes")
    assert deleted.returncode == 0, deleted.stderr
    assert cron_jobs_of(bed, schedule) == []
    assert schedule_objects(bed.emulator, CRONJOBS, schedule.id, namespace="other") == []
    # Without schedules, the orchestrator changes as before.
    changed = wharf_cli(
        bed, "component", "update", "k8s", "--type", "orchestrator", "-c", "namespace=other"
    )
    assert changed.returncode == 0, changed.stderr
