"""``/api/v1/auth``: password login, external-identity login, logout, and who am I.

Password logins are throttled per account and per client address
(:mod:`wharf.core.login_throttle`, one throttle per server process): past a limit the login is
refused with 429 and ``Retry-After`` before the password is checked; only wrong passwords
count, and a success resets the account's count. A deactivated account is told so (403), only
with its right password.
"""

from __future__ import annotations

import shlex

from fastapi import APIRouter, Request, Response

from wharf.core.errors import EntityNotFoundError
from wharf.server.auth import external, issue
from wharf.server.auth.errors import (
    AuthenticationError,
    LoginThrottledError,
    PermissionDeniedError,
)
from wharf.server.auth.principal import Principal
from wharf.server.deps import CtxDep, StateDep
from wharf.server.routers._common import API_PREFIX, ERRORS, json_response, no_content
from wharf.server.schemas.actions import ExternalLoginBody, LoginBody
from wharf.server.schemas.responses import Me, TokenResponse
from wharf.server.state import ServerState

_BAD_LOGIN = "Invalid username or password."


def _password_login(state: ServerState, body: LoginBody) -> Principal:
    passwords = state.passwords
    try:
        user = state.store.users.get_by_name(body.username)
        credential = state.accounts.credentials.get(user.id)
    except EntityNotFoundError:
        passwords.dummy_verify(body.password)
        raise AuthenticationError(_BAD_LOGIN) from None
    if credential.password_hash is None:
        passwords.dummy_verify(body.password)
        raise AuthenticationError(_BAD_LOGIN)
    if not passwords.verify(credential.password_hash, body.password):
        raise AuthenticationError(_BAD_LOGIN)
    if not credential.active:  # said only to who knows the password
        raise PermissionDeniedError(
            f"The account '{user.name}' is deactivated: a workspace admin reactivates it with "
            f"`wharf user update {shlex.quote(user.name)} --active`."
        )
    return Principal("user", user.id, user.name, user.is_admin)


def build_router() -> APIRouter:
    router = APIRouter(prefix=f"{API_PREFIX}/auth", tags=["auth"], responses=ERRORS)

    @router.post(
        "/login",
        response_model=TokenResponse,
        responses={429: {**ERRORS[401], "description": "Too many failed logins"}},
    )
    def login(body: LoginBody, state: StateDep, request: Request) -> Response:
        """Exchange a username and password for a short-lived access token."""
        address = request.client.host if request.client is not None else None
        throttle = state.login_throttle
        refused = throttle.attempt(body.username, address, state.clock())
        if refused is not None:
            raise LoginThrottledError(
                f"Too many failed logins for this {refused.scope}; try again in "
                f"{refused.retry_after} s.",
                refused.retry_after,
            )
        try:
            principal = _password_login(state, body)
        except (AuthenticationError, PermissionDeniedError):  # a wrong password; deactivated
            throttle.failed(body.username, address, state.clock())
            raise
        except BaseException:  # not verified (the store did not answer): no failure
            throttle.abandoned(body.username, address)
            raise
        throttle.succeeded(body.username, address)
        return json_response(issue.access_token(state, principal))

    @router.post("/external", response_model=TokenResponse)
    def external_login(body: ExternalLoginBody, state: StateDep) -> Response:
        """Exchange an external identity provider's token (introspected at the configured URL)
        for an access token; the user is created or updated on the way."""
        principal = external.sync_principal(state, external.introspect(state, body.token))
        state.auth_cache.clear()  # the admin flag may have changed
        return json_response(issue.access_token(state, principal))

    @router.post("/logout", status_code=204)
    def logout(ctx: CtxDep) -> Response:
        """Revoke every access and run token of the calling user. A run token and an API key
        are refused (403), as answering 204 would tell their holder they were revoked: a run
        token cannot be revoked alone, and an API key is revoked with ``wharf api-key
        revoke``."""
        principal = ctx.principal
        if principal.run is not None:
            raise PermissionDeniedError(
                "A run-scoped token cannot log out: it ends when it expires, or when the account "
                "that requested it logs out, is deactivated or loses its API key."
            )
        if principal.key_id is not None:
            raise PermissionDeniedError(
                "An API key cannot log out: it stays valid until an admin revokes it "
                "(`wharf api-key revoke ACCOUNT KEY`)."
            )
        if principal.kind == "user":
            ctx.state.accounts.credentials.revoke_tokens(principal.id)
            ctx.state.auth_cache.clear()
        return no_content()

    @router.get("/me", response_model=Me)
    def me(ctx: CtxDep) -> Response:
        principal = ctx.principal
        return json_response(
            Me(
                kind=principal.kind,
                id=principal.id,
                name=principal.name,
                is_admin=principal.acts_as_admin,
                run_id=principal.run.run_id if principal.run else None,
                projects=ctx.access.roles(),
            )
        )

    return router
