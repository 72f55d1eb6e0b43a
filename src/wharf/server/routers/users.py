"""``/api/v1/users``: read by any account (the list says who is deactivated); created and
administered by admins; a user may change their own password.

A password change (a reset by an admin or the user's own) and a deactivation revoke every
access and run token the user was issued: a session never outlives the password it came from.
No user deactivates or demotes their own account (409): another admin does, so the last admin
cannot lock everyone out of the server by mistake. A new user's name follows
:func:`wharf.core.names.account_name` (400 otherwise); users named before keep working.
"""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Depends, Response

from wharf.core.errors import IllegalOperationError
from wharf.core.names import account_name
from wharf.server.deps import CtxDep
from wharf.server.routers._common import API_PREFIX, ERRORS, json_response
from wharf.server.schemas.actions import LookupName, UserCreateBody, UserUpdateBody
from wharf.server.schemas.filters import page_request
from wharf.server.schemas.responses import ListedUser
from wharf.store.models import Page, PageRequest, UserRecord


def build_router() -> APIRouter:
    router = APIRouter(prefix=f"{API_PREFIX}/users", tags=["users"], responses=ERRORS)

    @router.get("", response_model=Page[ListedUser])
    def list_users(ctx: CtxDep, page: Annotated[PageRequest, Depends(page_request)]) -> Response:
        ctx.access.require_account("list users")
        found = ctx.store.users.list(page)
        off = ctx.state.accounts.credentials.deactivated([u.id for u in found.items])
        listed = [ListedUser(**u.model_dump(), active=u.id not in off) for u in found.items]
        shown = Page[ListedUser](
            items=listed, index=found.index, size=found.size, total=found.total
        )
        return json_response(shown)

    @router.post("", response_model=UserRecord, status_code=201)
    def create_user(body: UserCreateBody, ctx: CtxDep) -> Response:
        ctx.access.require_admin("create users")
        name = account_name(body.name, "user")
        password_hash = None if body.password is None else ctx.state.passwords.hash(body.password)
        user = ctx.store.users.create(name, is_admin=body.is_admin)
        if password_hash is not None:
            ctx.state.accounts.credentials.set_password(user.id, password_hash)
        return json_response(user, 201)

    @router.get("/by-name", response_model=UserRecord)
    def get_user_by_name(name: LookupName, ctx: CtxDep) -> Response:
        ctx.access.require_account("read users")
        return json_response(ctx.store.users.get_by_name(name))

    @router.get("/{user_id}", response_model=UserRecord)
    def get_user(user_id: UUID, ctx: CtxDep) -> Response:
        ctx.access.require_account("read users")
        return json_response(ctx.store.users.get(user_id))

    @router.patch("/{user_id}", response_model=UserRecord)
    def update_user(user_id: UUID, body: UserUpdateBody, ctx: CtxDep) -> Response:
        principal = ctx.principal
        is_self = principal.kind == "user" and principal.id == user_id and principal.run is None
        only_password = body.active is None and body.is_admin is None
        if not (is_self and only_password):
            ctx.access.require_admin("administer other users")
        if is_self and (body.active is False or body.is_admin is False):
            # An admin locking themselves out may leave no one able to administer the server.
            change = "deactivate" if body.active is False else "take the admin role from"
            raise IllegalOperationError(f"You cannot {change} your own account; another admin can.")
        user = ctx.store.users.get(user_id)
        credentials = ctx.state.accounts.credentials
        if body.password is not None:
            credentials.set_password(user_id, ctx.state.passwords.hash(body.password))
        if body.active is not None:
            credentials.set_active(user_id, body.active)
        if body.password is not None or body.active is False:
            # Every access and run token issued before a reset or a deactivation stops working
            # (revoked after the change: a login with the old password in between is revoked too).
            credentials.revoke_tokens(user_id)
        if body.is_admin is not None:
            user = credentials.set_admin(user_id, body.is_admin)
        ctx.state.auth_cache.clear()
        return json_response(user)

    return router
