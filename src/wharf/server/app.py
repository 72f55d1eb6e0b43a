"""The app factory: :func:`create_app` builds a FastAPI app from :class:`ServerSettings`.

Nothing is created at import time. The database is opened by the app's lifespan (so building an
app is cheap and has no side effects) and closed at shutdown; tests may pass a ready
:class:`ServerState` instead, which the app then neither opens nor closes.

Start-up (lifespan) order: open the database (migrating it, serialised across processes by the
store's migration lock), build the Resource Manager client if one is configured (it connects on
first use, so an RM that is down does not stop the server from starting), then bootstrap: the
default user, project and stack (``create_defaults``) and the configured admin, then start the
periodic lost-orchestrator sweep (``wharf.server.sweeper``). Bootstrap is idempotent
and race-safe, so several workers or replicas may start at once on one database. Shutdown closes
the RM client, then the database.

:func:`build_state` always pairs the store with the Resource Manager it is given, or with none
(see ``wharf.server.resource_manager``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, FastAPI
from fastapi.openapi.utils import get_openapi

from wharf import __version__
from wharf.core.errors import EntityExistsError, EntityNotFoundError
from wharf.request_limits import SizeLimits
from wharf.server import errors
from wharf.server.auth.passwords import Passwords
from wharf.server.routers import (
    artifacts,
    auth,
    health,
    metadata,
    pipelines,
    projects,
    resource_pools,
    resource_requests,
    runs,
    schedule_runs,
    schedules,
    service_accounts,
    stacks,
    steps,
    users,
)
from wharf.server.settings import ServerSettings
from wharf.server.state import ServerState
from wharf.store.sql.server_stores import ServerStores, open_server_stores

if TYPE_CHECKING:
    from wharf.resource_manager.contract.protocol import ResourceManagerClient

ROUTERS = (  # the engine's hot routes first: a request is matched against routes in order
    steps,
    runs,
    artifacts,
    pipelines,
    metadata,
    stacks,
    schedules,
    schedule_runs,
    resource_requests,
    resource_pools,
    auth,
    users,
    projects,
    service_accounts,
    health,
)
_ERROR_SCHEMA = {
    "type": "object",
    "properties": {
        "detail": {"type": "string"},
        "type": {"type": "string"},
        "errors": {"type": "array", "items": {"type": "object"}},
    },
    "required": ["detail", "type"],
}


def build_state(
    settings: ServerSettings,
    stores: ServerStores,
    *,
    clock: Callable[[], float] | None = None,
    passwords: Passwords | None = None,
    resource_manager: ResourceManagerClient | None = None,
) -> ServerState:
    """The state of an app over ``stores``, paired with ``resource_manager`` (None: steps that
    ask for resources are refused); closing the client stays the caller's job."""
    from wharf.server.resource_manager import ServerRequests, pair

    state = ServerState(settings, stores.store, stores.accounts)
    pair(state, ServerRequests(resource_manager))
    if clock is not None:
        state.clock = clock
    if passwords is not None:
        state.passwords = passwords
    return state


def bootstrap(state: ServerState) -> None:
    """Create the default user, project and stack and the configured admin, if missing."""
    from wharf.server.default_stack import ensure_default_stack
    from wharf.store.defaults import ensure_defaults

    settings = state.settings
    if settings.create_defaults:
        ensure_defaults(state.store)
        ensure_default_stack(state.store, settings.artifact_root)
    name = settings.admin_username
    if name is None:
        return
    users = state.store.users
    try:
        user = users.create(name, is_admin=True)
    except EntityExistsError:
        user = users.get_by_name(name)
    credentials = state.accounts.credentials
    if not user.is_admin:
        credentials.set_admin(user.id, True)
    try:
        has_password = credentials.get(user.id).password_hash is not None
    except EntityNotFoundError:
        has_password = False
    if not has_password and settings.admin_password is not None:
        credentials.set_password(
            user.id, state.passwords.hash(settings.admin_password.get_secret_value())
        )


def create_app(settings: ServerSettings, *, state: ServerState | None = None) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if state is not None:
            app.state.wharf = state
            yield
            return
        from anyio import to_thread

        from wharf.server.resource_manager import connect
        from wharf.server.sweeper import LostRunSweeper

        stores = await to_thread.run_sync(lambda: open_server_stores(settings.database_url))
        rm = None
        sweeper = None
        try:
            rm = connect(settings)
            own = build_state(settings, stores, resource_manager=rm)
            await to_thread.run_sync(bootstrap, own)
            app.state.wharf = own
            sweeper = LostRunSweeper(own.store, release=own.release_ended).start()
            yield
        finally:
            if sweeper is not None:
                sweeper.close()
            if rm is not None:
                rm.close()
            stores.close()

    app = FastAPI(
        title="Wharf workspace server",
        version=__version__,
        lifespan=lifespan,
        openapi_url="/openapi.json",
        docs_url="/docs",
        redoc_url=None,
    )
    if state is not None:
        app.state.wharf = state
    errors.install(app)
    app.add_middleware(
        SizeLimits,
        max_body_bytes=settings.max_body_bytes,
        max_url_bytes=settings.max_url_bytes,
    )
    for module in ROUTERS:
        _add_routes(app, module.build_router())
    _install_openapi(app)
    return app


def _add_routes(app: FastAPI, router: APIRouter) -> None:
    """Add the router's routes to the app itself rather than ``include_router`` it: this
    FastAPI matches included routers through a per-request wrapper that costs more than the
    plain route list."""
    app.router.routes.extend(router.routes)


def _install_openapi(app: FastAPI) -> None:
    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title, version=app.version, routes=app.routes, description=__doc__
            )
            schema.setdefault("components", {}).setdefault("schemas", {})["Error"] = _ERROR_SCHEMA
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
