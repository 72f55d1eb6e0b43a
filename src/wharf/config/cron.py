"""Which cron expressions a schedule may carry (:func:`cron_problem`): the SDK's ``Schedule`` and
the store's ``ScheduleCreate`` (so the server's ``POST /schedules``) apply the same rule.

Invariants: an accepted expression parses and names a time that comes: one that names only dates
that do not exist (``0 0 30 2 *``, February 30th) never fires and is refused, never stored. It
has the five standard fields or is a macro (``@daily``): croniter reads a sixth field as seconds
and a seventh as years, which no scheduler Wharf hands a schedule to fires on (a Kubernetes
CronJob takes five fields; other orchestrators run the pipeline once and fire nothing), so such
an expression is refused rather than stored to fire differently or never.

:func:`ended_problem`: a schedule whose end time has passed fires nothing, so it is refused when
it is created (the server's ``POST /schedules`` on its clock, the SDK's call of a scheduled
pipeline). Not by ``Schedule`` itself: a snapshot's spec is read back (and its ``Schedule``
validated again) long after its schedule ended.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta


def cron_problem(expression: str) -> str | None:
    """Why ``expression`` cannot be a schedule's cron expression (one line), or None."""
    from croniter import croniter

    shown = repr(expression[:100])
    if not croniter.is_valid(expression):
        return f"Invalid cron expression {shown}."
    fields = len(expression.split())
    if not expression.strip().startswith("@") and fields != 5:
        return (
            f"Cron expression {shown} has {fields} fields: a schedule takes five fields "
            "(minute hour day-of-month month day-of-week, e.g. '0 3 * * *') or a macro such as "
            "@daily; seconds and years are not supported."
        )
    try:
        croniter(expression, datetime.now(UTC)).get_next(datetime)
    except Exception:  # croniter's CroniterBadDateError: it found no such date
        return f"Cron expression {shown} never fires: it names no date that exists."
    return None


def ended_problem(end_time: datetime | None, now: datetime) -> str | None:
    """Why a schedule ending at ``end_time`` cannot be created at ``now`` (one line), or None.
    A naive time is UTC, as everywhere in Wharf."""
    if end_time is None:
        return None
    end = end_time.replace(tzinfo=UTC) if end_time.tzinfo is None else end_time
    if end > now:
        return None
    shown = end.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return (
        f"The schedule's end_time ({shown}) has already passed, so it would never fire: give a "
        "later end_time, or none."
    )


def window_problem(expression: str, start: datetime | None, end: datetime | None) -> str | None:
    """Why the valid cron ``expression`` never fires from ``start`` to before ``end`` (both
    given, aware), or None."""
    from croniter import croniter

    if start is None or end is None:
        return None
    since = start.astimezone(UTC) - timedelta(microseconds=1)  # cron fields are in UTC
    first: datetime = croniter(expression, since).get_next(datetime)
    if first < end:
        return None
    shown = [t.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC") for t in (start, end)]
    return (
        f"Cron expression {expression[:100]!r} never fires between the schedule's start_time "
        f"({shown[0]}) and end_time ({shown[1]}): its first time is "
        f"{first.astimezone(UTC).strftime('%Y-%m-%d %H:%M:%S UTC')}."
    )
