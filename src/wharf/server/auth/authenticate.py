"""Resolve a request's ``Authorization: Bearer ...`` into a :class:`Principal`, or refuse it
(:func:`authenticate`).

Invariants: every refusal is ``AuthenticationError`` (401) with a reason that does not say
whether an account exists, but that of a run or schedule token whose account may no longer
write in its project (``PermissionDeniedError``, 403: the account's permission was withdrawn);
only API keys and run tokens -- the credentials of machines, sent with every heartbeat -- are cached
(``auth.cache``), so logging a user out takes effect at once everywhere.
"""

from __future__ import annotations

import time
from dataclasses import replace
from uuid import UUID

from wharf.core.errors import EntityNotFoundError
from wharf.server.auth import api_keys, tokens
from wharf.server.auth.errors import AuthenticationError, PermissionDeniedError
from wharf.server.auth.principal import Principal, RunScope, ScheduleScope
from wharf.server.state import ServerState

_INVALID_KEY = "Invalid or revoked API key."
_INVALID_ACCOUNT = "The token's account is unknown, inactive or logged out; log in again."


def authenticate(state: ServerState, authorization: str | None) -> Principal:
    """The principal of an accepted credential:

    - an API key ``wharf_<id>_<secret>``: the key exists, is not revoked, its digest matches and
      its service account is active (one read; ``last_used`` written at most once per interval);
    - an access token (a user's or a service account's login): valid signature, not expired,
      the account is active and, for users, the token is of the current token generation;
    - a run token: the same checks for the principal that requested it (and its API key, if it
      came through one), so revoking that key, deactivating that account or logging that user
      out revokes the run tokens it handed out too; and that principal may still write in the
      token's project (a global admin, or a member or admin of it): removing the member or
      making it a viewer ends its run tokens there (403) -- checked with the token, so the
      answer is cached with it (``projects`` clears the cache on every membership change);
    - a schedule token: the same checks (its issuer may still write in the schedule's project:
      removed or made a viewer, its schedule tokens are refused on every route, 403), and its
      schedule still exists (with the token's project and snapshot), read on every request and
      never cached, so deleting the schedule revokes it at once. What it may do is
      ``own_schedule``'s to say.
    """
    if not authorization:
        raise AuthenticationError(
            "Not authenticated: send 'Authorization: Bearer <access token or API key>'."
        )
    scheme, _, credential = authorization.partition(" ")
    credential = credential.strip()
    if scheme.lower() != "bearer" or not credential:
        raise AuthenticationError("Use 'Authorization: Bearer <access token or API key>'.")
    now = state.clock()
    cache = state.auth_cache
    cached = cache.get(credential, now)
    if cached is not None:
        return cached
    generation = cache.generation  # read before the checks: see ``AuthCache.put``
    if credential.startswith(api_keys.PREFIX):
        principal = _api_key_principal(state, credential)
        cache.put(credential, principal, None, generation)
        return principal
    claims = tokens.decode(credential, state.secret, now)
    principal = _token_principal(state, claims)
    if claims.typ == "run":  # a user's own login is checked every time: logout is immediate
        cache.put(credential, principal, claims.exp, generation)
    return principal


def _token_principal(state: ServerState, claims: tokens.TokenClaims) -> Principal:
    run = None
    if claims.typ == "run":
        if claims.run is None or claims.prj is None or claims.snp is None:
            raise AuthenticationError("Malformed run token.")
        run = RunScope(claims.run, claims.prj, claims.snp)
    schedule = _schedule_scope(state, claims) if claims.typ == "schedule" else None
    if claims.knd == "user":
        principal = _user_principal(state, claims.sub, claims.gen, run)
    else:
        principal = _account_principal(state, claims.sub, claims.key, run)
    if run is not None and not _may_still_write(state, principal, run.project_id):
        raise PermissionDeniedError(
            "The account that requested this run token may no longer write in project "
            f"{_project_name(state, run.project_id)}: the token is refused."
        )
    if schedule is None:
        return principal
    if not _may_still_write(state, principal, schedule.project_id):
        raise PermissionDeniedError(
            "The account that issued this schedule token may no longer create runs in project "
            f"{_project_name(state, schedule.project_id)}: the token is refused."
        )
    return replace(principal, schedule=schedule)


