"""Issuing tokens: access tokens after a login, run tokens for a run's processes, schedule
tokens for the processes a schedule fires (``own_schedule``)."""

from __future__ import annotations

from typing import Any, Literal

from wharf.server.auth import tokens
from wharf.server.auth.principal import Principal, RunScope, ScheduleScope
from wharf.server.schemas.responses import TokenResponse
from wharf.server.state import ServerState

TokenKind = Literal["access", "run", "schedule"]


def _generation(state: ServerState, principal: Principal) -> int | None:
    if principal.kind != "user":
        return None
    return state.accounts.credentials.get(principal.id).token_generation


def _issue(
    state: ServerState, principal: Principal, typ: TokenKind, ttl: float, **scope: Any
) -> TokenResponse:
    """A signed token of kind ``typ`` for ``principal``, valid ``ttl`` seconds from now, with
    the ``scope`` claims (a scoped token also names the key it was issued through)."""
    now = state.clock()
    claims = tokens.TokenClaims(
        typ=typ,
        sub=principal.id,
        knd=principal.kind,
        iat=now,
        exp=now + ttl,
        jti=tokens.new_jti(),
        gen=_generation(state, principal),
        **scope,
    )
    return TokenResponse(access_token=tokens.encode(claims, state.secret), expires_in=ttl)


def access_token(state: ServerState, principal: Principal) -> TokenResponse:
    return _issue(state, principal, "access", state.settings.access_token_ttl_seconds)


def run_token(state: ServerState, principal: Principal, scope: RunScope) -> TokenResponse:
    return _issue(
        state,
        principal,
        "run",
        state.settings.run_token_ttl_seconds,
        run=scope.run_id,
        prj=scope.project_id,
        snp=scope.snapshot_id,
        key=principal.key_id,
    )


def schedule_token(state: ServerState, principal: Principal, scope: ScheduleScope) -> TokenResponse:
    """A token for the runs ``scope``'s schedule fires, bound to ``principal`` (its API key or
    user token generation) as a run token is; it also ends when the schedule is deleted."""
    return _issue(
        state,
        principal,
        "schedule",
        state.settings.schedule_token_ttl_seconds,
        sch=scope.schedule_id,
        prj=scope.project_id,
        snp=scope.snapshot_id,
        key=principal.key_id,
    )
