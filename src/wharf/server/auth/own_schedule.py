"""What a schedule-scoped token may do: fire its schedule's runs, and nothing else.

A schedule handed to a cluster (a Kubernetes CronJob) needs a credential for runs that do not
exist yet. It holds a token of its schedule, issued by an account that may create runs in the
schedule's project (``POST /schedules/{id}/token``), never that account's own credential. With
it, the process a firing starts may only:

- read its schedule (``GET /schedules/{id}``: paused or not, its start and end times) and the
  schedule's snapshot (``GET /snapshots/{id}``);
- fire a run (``POST /schedules/{id}/runs``): get or create the run of the schedule's snapshot
  with the orchestrator run id it names, recorded with the schedule (run metadata
  ``schedule_id`` and ``schedule_name``, written by the server with the run), together with a
  run token for that run. A run of that orchestrator run id that is not recorded with this
  schedule is refused (so is a run of another snapshot: it is never found); a paused schedule
  creates no run (a run it fired before may still get a token: its pod may restart); the account
  that issued the token must still be allowed to create runs in the project.

The run token then serves everything else (``own_run``). Every other route is refused before it
runs (403; 404 for a schedule or snapshot of another project, or unknown): a schedule token never
lists, writes or reads anything else, and never issues a token but through a firing. It is valid
while its schedule exists (checked on every request, never cached: deleting the schedule revokes
it at once) and is bound to the issuing API key or user token generation as a run token is.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from uuid import UUID

from wharf.core.errors import EntityNotFoundError
from wharf.server.auth.errors import PermissionDeniedError
from wharf.server.auth.principal import ScheduleScope
from wharf.store.models import RunMetadataRecord, ScheduleRecord

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
which must be the token's own schedule or snapshot."""

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
    """A paused schedule fires no new run."""
    if not schedule.active:
        raise PermissionDeniedError(f"Schedule '{schedule.name}' is paused: it fires no run.")


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
    """A found run of the firing's orchestrator run id must be one ``schedule`` fired."""
    if fired_by(records) != schedule.id:
        raise PermissionDeniedError(
            f"That orchestrator run id names a run that schedule '{schedule.name}' did not "
            "fire; a schedule-scoped token reaches only its schedule's runs."
        )


def fired_metadata(schedule: ScheduleRecord) -> dict[str, str]:
    """The run metadata that records a fired run's schedule."""
    return {SCHEDULE_ID_KEY: str(schedule.id), SCHEDULE_NAME_KEY: schedule.name}
