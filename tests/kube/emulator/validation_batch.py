"""Validation of Jobs and CronJobs (``batch/v1``), as a real kube-apiserver does it.

Jobs: non-negative ``parallelism``/``completions``/``activeDeadlineSeconds``/``backoffLimit``/
``ttlSecondsAfterFinished``; a pod template whose ``restartPolicy`` is ``OnFailure`` or ``Never``
(only ``Never`` with a ``podFailurePolicy``) and whose labels (``job-name`` included, so a job
name longer than 63 characters fails there, as on a server) are valid and match ``selector``;
``podFailurePolicy`` rules; on update ``selector``, ``template``, ``completions``,
``completionMode`` and ``podFailurePolicy`` are immutable. CronJobs: name ≤ 52 characters, a
valid ``schedule`` and ``timeZone``, ``concurrencyPolicy`` ∈ Allow/Forbid/Replace, non-negative
deadline and history limits, and a job template valid as a job spec (without a selector).
"""

from __future__ import annotations

from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from tests.kube.emulator.cron import schedule_errors
from tests.kube.emulator.field_errors import FieldErrors, expect
from tests.kube.emulator.names import label_value_errors, qualified_name_errors
from tests.kube.emulator.resources import ResourceType
from tests.kube.emulator.selectors import selector_from_label_selector_object
from tests.kube.emulator.validation_meta import validate_annotations, validate_labels
from tests.kube.emulator.validation_pods import validate_pod_spec

CONCURRENCY_POLICIES = ("Allow", "Forbid", "Replace")
JOB_RESTART_POLICIES = ("OnFailure", "Never")
FAILURE_POLICY_ACTIONS = ("Count", "FailJob", "Ignore")
EXIT_CODE_OPERATORS = ("In", "NotIn")
CONDITION_STATUSES = ("False", "True", "Unknown")
CRONJOB_NAME_MAX = 52
MAX_FAILURE_POLICY_RULES = 20
MAX_EXIT_CODES = 255
_JOB_IMMUTABLE = ("selector", "template", "completions", "completionMode", "podFailurePolicy")


def validate_job(
    errs: FieldErrors, rtype: ResourceType, job: dict[str, Any], old: dict[str, Any] | None
) -> None:
    spec = expect(rtype, job.get("spec"), dict, "Job.spec", "v1.JobSpec") or {}
    _validate_job_spec(errs, rtype, spec, "spec")
    selector = spec.get("selector")
    if selector is None:
        errs.required("spec.selector")
    else:
        _validate_selector(errs, rtype, selector, "spec.selector")
        try:
            matcher = selector_from_label_selector_object(selector)
        except Exception:  # an invalid selector was reported above
            matcher = None
        labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
        if matcher is not None and not matcher.matches(labels):
            errs.invalid(
                "spec.template.metadata.labels",
                labels,
                "`selector` does not match template `labels`",
            )
    if old is not None:
        old_spec = old.get("spec") or {}
        for field in _JOB_IMMUTABLE:
            if spec.get(field) != old_spec.get(field):
                errs.invalid(f"spec.{field}", spec.get(field), "field is immutable")


