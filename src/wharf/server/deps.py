"""Request-scoped dependencies: the server state, the authenticated principal and its access.

``Ctx`` is what every authenticated route takes (``ctx: CtxDep``). The dependency itself runs on
the event loop and only reads the ``Authorization`` header; the credential is checked on first
use of anything the context holds (``principal``, ``access``, ``store``, ``state``), which every
route does before its first store call -- so authentication runs in the route's worker thread
(one thread hop per request instead of two) and no store data is reached unauthenticated.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPBearer
from fastapi.security.utils import get_authorization_scheme_param

from wharf.server.auth.access import Access
from wharf.server.auth.authenticate import authenticate
from wharf.server.auth.principal import Principal
from wharf.server.state import ServerState
from wharf.store.ports import Store


async def get_state(request: Request) -> ServerState:
    state: ServerState = request.app.state.wharf
    return state


class Ctx:
    """The request's authenticated context (authentication happens on first use)."""

    __slots__ = ("_access", "_header", "_state")

    def __init__(self, state: ServerState, header: str | None) -> None:
        self._state = state
        self._header = header
        self._access: Access | None = None

    @property
    def access(self) -> Access:
        if self._access is None:
            principal = authenticate(self._state, self._header)
            self._access = Access(self._state, principal)
        return self._access

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
        header = request.headers.get("authorization")
        if header is not None:
            scheme, value = get_authorization_scheme_param(header)
            header = f"{scheme} {value}"
        state: ServerState = request.app.state.wharf
        return Ctx(state, header)


get_ctx = _BearerContext(
    scheme_name="HTTPBearer",
    auto_error=False,
    description="An access token (POST /api/v1/auth/login), a run token or an API key.",
)

CtxDep = Annotated[Ctx, Depends(get_ctx)]
StateDep = Annotated[ServerState, Depends(get_state)]
