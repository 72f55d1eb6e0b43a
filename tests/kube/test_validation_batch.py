"""Validation of Jobs, CronJobs and cron schedules in the kube emulator."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.kube.emulator.cron import parse_schedule, schedule_errors
from tests.kube.emulator.resources import CRONJOBS, JOBS
from tests.kube.emulator.validation import validate
from tests.kube.validation_cases import causes, cronjob, fields, job


def _template_spec(obj: dict[str, Any]) -> dict[str, Any]:
    return obj["spec"]["template"]["spec"]


def _rules(*rules: dict[str, Any]) -> dict[str, Any]:
    return {"rules": list(rules)}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"backoffLimit": -1}, {("FieldValueInvalid", "spec.backoffLimit")}),
        ({"activeDeadlineSeconds": -5}, {("FieldValueInvalid", "spec.activeDeadlineSeconds")}),
        ({"ttlSecondsAfterFinished": -1}, {("FieldValueInvalid", "spec.ttlSecondsAfterFinished")}),
        ({"parallelism": -1}, {("FieldValueInvalid", "spec.parallelism")}),
        ({"completions": -1}, {("FieldValueInvalid", "spec.completions")}),
        ({"selector": None}, {("FieldValueRequired", "spec.selector")}),
        (
            {"selector": {"matchLabels": {"controller-uid": "other"}}},
            {("FieldValueInvalid", "spec.template.metadata.labels")},
        ),
        (
            {"selector": {"matchExpressions": [{"key": "a", "operator": "In", "values": []}]}},
            {("FieldValueRequired", "spec.selector.matchExpressions[0].values")},
        ),
        (
            {"selector": {"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]}},
            {("FieldValueInvalid", "spec.selector.matchExpressions[0].operator")},
        ),
        (
            {
                "podFailurePolicy": _rules(
                    {"action": "Retry", "onExitCodes": {"operator": "In", "values": [1]}}
                )
            },
            {("FieldValueNotSupported", "spec.podFailurePolicy.rules[0].action")},
        ),
        (
            {"podFailurePolicy": _rules({"action": "FailJob"})},
            {("FieldValueInvalid", "spec.podFailurePolicy.rules[0]")},
        ),
        (
            {
                "podFailurePolicy": _rules(
                    {
                        "action": "FailJob",
                        "onExitCodes": {"operator": "In", "values": [1]},
                        "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
                    }
                )
            },
            {("FieldValueInvalid", "spec.podFailurePolicy.rules[0]")},
        ),
        (
            {
                "podFailurePolicy": _rules(
                    {"action": "FailJob", "onExitCodes": {"operator": "Is", "values": [1]}}
                )
            },
            {("FieldValueNotSupported", "spec.podFailurePolicy.rules[0].onExitCodes.operator")},
        ),
        (
            {
                "podFailurePolicy": _rules(
                    {"action": "FailJob", "onExitCodes": {"operator": "In", "values": []}}
                )
            },
            {("FieldValueInvalid", "spec.podFailurePolicy.rules[0].onExitCodes.values")},
        ),
        (
            {
                "podFailurePolicy": _rules(
                    {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [0, 1]}}
                )
            },
            {("FieldValueInvalid", "spec.podFailurePolicy.rules[0].onExitCodes.values[0]")},
        ),
        (
            {
                "podFailurePolicy": _rules(
                    {"action": "Count", "onExitCodes": {"operator": "NotIn", "values": [3, 1]}}
                )
            },
            {("FieldValueInvalid", "spec.podFailurePolicy.rules[0].onExitCodes.values")},
        ),
        (
            {
                "podFailurePolicy": _rules(
                    {"action": "Count", "onExitCodes": {"operator": "NotIn", "values": [1, 1]}}
                )
            },
            {("FieldValueDuplicate", "spec.podFailurePolicy.rules[0].onExitCodes.values[1]")},
        ),
        (
            {
                "podFailurePolicy": _rules(
                    {
                        "action": "FailJob",
                        "onExitCodes": {"containerName": "nope", "operator": "In", "values": [1]},
                    }
                )
            },
            {("FieldValueInvalid", "spec.podFailurePolicy.rules[0].onExitCodes.containerName")},
        ),
        (
            {
                "podFailurePolicy": _rules(
                    {
                        "action": "Ignore",
                        "onPodConditions": [{"type": "DisruptionTarget", "status": "Maybe"}],
                    }
                )
            },
            {
                (
                    "FieldValueNotSupported",
                    "spec.podFailurePolicy.rules[0].onPodConditions[0].status",
                )
            },
        ),
    ],
)
def test_invalid_job_specs(spec: dict[str, Any], expected: set[tuple[str, str]]) -> None:
    obj = job(**spec)
    if obj["spec"].get("selector") is None:
        del obj["spec"]["selector"]
    assert fields(JOBS, obj) == expected


@pytest.mark.parametrize("policy", ["Always", "", "Sometimes"])
def test_job_template_restart_policy_must_be_on_failure_or_never(policy: str) -> None:
    obj = job()
    _template_spec(obj)["restartPolicy"] = policy
    found = causes(JOBS, obj)
    assert (
        "FieldValueNotSupported",
        "spec.template.spec.restartPolicy",
        f'Unsupported value: "{policy}": supported values: "OnFailure", "Never"',
    ) in found


def test_pod_failure_policy_needs_restart_policy_never() -> None:
    obj = job(
        podFailurePolicy=_rules(
            {"action": "Ignore", "onExitCodes": {"operator": "In", "values": [2]}}
        )
    )
    _template_spec(obj)["restartPolicy"] = "OnFailure"
    [(reason, field, message)] = causes(JOBS, obj)
    assert (reason, field) == ("FieldValueInvalid", "spec.template.spec.restartPolicy")
    assert (
        message
        == 'Invalid value: "OnFailure": only "Never" is supported when podFailurePolicy is specified'
    )


def test_pod_failure_policy_rule_details() -> None:
    obj = job(
        podFailurePolicy=_rules(
            {"onExitCodes": {"values": [1]}},
            {"action": "FailIndex", "onPodConditions": [{"type": "Ready"}]},
        )
    )
    found = causes(JOBS, obj)
    assert found == [
        (
            "FieldValueRequired",
            "spec.podFailurePolicy.rules[0].action",
            'Required value: valid values: ["Count" "FailJob" "Ignore"]',
        ),
        (
            "FieldValueRequired",
            "spec.podFailurePolicy.rules[0].onExitCodes.operator",
            'Required value: valid values: ["In" "NotIn"]',
        ),
        (
            "FieldValueInvalid",
            "spec.podFailurePolicy.rules[1].action",
            'Invalid value: "FailIndex": requires the backoffLimitPerIndex to be set',
        ),
        (
            "FieldValueRequired",
            "spec.podFailurePolicy.rules[1].onPodConditions[0].status",
            'Required value: valid values: ["False" "True" "Unknown"]',
        ),
    ]


def test_pod_failure_policy_with_restart_policy_always_reports_the_policy_once() -> None:
    obj = job(
        podFailurePolicy=_rules(
            {"action": "Ignore", "onExitCodes": {"operator": "In", "values": [2]}}
        )
    )
    _template_spec(obj)["restartPolicy"] = "Always"
    assert fields(JOBS, obj) == {("FieldValueNotSupported", "spec.template.spec.restartPolicy")}


def test_job_template_pod_spec_is_validated_with_its_path() -> None:
    obj = job()
    _template_spec(obj)["containers"][0]["image"] = ""
    assert fields(JOBS, obj) == {("FieldValueRequired", "spec.template.spec.containers[0].image")}


def test_job_invalid_message_names_the_kind() -> None:
    obj = job(backoffLimit=-1)
    [(_, _, message)] = causes(JOBS, obj)
    assert message == "Invalid value: -1: must be greater than or equal to 0"


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            lambda j: j["spec"]["template"]["spec"]["containers"][0].update(image="new"),
            {("FieldValueInvalid", "spec.template")},
        ),
        (
            lambda j: j["spec"].update(selector={"matchLabels": {"controller-uid": "u", "x": "y"}}),
            {
                ("FieldValueInvalid", "spec.selector"),
                ("FieldValueInvalid", "spec.template.metadata.labels"),
            },
        ),
        (lambda j: j["spec"].update(completions=3), {("FieldValueInvalid", "spec.completions")}),
    ],
)
def test_job_immutable_fields(change: Any, expected: set[tuple[str, str]]) -> None:
    old = job(completions=1)
    new = copy.deepcopy(old)
    change(new)
    assert fields(JOBS, new, old) == expected


@pytest.mark.parametrize(
    "change",
    [
        lambda j: j["spec"].update(suspend=True),
        lambda j: j["spec"].update(activeDeadlineSeconds=60),
        lambda j: j["spec"].update(backoffLimit=2),
        lambda j: j["metadata"].update(labels={"a": "b"}),
        lambda j: j.update(status={"active": 1}),
    ],
)
def test_job_mutable_fields(change: Any) -> None:
    old = job()
    new = copy.deepcopy(old)
    change(new)
    validate(JOBS, new, old=old)


# --- cronjobs -----------------------------------------------------------------------------------


def _job_template_spec(obj: dict[str, Any]) -> dict[str, Any]:
    return obj["spec"]["jobTemplate"]["spec"]


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"schedule": ""}, {("FieldValueRequired", "spec.schedule")}),
        ({"schedule": "* * * *"}, {("FieldValueInvalid", "spec.schedule")}),
        ({"schedule": "61 * * * *"}, {("FieldValueInvalid", "spec.schedule")}),
        ({"schedule": "@fortnightly"}, {("FieldValueInvalid", "spec.schedule")}),
        (
            {"concurrencyPolicy": "Sometimes"},
            {("FieldValueNotSupported", "spec.concurrencyPolicy")},
        ),
        ({"concurrencyPolicy": ""}, {("FieldValueRequired", "spec.concurrencyPolicy")}),
        ({"startingDeadlineSeconds": -1}, {("FieldValueInvalid", "spec.startingDeadlineSeconds")}),
        (
            {"successfulJobsHistoryLimit": -1},
            {("FieldValueInvalid", "spec.successfulJobsHistoryLimit")},
        ),
        ({"failedJobsHistoryLimit": -1}, {("FieldValueInvalid", "spec.failedJobsHistoryLimit")}),
        ({"timeZone": "Mars/Olympus"}, {("FieldValueInvalid", "spec.timeZone")}),
    ],
)
def test_invalid_cronjob_specs(spec: dict[str, Any], expected: set[tuple[str, str]]) -> None:
    assert fields(CRONJOBS, cronjob(**spec)) == expected


def test_cronjob_job_template_is_validated_as_a_job_spec() -> None:
    obj = cronjob()
    _job_template_spec(obj)["template"]["spec"]["restartPolicy"] = "Always"
    _job_template_spec(obj)["backoffLimit"] = -1
    _job_template_spec(obj)["selector"] = {"matchLabels": {"a": "b"}}
    obj["spec"]["jobTemplate"]["metadata"] = {"labels": {"bad key": "v"}}
    assert fields(CRONJOBS, obj) == {
        ("FieldValueNotSupported", "spec.jobTemplate.spec.template.spec.restartPolicy"),
        ("FieldValueInvalid", "spec.jobTemplate.spec.backoffLimit"),
        ("FieldValueInvalid", "spec.jobTemplate.spec.selector"),
        ("FieldValueInvalid", "spec.jobTemplate.metadata.labels"),
    }


def test_schedule_message() -> None:
    [(_, _, message)] = causes(CRONJOBS, cronjob(schedule="* * * *"))
    assert message == 'Invalid value: "* * * *": Expected exactly 5 fields, found 4: * * * *'


@pytest.mark.parametrize(
    "schedule",
    [
        "* * * * *",
        "*/15 * * * *",
        "0 0 * * *",
        "0,30 9-17 * * MON-FRI",
        "0 12 1 jan,Jul *",
        "5/10 * * * *",
        "0 0 1-31/2 * ?",
        "59 23 31 12 6",
        "@hourly",
        "@daily",
        "@midnight",
        "@weekly",
        "@monthly",
        "@yearly",
        "@annually",
        "@every 1h30m",
    ],
)
def test_valid_schedules(schedule: str) -> None:
    assert schedule_errors(schedule) is None


@pytest.mark.parametrize(
    ("schedule", "message"),
    [
        ("", "Expected exactly 5 fields, found 0: "),
        ("* * * * * *", "Expected exactly 5 fields, found 6: * * * * * *"),
        ("60 * * * *", "End of range (60) above maximum (59): 60"),
        ("* 24 * * *", "End of range (24) above maximum (23): 24"),
        ("* * 0 * *", "Beginning of range (0) below minimum (1): 0"),
        ("* * * 13 *", "End of range (13) above maximum (12): 13"),
        ("* * * * 7", "End of range (7) above maximum (6): 7"),
        ("5-1 * * * *", "Beginning of range (5) beyond end of range (1): 5-1"),
        ("*/0 * * * *", "Step of range should be a positive number: */0"),
        ("1/2/3 * * * *", "Too many slashes: 1/2/3"),
        ("1-2-3 * * * *", "Too many hyphens: 1-2-3"),
        ("x * * * *", 'Failed to parse int from x: strconv.Atoi: parsing "x": invalid syntax'),
        (
            "* * * FOO *",
            'Failed to parse int from FOO: strconv.Atoi: parsing "FOO": invalid syntax',
        ),
        ("@reboot", "Unrecognized descriptor: @reboot"),
        ("TZ=UTC 0 9 * * *", "Expected exactly 5 fields, found 6: TZ=UTC 0 9 * * *"),
        ("CRON_TZ=UTC 0 9 * * *", "Expected exactly 5 fields, found 6: CRON_TZ=UTC 0 9 * * *"),
    ],
)
def test_invalid_schedules(schedule: str, message: str) -> None:
    assert schedule_errors(schedule) == message


def test_parsed_schedule_values() -> None:
    schedule = parse_schedule("0,30 9-17/4 * JAN-MAR mon-fri")
    assert schedule.minutes == {0, 30}
    assert schedule.hours == {9, 13, 17}
    assert schedule.months == {1, 2, 3}
    assert schedule.days_of_week == {1, 2, 3, 4, 5}
    assert schedule.day_of_month_star and not schedule.day_of_week_star
    assert parse_schedule("@weekly").days_of_week == {0}
    assert parse_schedule("@every 90s").every_seconds == 90
