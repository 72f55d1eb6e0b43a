"""Request-scoped dependencies: the server state, the authenticated principal and its access.

``Ctx`` is what every authenticated route takes (``ctx: CtxDep``); :func:`refuse_unauthenticated`
is what the validation error handler calls first.

Invariants: no store data is reached unauthenticated; a caller who is not authenticated on a
route that needs a principal gets the 401, never a 422 describing the route's schema; a
schedule-scoped token is refused on every route but the few ``own_schedule`` lists (deny by
default: no route needs to know such tokens exist to refuse them).
"""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from fastapi import Depends, Request
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from fastapi.security import HTTPBearer
from fastapi.security.utils import get_authorization_scheme_param
from starlette.concurrency import run_in_threadpool

from wharf.server.auth.access import Access
from wharf.server.auth.authenticate import authenticate
from wharf.server.auth.own_schedule import RouteKey, check_route
from wharf.server.auth.principal import Principal
from wharf.server.state import ServerState
from wharf.store.ports import Store


async def get_state(request: Request) -> ServerState:
    state: ServerState = request.app.state.wharf
    return state


class Ctx:
    """The request's authenticated context.

    The dependency runs on the event loop and only reads the ``Authorization`` header; the
    credential is checked on first use of anything the context holds (``principal``,
    ``access``, ``store``, ``state``), which every route does before its first store call, so
    authentication runs in the route's worker thread (one thread hop per request, not two).
    """

    __slots__ = ("_access", "_header", "_route", "_state")

    def __init__(
        self, state: ServerState, header: str | None, route: RouteKey | None = None
    ) -> None:
        self._state = state
        self._header = header
        self._route = route
        self._access: Access | None = None

    @property
    def access(self) -> Access:
        if self._access is None:
            principal = authenticate(self._state, self._header)
            if principal.schedule is not None:
                check_route(principal.schedule, self._route, self._project_of)
            self._access = Access(self._state, principal)
        return self._access

    def _project_of(self, kind: str, entity_id: UUID) -> UUID:
        scopes = self._state.scopes
        return scopes.schedule(entity_id) if kind == "schedule" else scopes.snapshot(entity_id)

    @property
    def principal(self) -> Principal:
        return self.access.principal

    @property
    def state(self) -> ServerState:
        self.access  # noqa: B018 - authenticate before handing anything out
        return self._state

    @property
    def store(self) -> Store:
        return self.state.store


class _BearerContext(HTTPBearer):
    """The ``Authorization: Bearer`` security scheme (it documents every route's security in
    the OpenAPI spec) that yields the request's :class:`Ctx` itself: one dependency per request
    instead of a scheme plus a context built on it (FastAPI resolves each one per request)."""

    # It returns the context, not the credentials: FastAPI only ever calls it as a dependency.
    async def __call__(self, request: Request) -> Ctx:  # type: ignore[override]
        state: ServerState = request.app.state.wharf
        route = request.scope.get("route")
        key = None
        if isinstance(route, APIRoute):
            key = RouteKey(request.method, route.path, dict(request.path_params))
        return Ctx(state, _authorization(request), key)


def _authorization(request: Request) -> str | None:
    header = request.headers.get("authorization")
    if header is not None:
        scheme, value = get_authorization_scheme_param(header)
        header = f"{scheme} {value}"
    return header


get_ctx = _BearerContext(
    scheme_name="HTTPBearer",
    auto_error=False,
    description="An access token (POST /api/v1/auth/login), a run token or an API key.",
)

CtxDep = Annotated[Ctx, Depends(get_ctx)]
StateDep = Annotated[ServerState, Depends(get_state)]


def _uses_context(dependant: Dependant) -> bool:
    return any(d.call is get_ctx or _uses_context(d) for d in dependant.dependencies)


_NEEDS_PRINCIPAL: dict[int, tuple[APIRoute, bool]] = {}
"""Per route (by identity; an app's routes are a fixed set): whether it takes the
authenticated context. The route is kept with its answer, so its id is never reused."""


async def refuse_unauthenticated(request: Request) -> None:
    """Raise ``AuthenticationError`` if the request's route needs a principal and the request's
    credential does not authenticate (checked in a worker thread: it may read the store).

    FastAPI validates parameters and body before any route code runs, so a request that fails
    validation has not been authenticated yet: this check comes first.
    """
    route = request.scope.get("route")
    if not isinstance(route, APIRoute):
        return
    known = _NEEDS_PRINCIPAL.get(id(route))
    if known is None or known[0] is not route:
        known = _NEEDS_PRINCIPAL[id(route)] = (route, _uses_context(route.dependant))
    if known[1]:
        state: ServerState = request.app.state.wharf
        await run_in_threadpool(authenticate, state, _authorization(request))
