"""The CronJob controller (batch/v1) of the emulator, modelled on the 1.2x "v2" controller.

``sync_status(cronjob)`` (run on every change of a Job the CronJob controls) keeps
``status.active`` to the unfinished Jobs it controls, moves ``status.lastSuccessfulTime`` forward
when an active Job completes, and enforces ``successfulJobsHistoryLimit`` (default 3) and
``failedJobsHistoryLimit`` (default 1) by deleting the oldest finished Jobs (by startTime,
Background propagation). ``schedule(cronjob, now)`` (run on ``tick``) starts the most recent
missed time since ``status.lastScheduleTime`` (or creation), computed with croniter in
``spec.timeZone`` (UTC when unset), unless ``spec.suspend``, the ``startingDeadlineSeconds``
window has passed, or ``concurrencyPolicy: Forbid`` sees an active Job; ``Replace`` deletes the
active Jobs first. The Job is named ``<cronjob>-<scheduled time in minutes since the epoch>``
(so a time is never started twice) and carries the CronJob's controller reference and the
``batch.kubernetes.io/cronjob-scheduled-timestamp`` annotation. A skipped time leaves
``lastScheduleTime`` alone, as a real controller does, so it is retried on the next tick.
Events (with a recorder): SuccessfulCreate, SawCompletedJob, SuccessfulDelete.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

from tests.kube.emulator.clock import rfc3339
from tests.kube.emulator.controllers_common import (
    controller_reference,
    is_controlled_by,
    is_deleting,
    job_finished,
    log,
    meta,
    timestamp,
    tolerate_missing,
    uid_of,
)
from tests.kube.emulator.controllers_events import NORMAL, EventRecorder
from tests.kube.emulator.errors import ApiError
from tests.kube.emulator.resources import CRONJOBS, JOBS

if TYPE_CHECKING:
    from tests.kube.emulator.store import ObjectStore

SCHEDULED_TIMESTAMP_ANNOTATION = "batch.kubernetes.io/cronjob-scheduled-timestamp"
DEFAULT_SUCCESSFUL_HISTORY = 3
DEFAULT_FAILED_HISTORY = 1


class CronJobController:
    """Starts Jobs from CronJobs on schedule and keeps their status and history."""

    def __init__(self, store: ObjectStore, *, events: EventRecorder | None = None) -> None:
        self._store = store
        self._events = events

    def tick(self, now: datetime) -> None:
        for cronjob in self._store.list(CRONJOBS, None)["items"]:
            self.sync_status(cronjob)
            current = self._reload(cronjob)
            if current is not None:
                self.schedule(current, now)

    def job_event(self, job: dict[str, Any]) -> None:
        """A Job changed or went away: resync the CronJob controlling it, if any."""
        for ref in meta(job).get("ownerReferences") or []:
            if ref.get("controller") and ref.get("kind") == "CronJob":
                try:
                    cronjob = self._store.get(CRONJOBS, meta(job).get("namespace"), ref["name"])
                except ApiError:
                    return
                if uid_of(cronjob) == ref.get("uid"):
                    self.sync_status(cronjob)
                return

    # ---- status and history ----------------------------------------------------------------

    def sync_status(self, cronjob: dict[str, Any]) -> None:
        """Refresh ``status.active``/``lastSuccessfulTime`` and trim the finished-Job history."""
        current = self._reload(cronjob)
        if current is None or is_deleting(current):
            return
        cronjob = current
        jobs = self._jobs_of(cronjob)
        by_uid = {uid_of(j): j for j in jobs}
        status = copy.deepcopy(cronjob.get("status") or {})
        last_success = timestamp(cronjob, "status", "lastSuccessfulTime")
        active = []
        for ref in status.get("active") or []:
            job = by_uid.get(ref.get("uid", ""))
            if job is None:
                continue  # gone (a real controller records a MissingJob event)
            if job_finished(job):
                self._record(
                    cronjob,
                    NORMAL,
                    "SawCompletedJob",
                    f"Saw completed job: {meta(job)['name']}, status: {job_finished(job)}",
                )
            if job_finished(job) == "Complete":
                completed = timestamp(job, "status", "completionTime")
                if completed is not None and (last_success is None or completed > last_success):
                    last_success = completed
            if not job_finished(job):
                active.append(ref)
        known = {ref.get("uid") for ref in active}
        for job in jobs:
            if not job_finished(job) and uid_of(job) not in known and not is_deleting(job):
                active.append(_object_ref(job))
        _set_or_drop(status, "active", active)
        if last_success is not None:
            status["lastSuccessfulTime"] = rfc3339(last_success)
        self._write_status(cronjob, status)
        self._trim_history(cronjob, jobs)

    def _trim_history(self, cronjob: dict[str, Any], jobs: list[dict[str, Any]]) -> None:
        spec = cronjob.get("spec") or {}
        for outcome, key, default in (
            ("Complete", "successfulJobsHistoryLimit", DEFAULT_SUCCESSFUL_HISTORY),
            ("Failed", "failedJobsHistoryLimit", DEFAULT_FAILED_HISTORY),
        ):
            limit = spec.get(key, default)
            if limit is None:
                continue
            finished = [j for j in jobs if job_finished(j) == outcome and not is_deleting(j)]
            finished.sort(key=_start_order)
            for job in finished[: max(0, len(finished) - int(limit))]:
                self._delete_job(cronjob, meta(job)["name"])

    # ---- scheduling --------------------------------------------------------------------------

    def schedule(self, cronjob: dict[str, Any], now: datetime) -> None:
        spec = cronjob.get("spec") or {}
        if is_deleting(cronjob) or spec.get("suspend"):
            return
        scheduled = _most_recent_due(cronjob, now)
        if scheduled is None:
            return
        deadline = spec.get("startingDeadlineSeconds")
        if deadline is not None and scheduled + timedelta(seconds=int(deadline)) < now:
            return  # missed the starting window (a real controller records MissSchedule)
        name = f"{meta(cronjob)['name']}-{int(scheduled.timestamp()) // 60}"
        status = cronjob.get("status") or {}
        active = list(status.get("active") or [])
        if any(ref.get("name") == name for ref in active):
            return
        if timestamp(cronjob, "status", "lastScheduleTime") == scheduled:
            return
        policy = spec.get("concurrencyPolicy") or "Allow"
        if policy == "Forbid" and active:
            return  # JobAlreadyActive: retried on the next tick
        if policy == "Replace":
            for ref in active:
                self._delete_job(cronjob, ref["name"])
        job = self._create_job(cronjob, name, scheduled)
        if job is None:
            return
        self._record(cronjob, NORMAL, "SuccessfulCreate", f"Created job {name}")
        ref = _object_ref(job)
        replaced = {r.get("uid") for r in active} if policy == "Replace" else set()
        scheduled_stamp = rfc3339(scheduled)

        def mutate(current: dict[str, Any]) -> None:
            if uid_of(current) != uid_of(cronjob):
                return
            current_status = current.setdefault("status", {})
            refs = [r for r in current_status.get("active") or [] if r.get("uid") not in replaced]
            if not any(r.get("uid") == ref["uid"] for r in refs):
                refs.append(ref)
            current_status["active"] = refs
            current_status["lastScheduleTime"] = scheduled_stamp

        ns, cj_name = meta(cronjob).get("namespace"), meta(cronjob)["name"]
        tolerate_missing(lambda: self._store.update_internal(CRONJOBS, ns, cj_name, mutate))

    def _create_job(
        self, cronjob: dict[str, Any], name: str, scheduled: datetime
    ) -> dict[str, Any] | None:
        template = copy.deepcopy((cronjob.get("spec") or {}).get("jobTemplate") or {})
        template_meta = template.get("metadata") or {}
        annotations = dict(template_meta.get("annotations") or {})
        annotations[SCHEDULED_TIMESTAMP_ANNOTATION] = scheduled.astimezone(
            _zone(cronjob) or UTC
        ).isoformat()
        if annotations[SCHEDULED_TIMESTAMP_ANNOTATION].endswith("+00:00"):
            annotations[SCHEDULED_TIMESTAMP_ANNOTATION] = rfc3339(scheduled)
        job_meta: dict[str, Any] = {
            "name": name,
            "annotations": annotations,
            "ownerReferences": [controller_reference(cronjob, CRONJOBS)],
        }
        if template_meta.get("labels"):
            job_meta["labels"] = dict(template_meta["labels"])
        body = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": job_meta,
            "spec": template.get("spec") or {},
        }
        ns = meta(cronjob).get("namespace")
        try:
            return self._store.create(JOBS, ns, body, internal=True)
        except ApiError as err:
            if err.code != 409:
                log.info("cronjob %s/%s: job not created: %s", ns, meta(cronjob)["name"], err)
                return None
        # AlreadyExists: adopt it if this CronJob controls it (another sync created it)
        existing = tolerate_missing(lambda: self._store.get(JOBS, ns, name))
        if existing is not None and is_controlled_by(existing, uid_of(cronjob)):
            return existing
        return None

    # ---- store access ------------------------------------------------------------------------

    def _jobs_of(self, cronjob: dict[str, Any]) -> list[dict[str, Any]]:
        uid = uid_of(cronjob)
        controlled = partial(is_controlled_by, owner_uid=uid)
        return self._store.matching(JOBS, meta(cronjob).get("namespace"), controlled)

    def _reload(self, cronjob: dict[str, Any]) -> dict[str, Any] | None:
        current = tolerate_missing(
            lambda: self._store.get(CRONJOBS, meta(cronjob).get("namespace"), meta(cronjob)["name"])
        )
        return current if current is not None and uid_of(current) == uid_of(cronjob) else None

    def _delete_job(self, cronjob: dict[str, Any], name: str) -> None:
        ns = meta(cronjob).get("namespace")
        deleted = tolerate_missing(
            partial(self._store.delete, JOBS, ns, name, propagation_policy="Background")
        )
        if deleted is not None:
            self._record(cronjob, NORMAL, "SuccessfulDelete", f"Deleted job {name}")

    def _record(self, cronjob: dict[str, Any], event_type: str, reason: str, message: str) -> None:
        if self._events is not None:
            self._events.record(cronjob, CRONJOBS, event_type, reason, message)

    def _write_status(self, cronjob: dict[str, Any], status: dict[str, Any]) -> None:
        if status == (cronjob.get("status") or {}):
            return
        uid = uid_of(cronjob)

        def mutate(current: dict[str, Any]) -> None:
            if uid_of(current) == uid:
                current["status"] = copy.deepcopy(status)

        ns, name = meta(cronjob).get("namespace"), meta(cronjob)["name"]
        tolerate_missing(lambda: self._store.update_internal(CRONJOBS, ns, name, mutate))


# ---- pure helpers ------------------------------------------------------------------------------


def _zone(cronjob: dict[str, Any]) -> ZoneInfo | None:
    name = (cronjob.get("spec") or {}).get("timeZone")
    if not name:
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return None


def _schedule_and_zone(cronjob: dict[str, Any]) -> tuple[str, ZoneInfo | None]:
    """The cron expression, and its zone (``spec.timeZone`` or a ``TZ=``/``CRON_TZ=`` prefix)."""
    spec = cronjob.get("spec") or {}
    expression = str(spec.get("schedule") or "").strip()
    zone = _zone(cronjob)
    if spec.get("timeZone") and zone is None:
        return "", None  # an unknown zone: a real controller records UnknownTimeZone, starts none
    for prefix in ("CRON_TZ=", "TZ="):
        if expression.startswith(prefix):
            tz_name, _, expression = expression[len(prefix) :].partition(" ")
            try:
                zone = ZoneInfo(tz_name)
            except (ZoneInfoNotFoundError, ValueError):
                return "", None
    return expression.strip(), zone


def _most_recent_due(cronjob: dict[str, Any], now: datetime) -> datetime | None:
    """The latest scheduled time in (earliest, now], or None when nothing is due.

    ``earliest`` is lastScheduleTime (else creationTimestamp), moved up to ``now -
    startingDeadlineSeconds`` when that is later, as the real controller bounds its search.
    """
    expression, zone = _schedule_and_zone(cronjob)
    if not expression:
        return None
    earliest = timestamp(cronjob, "status", "lastScheduleTime") or timestamp(
        cronjob, "metadata", "creationTimestamp"
    )
    if earliest is None:
        return None
    deadline = (cronjob.get("spec") or {}).get("startingDeadlineSeconds")
    if deadline is not None:
        earliest = max(earliest, now - timedelta(seconds=int(deadline)))
    # croniter's get_prev is strictly before its start: start just after ``now``'s whole second
    start = (now.replace(microsecond=0) + timedelta(seconds=1)).astimezone(zone or UTC)
    try:
        latest: datetime = croniter(expression, start).get_prev(datetime)
    except (ValueError, KeyError) as err:
        log.info("cronjob %s: bad schedule %r: %s", meta(cronjob).get("name"), expression, err)
        return None
    latest = latest.astimezone(UTC)
    return latest if earliest < latest <= now else None


def _object_ref(job: dict[str, Any]) -> dict[str, Any]:
    """An ObjectReference to a Job, as ``status.active`` holds it."""
    return {
        "kind": "Job",
        "namespace": meta(job).get("namespace"),
        "name": meta(job)["name"],
        "uid": uid_of(job),
        "apiVersion": "batch/v1",
        "resourceVersion": str(meta(job).get("resourceVersion", "")),
    }


def _start_order(job: dict[str, Any]) -> tuple[int, str, str]:
    """Oldest first by status.startTime; Jobs never started sort last (then by name)."""
    started = (job.get("status") or {}).get("startTime")
    return (0 if started else 1, started or "", meta(job)["name"])


def _set_or_drop(status: dict[str, Any], key: str, value: list[Any]) -> None:
    if value:
        status[key] = value
    else:
        status.pop(key, None)
