"""Which cron expressions a schedule may carry (:func:`cron_problem`): the SDK's ``Schedule`` and
the store's ``ScheduleCreate`` (so the server's ``POST /schedules``) apply the same rule.

Invariant: an accepted expression parses and names a time that comes: one that names only dates
that do not exist (``0 0 30 2 *``, February 30th) never fires and is refused, never stored.
"""

from __future__ import annotations

from datetime import UTC, datetime


def cron_problem(expression: str) -> str | None:
    """Why ``expression`` cannot be a schedule's cron expression (one line), or None."""
    from croniter import croniter

    shown = repr(expression[:100])
    if not croniter.is_valid(expression):
        return f"Invalid cron expression {shown}."
    try:
        croniter(expression, datetime.now(UTC)).get_next(datetime)
    except Exception:  # croniter's CroniterBadDateError: it found no such date
        return f"Cron expression {shown} never fires: it names no date that exists."
    return None
