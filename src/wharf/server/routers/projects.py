"""``/api/v1/projects`` and their members.

Non-admins see only the projects they belong to (others are 404). Projects are created by
admins; memberships are managed by admins and by the project's own admins. A membership change
clears the auth cache: a member removed or made a viewer loses its run tokens of the project at
once (``wharf.server.auth.authenticate``). A new project's name follows
:func:`wharf.core.names.account_name` (400 otherwise); projects named before keep working.
"""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Depends, Query, Response

from wharf.core.errors import EntityNotFoundError, WharfError
from wharf.core.names import account_name
from wharf.server.auth.access import missing_project
from wharf.server.auth.errors import PermissionDeniedError
from wharf.server.deps import Ctx, CtxDep
from wharf.server.routers._common import API_PREFIX, ERRORS, json_response, no_content
from wharf.server.schemas.actions import LookupName, MemberBody, ProjectCreateBody
from wharf.server.schemas.filters import page_request
from wharf.store.account_models import MembershipRecord
from wharf.store.models import Page, PageRequest, ProjectRecord


def _visible_projects(ctx: Ctx, page: PageRequest) -> Page[ProjectRecord]:
    """The caller's projects, paged and ordered like ``ProjectRepository.list``."""
    records = [ctx.store.projects.get(p) for p in ctx.access.roles()]
    records.sort(key=lambda p: (p.created, p.id), reverse=page.sort == "desc")
    start = (page.index - 1) * page.size
    return Page(
        items=records[start : start + page.size],
        index=page.index,
        size=page.size,
        total=len(records),
    )


def _readable(ctx: Ctx, project: ProjectRecord, missing: WharfError) -> ProjectRecord:
    ctx.access.check(project.id, write=False, action="read the project", missing=lambda: missing)
    return project


def build_router() -> APIRouter:
    router = APIRouter(prefix=f"{API_PREFIX}/projects", tags=["projects"], responses=ERRORS)

    @router.get("", response_model=Page[ProjectRecord])
    def list_projects(ctx: CtxDep, page: Annotated[PageRequest, Depends(page_request)]) -> Response:
        ctx.access.require_account("list projects")
        if ctx.principal.acts_as_admin:
            return json_response(ctx.store.projects.list(page))
        return json_response(_visible_projects(ctx, page))

    @router.post("", response_model=ProjectRecord, status_code=201)
    def create_project(body: ProjectCreateBody, ctx: CtxDep) -> Response:
        ctx.access.require_admin("create projects")
        name = account_name(body.name, "project")
        return json_response(ctx.store.projects.create(name), 201)

    @router.get("/by-name", response_model=ProjectRecord)
    def get_project_by_name(name: LookupName, ctx: CtxDep) -> Response:
        missing = EntityNotFoundError(f"No project named '{name}'.")
        try:
            project = ctx.store.projects.get_by_name(name)
        except EntityNotFoundError:
            raise missing from None
        return json_response(_readable(ctx, project, missing))

    @router.get("/{project_id}", response_model=ProjectRecord)
    def get_project(project_id: UUID, ctx: CtxDep) -> Response:
        project = ctx.store.projects.get(project_id)
        return json_response(_readable(ctx, project, missing_project(project_id)()))

    @router.get("/{project_id}/members", response_model=Page[MembershipRecord])
    def list_members(
        project_id: UUID, ctx: CtxDep, page: Annotated[PageRequest, Depends(page_request)]
    ) -> Response:
        ctx.access.require_account("list project members")
        ctx.access.check(
            project_id, write=False, action="read members", missing=missing_project(project_id)
        )
        ctx.store.projects.get(project_id)
        return json_response(ctx.state.accounts.memberships.list(project_id, page))

    def _manage(ctx: Ctx, project_id: UUID) -> None:
        ctx.access.require_account("manage project members")
        if ctx.access.can_manage_project(project_id):
            ctx.store.projects.get(project_id)
            return
        ctx.access.check(
            project_id, write=False, action="manage members", missing=missing_project(project_id)
        )
        raise PermissionDeniedError("Only admins and the project's admins may manage its members.")

    @router.put("/{project_id}/members", response_model=MembershipRecord)
    def set_member(project_id: UUID, body: MemberBody, ctx: CtxDep) -> Response:
        _manage(ctx, project_id)
        record = ctx.state.accounts.memberships.set_role(
            project_id,
            body.role,
            user_id=body.user_id,
            service_account_id=body.service_account_id,
        )
        ctx.state.auth_cache.clear()  # a demotion ends the member's run tokens here
        return json_response(record)

    @router.delete("/{project_id}/members", status_code=204)
    def remove_member(
        project_id: UUID,
        ctx: CtxDep,
        user_id: Annotated[UUID | None, Query()] = None,
        service_account_id: Annotated[UUID | None, Query()] = None,
    ) -> Response:
        _manage(ctx, project_id)
        ctx.state.accounts.memberships.remove(
            project_id, user_id=user_id, service_account_id=service_account_id
        )
        ctx.state.auth_cache.clear()  # the member's run tokens end here
        return no_content()

    return router
