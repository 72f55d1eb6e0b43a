"""Helpers shared by the routers: JSON responses, error documentation, list scopes, the
cross-project reference check, the producer check of new artifact versions and the instant
sweeps compare deadlines with."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from fastapi import Response
from pydantic import BaseModel

from wharf.core.errors import EntityNotFoundError
from wharf.server.auth.access import ListScope
from wharf.server.deps import Ctx
from wharf.server.schemas.responses import Items
from wharf.store.models import Page, PageRequest

API_PREFIX = "/api/v1"

_ERROR = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"description": "Invalid value", **_ERROR},
    401: {"description": "Not authenticated", **_ERROR},
    403: {"description": "Not allowed", **_ERROR},
    404: {"description": "Not found (or not visible)", **_ERROR},
    409: {"description": "Conflict", **_ERROR},
    413: {"description": "Body too large", **_ERROR},
    414: {"description": "URI too long", **_ERROR},
    422: {"description": "Invalid request", **_ERROR},
}


def json_response(value: BaseModel, status: int = 200) -> Response:
    return Response(value.model_dump_json(), status_code=status, media_type="application/json")


def items_response(values: list[Any], status: int = 200) -> Response:
    return json_response(Items[Any](items=values), status)


def no_content() -> Response:
    return Response(status_code=204)


def missing(kind: str, entity_id: object) -> Callable[[], EntityNotFoundError]:
    """The store's own not-found error for ``kind``/``entity_id`` (same message, same class)."""
    return lambda: EntityNotFoundError(f"No {kind} with id {entity_id}.")


def empty_page(page: PageRequest) -> Page[Any]:
    return Page(items=[], index=page.index, size=page.size, total=0)


def list_scope(ctx: Ctx, project_id: UUID | None, parent: Callable[[], UUID] | None) -> ListScope:
    """The project a list is limited to. ``parent`` finds the project of a parent filter (a run,
    a pipeline...) when no project is given; a parent the caller cannot see yields nothing."""
    if ctx.principal.acts_as_admin:
        return ListScope(project_id)
    if project_id is None and parent is not None:
        try:
            derived = parent()
        except EntityNotFoundError:
            return ListScope(None, empty=True)
        try:
            return ctx.access.list_scope(derived)
        except EntityNotFoundError:
            return ListScope(None, empty=True)
    return ctx.access.list_scope(project_id)


def same_project(
    ctx: Ctx, project_id: UUID, refs: Iterable[tuple[str, UUID | None, Callable[[UUID], UUID]]]
) -> None:
    """Non-admins may only reference things of the project they write in: each ``(kind, id,
    project_of)`` elsewhere (or missing) is reported as missing."""
    if ctx.principal.acts_as_admin:
        return
    for kind, ref, project_of in refs:
        if ref is None:
            continue
        try:
            owner = project_of(ref)
        except EntityNotFoundError:
            raise missing(kind, ref)() from None
        if owner != project_id:
            raise missing(kind, ref)()


def check_producer(ctx: Ctx, project_id: UUID, producer: UUID | None) -> None:
    """A new artifact version of ``project_id`` names as its producer a step run of that
    project (else it is missing, as in :func:`same_project`) and, for a run token, of its own
    run (else 403)."""
    if producer is None:
        return
    scopes = ctx.state.scopes
    same_project(ctx, project_id, [("step run", producer, lambda i: scopes.step(i).project_id)])
    if ctx.principal.run is not None:
        step = scopes.step(producer)
        ctx.access.check(
            step.project_id,
            write=True,
            action="record versions produced by step runs",
            missing=missing("step run", producer),
            run_id=step.run_id,
        )


def sweep_time(ctx: Ctx, now: datetime) -> datetime:
    """The instant a sweep of lost runs or steps compares deadlines with: the server's own clock,
    or an admin's earlier ``now`` (tests drive a fake clock). Never a later one: a caller whose
    clock runs ahead would end runs and steps that are alive."""
    server_now = datetime.now(UTC)
    return min(now, server_now) if ctx.principal.acts_as_admin else server_now
