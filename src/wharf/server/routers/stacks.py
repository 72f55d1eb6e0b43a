"""``/api/v1/components`` and ``/api/v1/stacks``: global, readable by every principal (a step
process reads its artifact store's component). Admins and project members register components
and stacks; only admins reconfigure or delete a component or delete a stack, which every
project (the server's ``default`` stack among them) may use. The store decides whether a
deletion or a new configuration is allowed (409 with the reason); a configuration is checked
here as the CLI checks it, on registration and update alike (``checked_flavor_configuration``:
unknown keys and values, an fsspec artifact store's clear-text secrets). A new component's flavor
must be one this server declares (400 listing them; a flavor declared here whose integration
cannot be imported here is stored unchecked), and a ``local`` artifact store's ``path``
absolute: the CLI resolves a relative one against its own directory, which the server cannot
know."""

from __future__ import annotations

import os
from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Depends, Query, Response

from wharf.config.flavors import check_flavor
from wharf.core.enums import ComponentType
from wharf.core.errors import InputError
from wharf.sdk.stacks import LOCAL_FLAVOR, checked_flavor_configuration
from wharf.server.deps import CtxDep
from wharf.server.routers._common import API_PREFIX, ERRORS, json_response, no_content
from wharf.server.schemas.actions import ComponentUpdateBody, LookupName, StackCreateBody
from wharf.server.schemas.filters import page_request
from wharf.store.models import ComponentCreate, ComponentRecord, Page, PageRequest, StackRecord

PageDep = Annotated[PageRequest, Depends(page_request)]


def _checked(type: ComponentType, flavor: str, configuration: dict[str, Any]) -> dict[str, Any]:
    """The configuration to store (as the CLI checks it, on registration and update alike),
    with a ``local`` artifact store's ``path`` absolute; else InputError (400)."""
    checked = checked_flavor_configuration(type, flavor, configuration)
    if type is ComponentType.ARTIFACT_STORE and flavor == LOCAL_FLAVOR:
        path = checked.get("path")
        if not isinstance(path, str) or not os.path.isabs(path):
            raise InputError(
                f"The 'path' of a local artifact store must be an absolute directory path, got "
                f"{path!r}: the server cannot resolve it against your working directory "
                "(`wharf component register` makes a relative path absolute)."
            )
    return checked


def build_router() -> APIRouter:
    router = APIRouter(prefix=API_PREFIX, tags=["stacks"], responses=ERRORS)

    @router.get("/components", response_model=Page[ComponentRecord])
    def list_components(
        ctx: CtxDep, page: PageDep, type: Annotated[ComponentType | None, Query()] = None
    ) -> Response:
        return json_response(ctx.store.stacks.list_components(type, page))

    @router.post("/components", response_model=ComponentRecord, status_code=201)
    def create_component(body: ComponentCreate, ctx: CtxDep) -> Response:
        ctx.access.require_global_write("register stack components")
        # What the CLI and SDK check, for callers of the raw route too: no unknown key, no
        # clear-text secret is stored (InputError: 400).
        check_flavor(body.type, body.flavor)  # unknown: InputError naming the known ones
        configuration = _checked(body.type, body.flavor, body.configuration)
        body = body.model_copy(update={"configuration": configuration})
        return json_response(ctx.store.stacks.create_component(body), 201)

    @router.get("/components/by-name", response_model=ComponentRecord)
    def get_component_by_name(
        type: Annotated[ComponentType, Query()], name: LookupName, ctx: CtxDep
    ) -> Response:
        return json_response(ctx.store.stacks.get_component_by_name(type, name))

    @router.get("/components/{component_id}", response_model=ComponentRecord)
    def get_component(component_id: UUID, ctx: CtxDep) -> Response:
        return json_response(ctx.store.stacks.get_component(component_id))

    @router.patch("/components/{component_id}", response_model=ComponentRecord)
    def update_component(component_id: UUID, body: ComponentUpdateBody, ctx: CtxDep) -> Response:
        ctx.access.require_admin("reconfigure stack components")
        current = ctx.store.stacks.get_component(component_id)
        configuration = _checked(current.type, current.flavor, body.configuration)
        return json_response(ctx.store.stacks.update_component(component_id, configuration))

    @router.delete("/components/{component_id}", status_code=204)
    def delete_component(component_id: UUID, ctx: CtxDep) -> Response:
        ctx.access.require_admin("delete stack components")
        ctx.store.stacks.delete_component(component_id)
        return no_content()

    @router.get("/stacks", response_model=Page[StackRecord])
    def list_stacks(ctx: CtxDep, page: PageDep) -> Response:
        return json_response(ctx.store.stacks.list_stacks(page))

    @router.post("/stacks", response_model=StackRecord, status_code=201)
    def create_stack(body: StackCreateBody, ctx: CtxDep) -> Response:
        ctx.access.require_global_write("register stacks")
        return json_response(ctx.store.stacks.create_stack(body.name, body.components), 201)

    @router.get("/stacks/by-name", response_model=StackRecord)
    def get_stack_by_name(name: LookupName, ctx: CtxDep) -> Response:
        return json_response(ctx.store.stacks.get_stack_by_name(name))

    @router.get("/stacks/{stack_id}", response_model=StackRecord)
    def get_stack(stack_id: UUID, ctx: CtxDep) -> Response:
        return json_response(ctx.store.stacks.get_stack(stack_id))

    @router.delete("/stacks/{stack_id}", status_code=204)
    def delete_stack(stack_id: UUID, ctx: CtxDep) -> Response:
        ctx.access.require_admin("delete stacks")
        ctx.store.stacks.delete_stack(stack_id)
        return no_content()

    return router
