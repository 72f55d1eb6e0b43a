"""When a recorded schedule may fire: between its start and end times (:func:`in_window`).

The one rule every firing applies: a Kubernetes CronJob's pod before it runs anything (a CronJob
knows neither time) and the workspace server before it creates a fired run
(``POST /schedules/{id}/runs``), each on its own clock.
"""

from __future__ import annotations

from datetime import UTC, datetime

from wharf.store.models import ScheduleRecord

OUTSIDE_WINDOW = "fires only between its start and end times"
"""How a refusal or skipped firing names the rule (after the schedule's name)."""


def in_window(schedule: ScheduleRecord, now: datetime) -> bool:
    """Whether ``now`` lies within the schedule's start and end times (both included; a
    missing one does not bound it)."""
    start, end = _utc(schedule.start_time), _utc(schedule.end_time)
    return (start is None or now >= start) and (end is None or now <= end)


def _utc(value: datetime | None) -> datetime | None:
    """A store may return a naive UTC time."""
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=UTC)