def validate_cronjob(
    errs: FieldErrors, rtype: ResourceType, cronjob: dict[str, Any], old: dict[str, Any] | None
) -> None:
    name = (cronjob.get("metadata") or {}).get("name") or ""
    if len(name) > CRONJOB_NAME_MAX:
        errs.invalid("metadata.name", name, f"must be no more than {CRONJOB_NAME_MAX} characters")
    spec = expect(rtype, cronjob.get("spec"), dict, "CronJob.spec", "v1.CronJobSpec") or {}
    schedule = expect(rtype, spec.get("schedule"), str, "CronJobSpec.schedule", "string")
    if not schedule:
        errs.required("spec.schedule")
    elif (problem := schedule_errors(schedule)) is not None:
        errs.invalid("spec.schedule", schedule, problem)
    time_zone = spec.get("timeZone")
    if time_zone is not None:
        try:
            ZoneInfo(str(time_zone))
        except (ZoneInfoNotFoundError, ValueError):
            errs.invalid("spec.timeZone", time_zone, f"unknown time zone {time_zone}")
    policy = spec.get("concurrencyPolicy")
    if policy == "":
        errs.required("spec.concurrencyPolicy")
    elif policy is not None and policy not in CONCURRENCY_POLICIES:
        errs.not_supported("spec.concurrencyPolicy", policy, CONCURRENCY_POLICIES)
    for field in (
        "startingDeadlineSeconds",
        "successfulJobsHistoryLimit",
        "failedJobsHistoryLimit",
    ):
        value = expect(rtype, spec.get(field), int, f"CronJobSpec.{field}", "int64")
        errs.nonnegative(f"spec.{field}", value)
    template = expect(
        rtype, spec.get("jobTemplate"), dict, "CronJobSpec.jobTemplate", "v1.JobTemplateSpec"
    )
    template = template or {}
    template_metadata = template.get("metadata") or {}
    validate_labels(
        errs, rtype, template_metadata.get("labels"), "spec.jobTemplate.metadata.labels"
    )
    validate_annotations(
        errs, rtype, template_metadata.get("annotations"), "spec.jobTemplate.metadata.annotations"
    )
    job_spec = expect(rtype, template.get("spec"), dict, "JobTemplateSpec.spec", "v1.JobSpec") or {}
    _validate_job_spec(errs, rtype, job_spec, "spec.jobTemplate.spec")
    if job_spec.get("selector") is not None:
        errs.invalid(
            "spec.jobTemplate.spec.selector",
            job_spec["selector"],
            "`selector` will be auto-generated",
        )
    if job_spec.get("manualSelector") is True:
        errs.not_supported("spec.jobTemplate.spec.manualSelector", True, ("nil", "false"))


def _validate_job_spec(
    errs: FieldErrors, rtype: ResourceType, spec: dict[str, Any], path: str
) -> None:
    for field in (
        "parallelism",
        "completions",
        "activeDeadlineSeconds",
        "backoffLimit",
        "ttlSecondsAfterFinished",
    ):
        value = expect(rtype, spec.get(field), int, f"JobSpec.{field}", "int32")
        errs.nonnegative(f"{path}.{field}", value)
    template = (
        expect(rtype, spec.get("template"), dict, "JobSpec.template", "v1.PodTemplateSpec") or {}
    )
    template_metadata = template.get("metadata") or {}
    validate_labels(errs, rtype, template_metadata.get("labels"), f"{path}.template.labels")
    validate_annotations(
        errs, rtype, template_metadata.get("annotations"), f"{path}.template.annotations"
    )
    pod_spec = expect(rtype, template.get("spec"), dict, "PodTemplateSpec.spec", "v1.PodSpec") or {}
    validate_pod_spec(errs, rtype, pod_spec, f"{path}.template.spec")
    restart_policy = pod_spec.get("restartPolicy") or ""
    if restart_policy not in JOB_RESTART_POLICIES:
        errs.not_supported(
            f"{path}.template.spec.restartPolicy", restart_policy, JOB_RESTART_POLICIES
        )
    failure_policy = spec.get("podFailurePolicy")
    if failure_policy is not None:
        if restart_policy == "OnFailure":
            errs.invalid(
                f"{path}.template.spec.restartPolicy",
                restart_policy,
                'only "Never" is supported when podFailurePolicy is specified',
            )
        containers = {
            c.get("name")
            for key in ("containers", "initContainers")
            for c in pod_spec.get(key) or []
            if isinstance(c, dict)
        }
        _validate_failure_policy(
            errs, rtype, failure_policy, f"{path}.podFailurePolicy", containers, spec
        )


