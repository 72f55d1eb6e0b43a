"""Issuing tokens: access tokens after a login, run tokens for a run's processes, schedule
tokens for the processes a schedule fires (``own_schedule``)."""

from __future__ import annotations

from wharf.server.auth import tokens
from wharf.server.auth.principal import Principal, RunScope, ScheduleScope
from wharf.server.schemas.responses import TokenResponse
from wharf.server.state import ServerState


def _generation(state: ServerState, principal: Principal) -> int | None:
    if principal.kind != "user":
        return None
    return state.accounts.credentials.get(principal.id).token_generation


def access_token(state: ServerState, principal: Principal) -> TokenResponse:
    ttl = state.settings.access_token_ttl_seconds
    now = state.clock()
    claims = tokens.TokenClaims(
        typ="access",
        sub=principal.id,
        knd=principal.kind,
        iat=now,
        exp=now + ttl,
        jti=tokens.new_jti(),
        gen=_generation(state, principal),
    )
    return TokenResponse(access_token=tokens.encode(claims, state.secret), expires_in=ttl)


def run_token(state: ServerState, principal: Principal, scope: RunScope) -> TokenResponse:
    ttl = state.settings.run_token_ttl_seconds
    now = state.clock()
    claims = tokens.TokenClaims(
        typ="run",
        sub=principal.id,
        knd=principal.kind,
        iat=now,
        exp=now + ttl,
        jti=tokens.new_jti(),
        run=scope.run_id,
        prj=scope.project_id,
        snp=scope.snapshot_id,
        key=principal.key_id,
        gen=_generation(state, principal),
    )
    return TokenResponse(access_token=tokens.encode(claims, state.secret), expires_in=ttl)


def schedule_token(state: ServerState, principal: Principal, scope: ScheduleScope) -> TokenResponse:
    """A token for the runs ``scope``'s schedule fires, bound to ``principal`` (its API key or
    user token generation) as a run token is; it also ends when the schedule is deleted."""
    ttl = state.settings.schedule_token_ttl_seconds
    now = state.clock()
    claims = tokens.TokenClaims(
        typ="schedule",
        sub=principal.id,
        knd=principal.kind,
        iat=now,
        exp=now + ttl,
        jti=tokens.new_jti(),
        sch=scope.schedule_id,
        prj=scope.project_id,
        snp=scope.snapshot_id,
        key=principal.key_id,
        gen=_generation(state, principal),
    )
    return TokenResponse(access_token=tokens.encode(claims, state.secret), expires_in=ttl)