def _may_still_write(state: ServerState, principal: Principal, project_id: UUID) -> bool:
    """Whether the account behind a run or schedule token may still write in its project."""
    if principal.is_admin:
        return True
    role = state.accounts.memberships.role_of(project_id, **principal.member_ids())
    return role is not None and role.can_write


def _project_name(state: ServerState, project_id: UUID) -> str:
    try:
        return f"'{state.store.projects.get(project_id).name}'"
    except EntityNotFoundError:
        return str(project_id)


def _schedule_scope(state: ServerState, claims: tokens.TokenClaims) -> ScheduleScope:
    """The scope of a schedule token whose schedule still exists as the token names it."""
    if claims.sch is None or claims.prj is None or claims.snp is None:
        raise AuthenticationError("Malformed schedule token.")
    try:
        schedule = state.store.schedules.get(claims.sch)
    except EntityNotFoundError:
        raise AuthenticationError("The token's schedule has been deleted.") from None
    if schedule.project_id != claims.prj or schedule.snapshot_id != claims.snp:
        raise AuthenticationError("Malformed schedule token.")
    return ScheduleScope(schedule.id, schedule.project_id, schedule.snapshot_id)


def _api_key_principal(state: ServerState, key: str) -> Principal:
    parsed = api_keys.parse(key)
    if parsed is None:
        raise AuthenticationError(_INVALID_KEY)
    key_id, secret = parsed
    try:
        found = state.accounts.api_keys.get_for_auth(key_id)
    except EntityNotFoundError:
        raise AuthenticationError(_INVALID_KEY) from None
    if found.key.revoked or not api_keys.matches(found.key_hash, secret):
        raise AuthenticationError(_INVALID_KEY)
    if not found.account.active:
        raise AuthenticationError(_INVALID_KEY)
    _touch(state, key_id)
    account = found.account
    return Principal("service_account", account.id, account.name, account.is_admin, None, key_id)


def _touch(state: ServerState, key_id: UUID) -> None:
    interval = state.settings.api_key_touch_interval_seconds
    now = time.monotonic()
    last = state.key_touches.get(key_id)
    if last is not None and now - last < interval:
        return
    state.key_touches[key_id] = now
    state.accounts.api_keys.touch(key_id, interval)


def _user_principal(
    state: ServerState, user_id: UUID, generation: int | None, run: RunScope | None
) -> Principal:
    try:
        credential = state.accounts.credentials.get(user_id)
        user = state.store.users.get(user_id)
    except EntityNotFoundError:
        raise AuthenticationError(_INVALID_ACCOUNT) from None
    if not credential.active:
        raise AuthenticationError(_INVALID_ACCOUNT)
    if generation != credential.token_generation:
        raise AuthenticationError("The token has been revoked; log in again.")
    return Principal("user", user.id, user.name, user.is_admin, run)


def _account_principal(
    state: ServerState, account_id: UUID, key_id: UUID | None, run: RunScope | None
) -> Principal:
    if key_id is not None:
        try:
            found = state.accounts.api_keys.get_for_auth(key_id)
        except EntityNotFoundError:
            raise AuthenticationError(_INVALID_KEY) from None
        if found.key.revoked or found.account.id != account_id:
            raise AuthenticationError("The API key behind this token has been revoked.")
        account = found.account
    else:
        try:
            account = state.accounts.service_accounts.get(account_id)
        except EntityNotFoundError:
            raise AuthenticationError(_INVALID_ACCOUNT) from None
    if not account.active:
        raise AuthenticationError(_INVALID_ACCOUNT)
    return Principal("service_account", account.id, account.name, account.is_admin, run, key_id)