def _validate_selector(errs: FieldErrors, rtype: ResourceType, selector: Any, path: str) -> None:
    selector = expect(rtype, selector, dict, "JobSpec.selector", "v1.LabelSelector") or {}
    for key, value in (selector.get("matchLabels") or {}).items():
        errs.invalid_each(f"{path}.matchLabels", key, qualified_name_errors(key))
        errs.invalid_each(f"{path}.matchLabels", value, label_value_errors(str(value)))
    for i, expression in enumerate(selector.get("matchExpressions") or []):
        here = f"{path}.matchExpressions[{i}]"
        operator = expression.get("operator")
        values = expression.get("values") or []
        if operator in ("In", "NotIn"):
            if not values:
                errs.required(
                    f"{here}.values", "must be specified when `operator` is 'In' or 'NotIn'"
                )
        elif operator in ("Exists", "DoesNotExist"):
            if values:
                errs.forbidden(
                    f"{here}.values",
                    "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                )
        else:
            errs.invalid(f"{here}.operator", operator, "not a valid selector operator")
        errs.invalid_each(
            f"{here}.key",
            expression.get("key") or "",
            qualified_name_errors(expression.get("key") or ""),
        )


def _go_list(values: tuple[str, ...]) -> str:
    """A string list as Go's ``%q`` prints it: ``["Count" "FailJob" "Ignore"]``."""
    return "[" + " ".join(f'"{v}"' for v in values) + "]"


def _validate_failure_policy(
    errs: FieldErrors,
    rtype: ResourceType,
    policy: Any,
    path: str,
    containers: set[Any],
    spec: dict[str, Any],
) -> None:
    policy = expect(rtype, policy, dict, "JobSpec.podFailurePolicy", "v1.PodFailurePolicy") or {}
    rules = (
        expect(
            rtype, policy.get("rules"), list, "PodFailurePolicy.rules", "[]v1.PodFailurePolicyRule"
        )
        or []
    )
    if len(rules) > MAX_FAILURE_POLICY_RULES:
        errs.too_many(f"{path}.rules", len(rules), MAX_FAILURE_POLICY_RULES)
    for i, item in enumerate(rules):
        rule = expect(rtype, item, dict, "PodFailurePolicy.rules", "v1.PodFailurePolicyRule") or {}
        here = f"{path}.rules[{i}]"
        action = rule.get("action") or ""
        if not action:
            errs.required(f"{here}.action", f"valid values: {_go_list(FAILURE_POLICY_ACTIONS)}")
        elif action == "FailIndex":
            if spec.get("backoffLimitPerIndex") is None:
                errs.invalid(
                    f"{here}.action", action, "requires the backoffLimitPerIndex to be set"
                )
        elif action not in FAILURE_POLICY_ACTIONS:
            errs.not_supported(f"{here}.action", action, FAILURE_POLICY_ACTIONS)
        exit_codes, conditions = rule.get("onExitCodes"), rule.get("onPodConditions") or []
        if exit_codes is not None:
            _validate_exit_codes(errs, exit_codes, f"{here}.onExitCodes", containers)
        for j, pattern in enumerate(conditions):
            pattern_path = f"{here}.onPodConditions[{j}]"
            condition_type = pattern.get("type") or ""
            errs.invalid_each(
                f"{pattern_path}.type", condition_type, qualified_name_errors(condition_type)
            )
            status = pattern.get("status") or ""
            if not status:
                errs.required(
                    f"{pattern_path}.status", f"valid values: {_go_list(CONDITION_STATUSES)}"
                )
            elif status not in CONDITION_STATUSES:
                errs.not_supported(f"{pattern_path}.status", status, CONDITION_STATUSES)
        if exit_codes is not None and conditions:
            errs.invalid_detail(
                here, "specifying both OnExitCodes and OnPodConditions is not supported"
            )
        if exit_codes is None and not conditions:
            errs.invalid_detail(
                here, "specifying one of OnExitCodes and OnPodConditions is required"
            )


def _validate_exit_codes(
    errs: FieldErrors, requirement: dict[str, Any], path: str, containers: set[Any]
) -> None:
    operator = requirement.get("operator") or ""
    if not operator:
        errs.required(f"{path}.operator", f"valid values: {_go_list(EXIT_CODE_OPERATORS)}")
    elif operator not in EXIT_CODE_OPERATORS:
        errs.not_supported(f"{path}.operator", operator, EXIT_CODE_OPERATORS)
    container = requirement.get("containerName")
    if container is not None and container not in containers:
        errs.invalid(
            f"{path}.containerName",
            container,
            "must be one of the container or initContainer names in the pod template",
        )
    values = requirement.get("values") or []
    if not values:
        errs.invalid(f"{path}.values", values, "at least one value is required")
    elif len(values) > MAX_EXIT_CODES:
        errs.too_many(f"{path}.values", len(values), MAX_EXIT_CODES)
    seen: set[Any] = set()
    for j, value in enumerate(values):
        if operator == "In" and value == 0:
            errs.invalid(f"{path}.values[{j}]", value, "must not be 0 for the In operator")
        if value in seen:
            errs.duplicate(f"{path}.values[{j}]", value)
        seen.add(value)
    if any(values[j - 1] > values[j] for j in range(1, len(values))):
        errs.invalid(f"{path}.values", values, "must be ordered")
