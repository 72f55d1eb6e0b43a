"""The schedule token's rules (``wharf.server.auth.own_schedule``) as pure functions: which
routes it reaches, for which schedule or snapshot, and which runs a firing may return."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import pytest

from wharf.core.enums import MetadataResourceType
from wharf.core.errors import EntityNotFoundError
from wharf.server.auth import own_schedule
from wharf.server.auth.errors import PermissionDeniedError
from wharf.server.auth.own_schedule import RouteKey
from wharf.server.auth.principal import ScheduleScope
from wharf.store.models import RunMetadataRecord, ScheduleRecord

PROJECT, OTHER_PROJECT = uuid.uuid4(), uuid.uuid4()
SCOPE = ScheduleScope(uuid.uuid4(), PROJECT, uuid.uuid4())
NEIGHBOUR = uuid.uuid4()  # a schedule or snapshot of the same project
STRANGER = uuid.uuid4()  # one of another project


def project_of(kind: str, entity_id: UUID) -> UUID:
    projects = {NEIGHBOUR: PROJECT, STRANGER: OTHER_PROJECT}
    if entity_id not in projects:
        raise EntityNotFoundError(f"No {kind} with id {entity_id}.")
    return projects[entity_id]


def route(method: str, template: str, **params: Any) -> RouteKey:
    return RouteKey(method, template, {k: str(v) for k, v in params.items()})


def schedule(active: bool = True, schedule_id: UUID = SCOPE.schedule_id) -> ScheduleRecord:
    return ScheduleRecord(
        id=schedule_id,
        project_id=PROJECT,
        pipeline_id=uuid.uuid4(),
        snapshot_id=SCOPE.snapshot_id,
        name="nightly",
        cron_expression="0 0 * * *",
        interval_seconds=None,
        run_once_start_time=None,
        start_time=None,
        end_time=None,
        catchup=False,
        active=active,
        created=datetime.now(UTC),
    )


def metadata(**values: Any) -> list[RunMetadataRecord]:
    return [
        RunMetadataRecord(
            id=uuid.uuid4(),
            resource_type=MetadataResourceType.PIPELINE_RUN,
            resource_id=uuid.uuid4(),
            key=key,
            value=value,
            created=datetime.now(UTC),
        )
        for key, value in values.items()
    ]


def test_it_reaches_its_own_schedule_and_snapshot_on_the_listed_routes() -> None:
    own = SCOPE.schedule_id
    for key in (
        route("GET", "/api/v1/schedules/{schedule_id}", schedule_id=own),
        route("POST", "/api/v1/schedules/{schedule_id}/runs", schedule_id=own),
        route("GET", "/api/v1/snapshots/{snapshot_id}", snapshot_id=SCOPE.snapshot_id),
    ):
        own_schedule.check_route(SCOPE, key, project_of)
    assert {template for _, template in own_schedule.routes()} == {
        "/api/v1/schedules/{schedule_id}",
        "/api/v1/schedules/{schedule_id}/runs",
        "/api/v1/snapshots/{snapshot_id}",
    }


@pytest.mark.parametrize(
    "key",
    [
        None,  # a request whose route is unknown
        route("DELETE", "/api/v1/schedules/{schedule_id}", schedule_id=SCOPE.schedule_id),
        route("POST", "/api/v1/schedules/{schedule_id}/token", schedule_id=SCOPE.schedule_id),
        route("POST", "/api/v1/runs/{run_id}/token", run_id=uuid.uuid4()),
        route("GET", "/api/v1/runs"),
        route("POST", "/api/v1/auth/logout"),
        route("GET", "/api/v1/schedules/{schedule_id}", schedule_id=NEIGHBOUR),
        route("GET", "/api/v1/snapshots/{snapshot_id}", snapshot_id=NEIGHBOUR),
    ],
)
def test_anything_else_of_its_project_is_refused(key: RouteKey | None) -> None:
    with pytest.raises(PermissionDeniedError):
        own_schedule.check_route(SCOPE, key, project_of)


@pytest.mark.parametrize("target", [STRANGER, uuid.uuid4()])
def test_another_projects_or_an_unknown_schedule_or_snapshot_is_missing(target: UUID) -> None:
    for key in (
        route("POST", "/api/v1/schedules/{schedule_id}/runs", schedule_id=target),
        route("GET", "/api/v1/snapshots/{snapshot_id}", snapshot_id=target),
    ):
        with pytest.raises(EntityNotFoundError):
            own_schedule.check_route(SCOPE, key, project_of)


def test_a_firing_returns_only_runs_its_schedule_fired() -> None:
    mine = schedule()
    own_schedule.check_fired_run(mine, metadata(**own_schedule.fired_metadata(mine)))
    assert own_schedule.fired_by(metadata(schedule_id=str(mine.id))) == mine.id
    for records in (
        metadata(),  # a manual run of the same snapshot
        metadata(schedule_id=str(uuid.uuid4())),  # another schedule's
        metadata(schedule_id="not an id"),
    ):
        with pytest.raises(PermissionDeniedError):
            own_schedule.check_fired_run(mine, records)


def test_a_paused_schedule_or_an_issuer_without_write_creates_nothing() -> None:
    own_schedule.check_may_create(schedule(active=True))
    with pytest.raises(PermissionDeniedError, match="paused"):
        own_schedule.check_may_create(schedule(active=False))
    own_schedule.check_issuer_may_create(True, schedule())
    with pytest.raises(PermissionDeniedError, match="no longer create runs"):
        own_schedule.check_issuer_may_create(False, schedule())
