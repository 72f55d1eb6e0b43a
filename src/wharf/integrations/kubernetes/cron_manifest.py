"""The CronJob of a schedule: the orchestrator Job as its template, fired by Kubernetes.

Owns :class:`CronJobSpec`, :func:`cron_job` and :func:`check_cron_schedule`. Pure.

Invariants: the ``jobTemplate`` is exactly the orchestrator Job a manual run creates; the name
is at most 52 characters (the controller appends ``-<11 digits>`` to name each Job); schedules
are five-field cron expressions or a macro, never with a ``TZ=`` prefix.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from wharf.core.errors import InputError
from wharf.integrations.kubernetes.labels import CRONJOB_NAME_MAX
from wharf.integrations.kubernetes.pod_template import pruned

CRON_MACROS = frozenset(
    {"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}
)


def check_cron_schedule(schedule: str) -> None:
    """InputError unless ``schedule`` is a cron expression Kubernetes takes: five fields (or a
    macro such as ``@daily``), without a ``TZ=`` prefix (the CronJob's timeZone says that)."""
    text = schedule.strip()
    if re.match(r"(CRON_)?TZ=", text):
        raise InputError(
            f"Schedule '{schedule}': Kubernetes CronJobs take no TZ= prefix; the schedule is "
            "read in the cluster's time zone."
        )
    if text in CRON_MACROS or len(text.split()) == 5:
        return
    raise InputError(
        f"Schedule '{schedule}' is not a cron expression Kubernetes takes: give five fields "
        "(minute hour day-of-month month day-of-week, e.g. '0 3 * * *') or one of "
        f"{', '.join(sorted(CRON_MACROS))}."
    )


@dataclass(frozen=True, kw_only=True)
class CronJobSpec:
    """One CronJob: its name and schedule, the Job it starts (an orchestrator Job manifest) and
    the controller's settings (None: the server's default)."""

    name: str
    schedule: str
    job: Mapping[str, Any]
    namespace: str | None = None
    """None: the Job's namespace."""
    successful_jobs_history_limit: int | None = None
    failed_jobs_history_limit: int | None = None
    concurrency_policy: str | None = None
    starting_deadline_seconds: int | None = None
    suspend: bool = False
    time_zone: str | None = None
    """An IANA name; None: the cluster's time zone."""


def cron_job(spec: CronJobSpec) -> dict[str, Any]:
    """A ``batch/v1`` CronJob whose ``jobTemplate`` is ``spec.job`` (an orchestrator Job): its
    labels, annotations and spec exactly; the CronJob carries the same labels and annotations
    and lives in the Job's namespace unless ``spec.namespace`` says otherwise."""
    if len(spec.name) > CRONJOB_NAME_MAX:
        raise ValueError(
            f"CronJob name '{spec.name}' is longer than {CRONJOB_NAME_MAX} characters."
        )
    check_cron_schedule(spec.schedule)
    job_metadata = spec.job.get("metadata") or {}
    template_metadata = pruned(
        {
            "labels": dict(job_metadata.get("labels") or {}),
            "annotations": dict(job_metadata.get("annotations") or {}),
        }
    )
    metadata = pruned(
        {
            "name": spec.name,
            "namespace": spec.namespace or job_metadata.get("namespace"),
            **copy.deepcopy(template_metadata),
        }
    )
    cron_spec = pruned(
        {
            "schedule": spec.schedule.strip(),
            "suspend": spec.suspend,
            "timeZone": spec.time_zone,
            "concurrencyPolicy": spec.concurrency_policy,
            "startingDeadlineSeconds": spec.starting_deadline_seconds,
            "successfulJobsHistoryLimit": spec.successful_jobs_history_limit,
            "failedJobsHistoryLimit": spec.failed_jobs_history_limit,
            "jobTemplate": pruned(
                {"metadata": template_metadata, "spec": copy.deepcopy(dict(spec.job["spec"]))}
            ),
        }
    )
    cron_spec["suspend"] = spec.suspend  # kept when False, so resuming is a visible change
    return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": metadata, "spec": cron_spec}
