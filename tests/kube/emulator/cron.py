"""CronJob schedules: the standard 5-field cron syntax and the ``@`` descriptors kube accepts.

``schedule_errors(text)`` returns the problem a real server reports for ``spec.schedule`` (``None``
when the schedule is valid), worded as the cron library kube-apiserver uses words it. Fields are
minute (0-59), hour (0-23), day of month (1-31), month (1-12 or JAN-DEC) and day of week (0-6 or
SUN-SAT); each is a comma list of ``*``/``?``, ``n``, ``a-b``, optionally ``/step``. Descriptors:
``@yearly``/``@annually``, ``@monthly``, ``@weekly``, ``@daily``/``@midnight``, ``@hourly`` and
``@every <duration>``. A ``TZ=<zone>`` prefix is rejected, as kube-apiserver does (1.20 counts
it as a sixth field; newer servers want ``spec.timeZone``). ``parse_schedule`` returns the sets
of allowed values (for controllers).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_MONTHS = {
    name: i + 1
    for i, name in enumerate(
        ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
    )
}
_DAYS = {name: i for i, name in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}
_FIELDS = (
    ("minute", 0, 59, None),
    ("hour", 0, 23, None),
    ("day of month", 1, 31, None),
    ("month", 1, 12, _MONTHS),
    ("day of week", 0, 6, _DAYS),
)
DESCRIPTORS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_DURATION_RE = re.compile(r"([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+")


class ScheduleError(ValueError):
    """An invalid schedule; the message is the one a real server puts in its 422."""


@dataclass(frozen=True)
class Schedule:
    """The values each field allows; ``every_seconds`` for ``@every`` schedules."""

    minutes: frozenset[int]
    hours: frozenset[int]
    days_of_month: frozenset[int]
    months: frozenset[int]
    days_of_week: frozenset[int]
    day_of_month_star: bool
    day_of_week_star: bool
    every_seconds: float | None = None


def schedule_errors(text: str) -> str | None:
    try:
        parse_schedule(text)
    except ScheduleError as exc:
        return str(exc)
    return None


def parse_schedule(text: str) -> Schedule:
    if text.startswith("@"):
        if text.startswith("@every "):
            return _every(text, text[len("@every ") :])
        expanded = DESCRIPTORS.get(text)
        if expanded is None:
            raise ScheduleError(f"Unrecognized descriptor: {text}")
        text = expanded
    fields = text.split()
    if len(fields) != 5:
        raise ScheduleError(f"Expected exactly 5 fields, found {len(fields)}: {text}")
    sets = []
    stars = []
    for field, (_name, low, high, names) in zip(fields, _FIELDS, strict=True):
        values, star = _parse_field(field, low, high, names)
        sets.append(frozenset(values))
        stars.append(star)
    return Schedule(*sets, day_of_month_star=stars[2], day_of_week_star=stars[4])


def _every(text: str, duration: str) -> Schedule:
    if not _DURATION_RE.fullmatch(duration):
        raise ScheduleError(f"Failed to parse duration {text}: time: invalid duration {duration}")
    units = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
    seconds = sum(
        float(number) * units[unit]
        for number, _, unit in re.findall(r"([0-9]+(\.[0-9]+)?)(ns|us|µs|ms|s|m|h)", duration)
    )
    return Schedule(
        frozenset(),
        frozenset(),
        frozenset(),
        frozenset(),
        frozenset(),
        day_of_month_star=True,
        day_of_week_star=True,
        every_seconds=max(seconds, 1.0),
    )


def _parse_field(
    field: str, low: int, high: int, names: dict[str, int] | None
) -> tuple[set[int], bool]:
    values: set[int] = set()
    star = False
    for expression in field.split(","):
        part_values, part_star = _parse_range(expression, low, high, names)
        values |= part_values
        star = star or part_star
    return values, star


def _parse_range(
    expression: str, low: int, high: int, names: dict[str, int] | None
) -> tuple[set[int], bool]:
    range_and_step = expression.split("/")
    if len(range_and_step) > 2:
        raise ScheduleError(f"Too many slashes: {expression}")
    low_and_high = range_and_step[0].split("-")
    if len(low_and_high) > 2:
        raise ScheduleError(f"Too many hyphens: {expression}")
    star = low_and_high[0] in ("*", "?")
    if star:
        start, end = low, high
    else:
        start = _int_or_name(low_and_high[0], names, expression)
        end = _int_or_name(low_and_high[1], names, expression) if len(low_and_high) == 2 else start
    step = 1
    if len(range_and_step) == 2:
        step = _int_or_name(range_and_step[1], None, expression)
        if len(low_and_high) == 1 and not star:
            end = high  # "5/15" means from 5 to the end, every 15
    if start < low:
        raise ScheduleError(f"Beginning of range ({start}) below minimum ({low}): {expression}")
    if end > high:
        raise ScheduleError(f"End of range ({end}) above maximum ({high}): {expression}")
    if start > end:
        raise ScheduleError(
            f"Beginning of range ({start}) beyond end of range ({end}): {expression}"
        )
    if step <= 0:
        raise ScheduleError(f"Step of range should be a positive number: {expression}")
    return set(range(start, end + 1, step)), star and step == 1


def _int_or_name(text: str, names: dict[str, int] | None, expression: str) -> int:
    if names is not None and text.lower() in names:
        return names[text.lower()]
    if not re.fullmatch(r"[+-]?[0-9]+", text):
        raise ScheduleError(
            f'Failed to parse int from {text}: strconv.Atoi: parsing "{text}": invalid syntax'
        )
    number = int(text)
    if number < 0:
        raise ScheduleError(f"Negative number ({number}) not allowed: {expression}")
    return number
