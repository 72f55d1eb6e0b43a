"""``/api/v1/service_accounts`` and their API keys: admins only.

A new key's secret is returned once, by the creating call; the store keeps its digest. A new
account's name follows :func:`wharf.core.names.account_name` (400 otherwise).
"""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Depends, Response

from wharf.core.errors import EntityNotFoundError
from wharf.core.names import account_name
from wharf.server.auth import api_keys
from wharf.server.deps import CtxDep
from wharf.server.routers._common import API_PREFIX, ERRORS, json_response
from wharf.server.schemas.actions import (
    ApiKeyCreateBody,
    ServiceAccountCreateBody,
    ServiceAccountUpdateBody,
)
from wharf.server.schemas.filters import page_request
from wharf.server.schemas.responses import ApiKeyCreated
from wharf.store.account_models import ApiKeyRecord, ServiceAccountRecord
from wharf.store.models import Page, PageRequest

PageDep = Annotated[PageRequest, Depends(page_request)]


def build_router() -> APIRouter:
    router = APIRouter(
        prefix=f"{API_PREFIX}/service_accounts", tags=["service accounts"], responses=ERRORS
    )

    @router.get("", response_model=Page[ServiceAccountRecord])
    def list_accounts(ctx: CtxDep, page: PageDep) -> Response:
        ctx.access.require_admin("list service accounts")
        return json_response(ctx.state.accounts.service_accounts.list(page))

    @router.post("", response_model=ServiceAccountRecord, status_code=201)
    def create_account(body: ServiceAccountCreateBody, ctx: CtxDep) -> Response:
        ctx.access.require_admin("create service accounts")
        record = ctx.state.accounts.service_accounts.create(
            account_name(body.name, "service account"),
            description=body.description,
            is_admin=body.is_admin,
        )
        return json_response(record, 201)

    @router.get("/{account_id}", response_model=ServiceAccountRecord)
    def get_account(account_id: UUID, ctx: CtxDep) -> Response:
        ctx.access.require_admin("read service accounts")
        return json_response(ctx.state.accounts.service_accounts.get(account_id))

    @router.patch("/{account_id}", response_model=ServiceAccountRecord)
    def update_account(account_id: UUID, body: ServiceAccountUpdateBody, ctx: CtxDep) -> Response:
        ctx.access.require_admin("administer service accounts")
        record = ctx.state.accounts.service_accounts.set_active(account_id, body.active)
        ctx.state.auth_cache.clear()
        return json_response(record)

    @router.get("/{account_id}/api_keys", response_model=Page[ApiKeyRecord])
    def list_keys(account_id: UUID, ctx: CtxDep, page: PageDep) -> Response:
        ctx.access.require_admin("list API keys")
        ctx.state.accounts.service_accounts.get(account_id)
        return json_response(ctx.state.accounts.api_keys.list(account_id, page))

    @router.post("/{account_id}/api_keys", response_model=ApiKeyCreated, status_code=201)
    def create_key(account_id: UUID, body: ApiKeyCreateBody, ctx: CtxDep) -> Response:
        """Create an API key; its secret is in this response only."""
        ctx.access.require_admin("create API keys")
        secret, digest = api_keys.new_secret()
        record = ctx.state.accounts.api_keys.create(account_id, body.name, digest)
        created = ApiKeyCreated(key=record, secret=api_keys.format_key(record.id, secret))
        return json_response(created, 201)

    @router.post("/{account_id}/api_keys/{key_id}/revoke", response_model=ApiKeyRecord)
    def revoke_key(account_id: UUID, key_id: UUID, ctx: CtxDep) -> Response:
        ctx.access.require_admin("revoke API keys")
        keys = ctx.state.accounts.api_keys
        if keys.get(key_id).service_account_id != account_id:
            raise EntityNotFoundError(f"No API key with id {key_id}.")
        record = keys.revoke(key_id)
        ctx.state.auth_cache.clear()
        return json_response(record)

    return router
