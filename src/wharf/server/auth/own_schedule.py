"""What a schedule-scoped token may do: fire its schedule's runs, and nothing else.

A schedule handed to a cluster (a Kubernetes CronJob) holds a token of its schedule, issued by an
account that may create runs in the schedule's project (``POST /schedules/{id}/token``), never
that account's own credential. It may read its schedule and snapshot and fire a run (``routes``,
:func:`check_route`); the run token a firing returns serves everything else (``own_run``).

Invariants: every other route is refused before it runs (403; 404 for a schedule or snapshot of
another project, or unknown); a schedule token never issues a token but through a firing; it is
valid while its schedule exists and its issuer may still write in the schedule's project (both
checked on every request, never cached), and is bound to the issuing API key or user token
generation as a run token is.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from wharf.core.errors import EntityNotFoundError, IllegalOperationError
from wharf.server.auth.errors import PermissionDeniedError
from wharf.server.auth.principal import ScheduleScope
from wharf.store.models import RunMetadataRecord, ScheduleRecord
from wharf.store.schedule_window import OUTSIDE_WINDOW, in_window

SCHEDULE_ID_KEY = "schedule_id"
SCHEDULE_NAME_KEY = "schedule_name"
"""Run metadata keys that record a fired run's schedule (the keys an orchestrator pod on a SQL
store writes itself)."""


@dataclass(frozen=True)
class RouteKey:
    """A request's route: its method and path template, and the path's parameters."""

    method: str
    template: str
    params: Mapping[str, str]


_ROUTES: dict[tuple[str, str], tuple[str, str]] = {
    ("GET", "/api/v1/schedules/{schedule_id}"): ("schedule", "schedule_id"),
    ("POST", "/api/v1/schedules/{schedule_id}/runs"): ("schedule", "schedule_id"),
    ("GET", "/api/v1/snapshots/{snapshot_id}"): ("snapshot", "snapshot_id"),
}
"""The routes open to a schedule token: (kind, path parameter) of the one thing each reaches,
which must be the token's own schedule or snapshot. Reading the schedule tells the firing process
whether it is paused and its start and end times; ``POST .../runs`` gets or creates the run of
the schedule's snapshot with the orchestrator run id it names, recorded with the schedule
(:func:`fired_metadata`), together with a run token for that run."""

ProjectOf = Callable[[str, UUID], UUID]
"""The project of a schedule or snapshot id (``EntityNotFoundError`` for an unknown one)."""


def routes() -> frozenset[tuple[str, str]]:
    """The (method, path template) of every route a schedule token may call."""
    return frozenset(_ROUTES)


def check_route(scope: ScheduleScope, route: RouteKey | None, project_of: ProjectOf) -> None:
    """Allow a schedule token's request only on a route of ``routes()`` and for its own
    schedule or snapshot; else 403, or 404 when the thing is of another project or unknown."""
    target = None if route is None else _ROUTES.get((route.method, route.template))
    if route is None or target is None:
        raise PermissionDeniedError(
            "A schedule-scoped token may only read its schedule and snapshot and fire its "
            "schedule's runs."
        )
    kind, param = target
    try:
        wanted = UUID(route.params[param])
    except (KeyError, ValueError):
        raise EntityNotFoundError(f"No {kind} with id {route.params.get(param)}.") from None
    own = scope.schedule_id if kind == "schedule" else scope.snapshot_id
    if wanted == own:
        return
    if project_of(kind, wanted) != scope.project_id:
        raise EntityNotFoundError(f"No {kind} with id {wanted}.")
    raise PermissionDeniedError(f"A schedule-scoped token may only reach its own {kind}.")


def check_may_create(schedule: ScheduleRecord) -> None:
    """A paused schedule fires no new run (a run it fired before may still get a token: its pod
    may restart)."""
    if not schedule.active:
        raise PermissionDeniedError(f"Schedule '{schedule.name}' is paused: it fires no run.")


def check_in_window(schedule: ScheduleRecord, now: datetime) -> None:
    """A schedule fires no new run before its start time or after its end time (409; the rule
    its fired pod applies: ``wharf.store.schedule_window``)."""
    if not in_window(schedule, now):
        raise IllegalOperationError(
            f"Schedule '{schedule.name}' {OUTSIDE_WINDOW} "
            f"({_shown(schedule.start_time)} to {_shown(schedule.end_time)}): it fires no run "
            "now."
        )


def _shown(moment: datetime | None) -> str:
    return "unbounded" if moment is None else moment.isoformat()


def check_issuer_may_create(can_write: bool, schedule: ScheduleRecord) -> None:
    """The account behind a schedule token must still be allowed to create runs."""
    if not can_write:
        raise PermissionDeniedError(
            f"The account that issued this schedule token may no longer create runs in "
            f"project {schedule.project_id}."
        )


def fired_by(records: Sequence[RunMetadataRecord]) -> UUID | None:
    """The schedule a run's metadata records it was fired by (the latest value), if any."""
    values = [str(r.value) for r in records if r.key == SCHEDULE_ID_KEY]
    if not values:
        return None
    try:
        return UUID(values[-1])
    except ValueError:
        return None


def check_fired_run(schedule: ScheduleRecord, records: Sequence[RunMetadataRecord]) -> None:
    """A found run of the firing's orchestrator run id must be one ``schedule`` fired (a run of
    another snapshot is never found)."""
    if fired_by(records) != schedule.id:
        raise PermissionDeniedError(
            f"That orchestrator run id names a run that schedule '{schedule.name}' did not "
            "fire; a schedule-scoped token reaches only its schedule's runs."
        )


def fired_metadata(schedule: ScheduleRecord) -> dict[str, str]:
    """The run metadata that records a fired run's schedule."""
    return {SCHEDULE_ID_KEY: str(schedule.id), SCHEDULE_NAME_KEY: schedule.name}
