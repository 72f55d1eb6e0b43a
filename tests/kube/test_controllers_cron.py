"""The emulator's CronJob controller: schedules on a FakeClock, concurrency, deadlines, history.

The bed starts at 10:00:30 UTC on 2026-01-05; ``*/5 * * * *`` is next due at 10:05:00.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.kube.controller_bed import START, ControllerBed, cronjob_body
from tests.kube.emulator.clock import rfc3339
from tests.kube.emulator.resources import CRONJOBS

SCHEDULED_ANNOTATION = "batch.kubernetes.io/cronjob-scheduled-timestamp"


def at(hour: int, minute: int, second: int = 0) -> datetime:
    return START.replace(hour=hour, minute=minute, second=second)


def job_name_for(cronjob: str, t: datetime) -> str:
    return f"{cronjob}-{int(t.timestamp()) // 60}"


@pytest.fixture
def bed() -> Iterator[ControllerBed]:
    bed = ControllerBed()
    yield bed
    bed.close()


def create_cronjob(bed: ControllerBed, name: str, schedule: str, **spec: Any) -> dict[str, Any]:
    return bed.store.create(CRONJOBS, "default", cronjob_body(name, schedule, **spec))


def job_names(bed: ControllerBed) -> list[str]:
    return sorted(j["metadata"]["name"] for j in bed.jobs())


def complete(bed: ControllerBed, job_name: str, exit_code: int = 0) -> None:
    (pod,) = bed.waiting_pods(job_name)
    bed.run(pod)
    bed.finish(pod, exit_code)


def test_a_cronjob_starts_a_job_when_its_time_comes(bed: ControllerBed) -> None:
    cronjob = create_cronjob(bed, "nightly", "*/5 * * * *")
    bed.advance_to(at(10, 4, 59))
    assert bed.jobs() == []
    bed.advance_to(at(10, 5, 0))
    name = job_name_for("nightly", at(10, 5))
    assert job_names(bed) == [name]
    job = bed.job(name)
    meta = job["metadata"]
    assert meta["labels"]["pipeline"] == "nightly"
    assert meta["annotations"] == {"a": "b", SCHEDULED_ANNOTATION: "2026-01-05T10:05:00Z"}
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "batch/v1",
            "kind": "CronJob",
            "name": "nightly",
            "uid": cronjob["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert len(bed.pods_of(name)) == 1  # the Job controller took over
    status = bed.cronjob("nightly")["status"]
    assert status["lastScheduleTime"] == "2026-01-05T10:05:00Z"
    assert [ref["name"] for ref in status["active"]] == [name]
    ref = status["active"][0]
    assert ref["kind"] == "Job" and ref["apiVersion"] == "batch/v1"
    assert ref["uid"] == meta["uid"] and ref["namespace"] == "default"
    bed.advance_to(at(10, 9, 59))
    assert job_names(bed) == [name]  # each time starts once


def test_a_completed_job_leaves_active_and_sets_last_successful_time(bed: ControllerBed) -> None:
    create_cronjob(bed, "nightly", "*/5 * * * *")
    bed.advance_to(at(10, 5))
    name = job_name_for("nightly", at(10, 5))
    bed.advance(42)
    complete(bed, name)
    status = bed.cronjob("nightly")["status"]
    assert "active" not in status
    assert status["lastSuccessfulTime"] == rfc3339(at(10, 5, 42))


def test_only_the_most_recent_missed_time_runs(bed: ControllerBed) -> None:
    create_cronjob(bed, "catchup", "*/5 * * * *")
    bed.advance_to(at(10, 23))
    assert job_names(bed) == [job_name_for("catchup", at(10, 20))]
    assert bed.cronjob("catchup")["status"]["lastScheduleTime"] == rfc3339(at(10, 20))


def test_allow_runs_jobs_side_by_side(bed: ControllerBed) -> None:
    create_cronjob(bed, "overlap", "*/5 * * * *")
    bed.advance_to(at(10, 5))
    bed.advance_to(at(10, 10))
    expected = [job_name_for("overlap", at(10, 5)), job_name_for("overlap", at(10, 10))]
    assert job_names(bed) == expected
    assert [r["name"] for r in bed.cronjob("overlap")["status"]["active"]] == expected


def test_forbid_skips_while_a_job_is_active_and_catches_up_after(bed: ControllerBed) -> None:
    create_cronjob(bed, "single", "*/5 * * * *", concurrencyPolicy="Forbid")
    bed.advance_to(at(10, 5))
    first = job_name_for("single", at(10, 5))
    bed.advance_to(at(10, 10))
    assert job_names(bed) == [first]
    assert bed.cronjob("single")["status"]["lastScheduleTime"] == rfc3339(at(10, 5))
    complete(bed, first)
    bed.advance_to(at(10, 11))  # 10:10 was missed, not too late: it runs now
    assert job_names(bed) == [first, job_name_for("single", at(10, 10))]


def test_replace_deletes_the_active_job_before_starting(bed: ControllerBed) -> None:
    create_cronjob(bed, "latest", "*/5 * * * *", concurrencyPolicy="Replace")
    bed.advance_to(at(10, 5))
    first = job_name_for("latest", at(10, 5))
    (pod,) = bed.pods_of(first)
    bed.run(pod)
    bed.advance_to(at(10, 10))
    second = job_name_for("latest", at(10, 10))
    assert job_names(bed) == [second]
    (stopping,) = bed.pods_of(first)  # the GC deleted it; the kubelet stops it
    assert "deletionTimestamp" in stopping["metadata"]
    assert [r["name"] for r in bed.cronjob("latest")["status"]["active"]] == [second]


def test_starting_deadline_skips_a_time_missed_for_too_long(bed: ControllerBed) -> None:
    create_cronjob(bed, "strict", "*/5 * * * *", startingDeadlineSeconds=60)
    bed.advance_to(at(10, 7))  # 10:05 is 120 s late
    assert bed.jobs() == []
    assert "lastScheduleTime" not in bed.cronjob("strict")["status"]
    bed.advance_to(at(10, 10, 30))  # 10:10 is 30 s late: within the window
    assert job_names(bed) == [job_name_for("strict", at(10, 10))]


def test_a_suspended_cronjob_starts_nothing(bed: ControllerBed) -> None:
    create_cronjob(bed, "paused", "*/5 * * * *", suspend=True)
    bed.advance_to(at(10, 30))
    assert bed.jobs() == []


def test_history_limits_delete_the_oldest_finished_jobs(bed: ControllerBed) -> None:
    create_cronjob(
        bed,
        "history",
        "*/5 * * * *",
        successfulJobsHistoryLimit=2,
        failedJobsHistoryLimit=1,
        job_spec={"backoffLimit": 0},
    )
    succeeded: list[str] = []
    failed: list[str] = []
    for minute, exit_code in ((5, 0), (10, 1), (15, 0), (20, 1), (25, 0)):
        bed.advance_to(at(10, minute))
        name = job_name_for("history", at(10, minute))
        complete(bed, name, exit_code)
        (succeeded if exit_code == 0 else failed).append(name)
    assert job_names(bed) == sorted([*succeeded[-2:], failed[-1]])
    assert bed.pods_of(succeeded[0]) == []  # its pod went with it (Background)


def test_default_history_keeps_three_successful_jobs(bed: ControllerBed) -> None:
    create_cronjob(bed, "defaults", "*/5 * * * *")
    names = []
    for minute in (5, 10, 15, 20):
        bed.advance_to(at(10, minute))
        names.append(job_name_for("defaults", at(10, minute)))
        complete(bed, names[-1])
    assert job_names(bed) == names[1:]


def test_time_zone_is_respected(bed: ControllerBed) -> None:
    create_cronjob(bed, "berlin", "0 12 * * *", timeZone="Europe/Berlin")
    bed.advance_to(at(10, 59, 59))  # 11:59:59 in Berlin (CET, UTC+1)
    assert bed.jobs() == []
    bed.advance_to(at(11, 0))
    name = job_name_for("berlin", at(11, 0))
    assert job_names(bed) == [name]
    assert bed.job(name)["metadata"]["annotations"][SCHEDULED_ANNOTATION] == (
        "2026-01-05T12:00:00+01:00"
    )


def test_a_cronjob_without_time_zone_uses_utc(bed: ControllerBed) -> None:
    create_cronjob(bed, "utc", "0 11 * * *")
    bed.advance_to(at(11, 0))
    assert job_names(bed) == [job_name_for("utc", at(11, 0))]


def test_a_job_started_outside_the_schedule_is_tracked_as_active(bed: ControllerBed) -> None:
    """A client triggering a run now with a Job owned by the CronJob (kubectl create job --from)."""
    cronjob = create_cronjob(bed, "manual", "0 0 1 1 *")
    from tests.kube.controller_bed import job_body
    from tests.kube.emulator.resources import JOBS

    body = job_body("manual-now")
    body["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "batch/v1",
            "kind": "CronJob",
            "name": "manual",
            "uid": cronjob["metadata"]["uid"],
            "controller": True,
        }
    ]
    bed.store.create(JOBS, "default", body)
    assert [r["name"] for r in bed.cronjob("manual")["status"]["active"]] == ["manual-now"]
    complete(bed, "manual-now")
    assert "active" not in bed.cronjob("manual")["status"]


def test_a_schedule_far_in_the_past_does_not_replay_every_minute(bed: ControllerBed) -> None:
    create_cronjob(bed, "everyminute", "* * * * *")
    bed.advance_to(START + timedelta(days=30))
    assert len(bed.jobs()) == 1
    assert bed.clock.now().tzinfo == UTC


def test_the_cronjob_controller_records_events(bed: ControllerBed) -> None:
    from tests.kube.controller_bed import events_for

    create_cronjob(bed, "noted", "*/5 * * * *", successfulJobsHistoryLimit=1)
    first, second = job_name_for("noted", at(10, 5)), job_name_for("noted", at(10, 10))
    bed.advance_to(at(10, 5))
    complete(bed, first)
    bed.advance_to(at(10, 10))
    complete(bed, second)
    assert events_for(bed, "noted") == [
        ("Normal", "SuccessfulCreate", f"Created job {first}"),
        ("Normal", "SawCompletedJob", f"Saw completed job: {first}, status: Complete"),
        ("Normal", "SuccessfulCreate", f"Created job {second}"),
        ("Normal", "SawCompletedJob", f"Saw completed job: {second}, status: Complete"),
        ("Normal", "SuccessfulDelete", f"Deleted job {first}"),
    ]


def test_a_tick_a_fraction_before_the_next_time_still_starts_the_due_one(
    bed: ControllerBed,
) -> None:
    """The system-clock ticker calls with sub-second times; 10:05 is due at 10:09:59.75."""
    create_cronjob(bed, "fraction", "*/5 * * * *")
    bed.advance_to(at(10, 9, 59).replace(microsecond=750_000))
    assert job_names(bed) == [job_name_for("fraction", at(10, 5))]
