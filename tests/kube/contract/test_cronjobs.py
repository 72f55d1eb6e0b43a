"""CronJobs: validation and defaults (everywhere), firing, concurrency, history, GC (emulator).

kube-apiserver 1.20 serves CronJob only as batch/v1beta1 (the client has no class for it: plain
requests), with the same validation and defaults as batch/v1; only a controller manager fires
them. Firing runs on an emulator with a fake clock (``clocked_target``); times are whole minutes
after ``FAKE_CLOCK_START`` (09:00:00 UTC).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.kube.contract.conftest import FAKE_CLOCK_START, MERGE_PATCH, Target

EMULATOR_ONLY = pytest.mark.emulator_only(
    reason="only a controller manager fires CronJobs; a bare kube-apiserver has none"
)


def _group_version(target: Target) -> str:
    """batch/v1 where served (1.21+, the emulator); kube-apiserver 1.20 has only v1beta1."""
    _, minor = target.server_version()
    return "batch/v1" if target.is_emulator or minor >= 21 else "batch/v1beta1"


def _cronjob(
    target: Target, name: str, schedule: str = "*/5 * * * *", **spec: Any
) -> dict[str, Any]:
    job = target.job_manifest("unused")
    template = {"metadata": {"labels": {"wharf.io/schedule": name}}, "spec": job["spec"]}
    return {
        "apiVersion": _group_version(target),
        "kind": "CronJob",
        "metadata": {"name": name},
        "spec": {"schedule": schedule, "jobTemplate": template, **spec},
    }


def _post(target: Target, body: dict[str, Any]) -> tuple[int, Any]:
    path = f"/apis/{body['apiVersion']}/namespaces/{target.namespace}/cronjobs"
    return target.request("POST", path, body)


def _create(
    target: Target, name: str, schedule: str = "*/5 * * * *", **spec: Any
) -> dict[str, Any]:
    status, created = _post(target, _cronjob(target, name, schedule, **spec))
    assert status == 201, created
    return dict(created)


def _invalid_fields(target: Target, body: dict[str, Any]) -> list[tuple[str, str]]:
    status, error = _post(target, body)
    assert status == 422 and error["reason"] == "Invalid", error
    return [(c.get("field", ""), c["reason"]) for c in error["details"]["causes"]]


def _jobs(target: Target) -> list[dict[str, Any]]:
    items = target.raw(target.batch.list_namespaced_job, target.namespace)["items"]
    return sorted(items, key=lambda j: j["metadata"]["name"])


def _minutes(minutes_after_start: int) -> int:
    return int(FAKE_CLOCK_START.timestamp()) // 60 + minutes_after_start


def _advance_to_minute(target: Target, minute: int) -> None:
    seconds = (FAKE_CLOCK_START - target.now()).total_seconds() + minute * 60
    target.advance(seconds)


def _finish_jobs_pod(target: Target, job: str) -> None:
    pods = target.wait_for(
        lambda: (
            target.core.list_namespaced_pod(
                target.namespace, label_selector=f"job-name={job}"
            ).items
        ),
        what=f"the pod of {job}",
    )
    target.core.patch_namespaced_pod_status(
        pods[0].metadata.name, target.namespace, {"status": {"phase": "Succeeded"}},
        _content_type=MERGE_PATCH,
    )  # fmt: skip


def test_cronjob_defaults(target: Target) -> None:
    created = _create(target, "nightly", "0 3 * * *")
    spec = created["spec"]
    assert spec["concurrencyPolicy"] == "Allow"
    assert spec["suspend"] is False
    assert spec["successfulJobsHistoryLimit"] == 3
    assert spec["failedJobsHistoryLimit"] == 1
    assert "startingDeadlineSeconds" not in spec


def test_cronjob_names_are_at_most_52_characters(target: Target) -> None:
    _create(target, "c" * 52)
    assert _invalid_fields(target, _cronjob(target, "c" * 53)) == [
        ("metadata.name", "FieldValueInvalid")
    ]


@pytest.mark.parametrize(
    "schedule",
    ["61 * * * *", "* * * *", "not a cron", "* * * * * *", "* * * * * * *", "TZ=UTC 0 * * * *"],
)
def test_bad_schedules_are_invalid(target: Target, schedule: str) -> None:
    assert _invalid_fields(target, _cronjob(target, "c", schedule)) == [
        ("spec.schedule", "FieldValueInvalid")
    ]


def test_an_empty_schedule_is_required(target: Target) -> None:
    assert _invalid_fields(target, _cronjob(target, "c", "")) == [
        ("spec.schedule", "FieldValueRequired")
    ]


@pytest.mark.parametrize("schedule", ["*/5 * * * *", "0 3 * * 1-5", "@hourly", "15,45 9-17 * * *"])
def test_good_schedules_are_accepted(target: Target, schedule: str) -> None:
    _create(target, "c", schedule)


def test_a_bad_concurrency_policy_is_not_supported(target: Target) -> None:
    body = _cronjob(target, "c", concurrencyPolicy="Sometimes")
    assert _invalid_fields(target, body) == [("spec.concurrencyPolicy", "FieldValueNotSupported")]


@EMULATOR_ONLY
def test_a_cronjob_fires_on_schedule(clocked_target: Target) -> None:
    target = clocked_target
    cronjob = _create(target, "every5")
    _advance_to_minute(target, 4)
    assert _jobs(target) == []
    _advance_to_minute(target, 5)
    [job] = target.wait_for(lambda: _jobs(target), what="a job")
    assert job["metadata"]["name"] == f"every5-{_minutes(5)}"
    assert job["metadata"]["labels"]["wharf.io/schedule"] == "every5"
    [owner] = job["metadata"]["ownerReferences"]
    assert owner["kind"] == "CronJob" and owner["uid"] == cronjob["metadata"]["uid"]
    assert owner["controller"] is True
    status = target.raw(target.batch.read_namespaced_cron_job, "every5", target.namespace)["status"]
    assert [ref["name"] for ref in status["active"]] == [job["metadata"]["name"]]
    assert status["lastScheduleTime"] == "2026-01-05T09:05:00Z"


@EMULATOR_ONLY
def test_concurrency_allow_runs_jobs_side_by_side(clocked_target: Target) -> None:
    target = clocked_target
    _create(target, "allow", concurrencyPolicy="Allow")
    _advance_to_minute(target, 5)
    _advance_to_minute(target, 10)
    names = [
        j["metadata"]["name"]
        for j in target.wait_for(lambda: len(_jobs(target)) == 2 and _jobs(target), what="two jobs")
    ]
    assert names == [f"allow-{_minutes(5)}", f"allow-{_minutes(10)}"]


@EMULATOR_ONLY
def test_concurrency_forbid_skips_while_a_job_runs(clocked_target: Target) -> None:
    target = clocked_target
    _create(target, "forbid", concurrencyPolicy="Forbid")
    _advance_to_minute(target, 5)
    [first] = target.wait_for(lambda: _jobs(target), what="the first job")
    _advance_to_minute(target, 10)
    assert [j["metadata"]["name"] for j in _jobs(target)] == [first["metadata"]["name"]]
    _finish_jobs_pod(target, first["metadata"]["name"])
    target.wait_for(
        lambda: not target.raw(target.batch.read_namespaced_cron_job, "forbid", target.namespace)
        .get("status", {}).get("active"),
        what="the cronjob to see its job finish",
    )  # fmt: skip
    _advance_to_minute(target, 15)
    names = [
        j["metadata"]["name"]
        for j in target.wait_for(
            lambda: len(_jobs(target)) == 2 and _jobs(target), what="the next job"
        )
    ]
    assert names[-1] == f"forbid-{_minutes(15)}"


@EMULATOR_ONLY
def test_concurrency_replace_deletes_the_running_job(clocked_target: Target) -> None:
    target = clocked_target
    _create(target, "replace", concurrencyPolicy="Replace")
    _advance_to_minute(target, 5)
    target.wait_for(lambda: _jobs(target), what="the first job")
    _advance_to_minute(target, 10)
    target.wait_for(
        lambda: [j["metadata"]["name"] for j in _jobs(target)] == [f"replace-{_minutes(10)}"],
        what="the first job replaced by the second",
    )


@EMULATOR_ONLY
def test_a_suspended_cronjob_fires_nothing(clocked_target: Target) -> None:
    target = clocked_target
    _create(target, "paused", suspend=True)
    _advance_to_minute(target, 5)
    _advance_to_minute(target, 10)
    assert _jobs(target) == []
    target.batch.patch_namespaced_cron_job(
        "paused", target.namespace, {"spec": {"suspend": False}}, _content_type=MERGE_PATCH
    )
    _advance_to_minute(target, 15)
    target.wait_for(lambda: _jobs(target), what="a job after resuming")


@EMULATOR_ONLY
def test_a_missed_start_beyond_the_starting_deadline_is_skipped(clocked_target: Target) -> None:
    target = clocked_target
    _create(target, "deadline", "0 * * * *", startingDeadlineSeconds=60)
    _advance_to_minute(target, 65)  # 10:00 was missed by 5 minutes: more than 60 s
    assert _jobs(target) == []
    _advance_to_minute(target, 120)  # 11:00 on time
    [job] = target.wait_for(lambda: _jobs(target), what="the on-time job")
    assert job["metadata"]["name"] == f"deadline-{_minutes(120)}"


@EMULATOR_ONLY
def test_successful_jobs_history_is_trimmed(clocked_target: Target) -> None:
    target = clocked_target
    _create(target, "hist", successfulJobsHistoryLimit=1)
    for minute in (5, 10):
        _advance_to_minute(target, minute)
        name = f"hist-{_minutes(minute)}"
        target.wait_for(
            lambda name=name: name in [j["metadata"]["name"] for j in _jobs(target)], what=name
        )
        _finish_jobs_pod(target, name)
    target.wait_for(
        lambda: [j["metadata"]["name"] for j in _jobs(target)] == [f"hist-{_minutes(10)}"],
        what="only the newest successful job kept",
    )


@EMULATOR_ONLY
def test_deleting_a_cronjob_collects_its_jobs(clocked_target: Target) -> None:
    target = clocked_target
    _create(target, "gone")
    _advance_to_minute(target, 5)
    target.wait_for(lambda: _jobs(target), what="a job")
    target.batch.delete_namespaced_cron_job("gone", target.namespace)  # batch/v1: background
    target.wait_for(lambda: not _jobs(target), what="the cronjob's jobs to be collected")
    target.wait_for(
        lambda: not target.core.list_namespaced_pod(target.namespace).items,
        what="the jobs' pods to be collected",
    )
