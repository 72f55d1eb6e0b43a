"""The Resource Manager's FastAPI application: :func:`create_app` (nothing is built at import).

The resource-request routes are lean Starlette routes matched first (:mod:`.lean`, the hot
path); the administrative ones are ordinary FastAPI routes, added flat.

Invariants: every route but ``/health`` and ``/v1/auth/login`` needs a valid bearer token (and
``/metrics`` too unless ``metrics_public``), checked before a body is read; a body over
``max_body_bytes`` is refused before any of it is read (:mod:`.gate`); the service owns every
rule about who may do what; blocking service calls run in the thread pool, never on the event
loop; the per-request writes are awaited on the service's combiner, without a thread each.
"""

from __future__ import annotations

import inspect
import logging
import os
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from typing import Any

import anyio.to_thread
from fastapi import FastAPI

from wharf import __version__
from wharf.core.errors import WharfError
from wharf.resource_manager.api.credentials import CredentialChecker
from wharf.resource_manager.api.deps import AppState
from wharf.resource_manager.api.errors import install_error_handlers
from wharf.resource_manager.api.gate import guard
from wharf.resource_manager.api.metrics import MetricsReader
from wharf.resource_manager.api.routes import auth, config, ops, requests
from wharf.resource_manager.api.settings import ApiSettings
from wharf.resource_manager.api.tokens import TokenSigner
from wharf.resource_manager.service import ResourceManagerService, ServiceOptions

logger = logging.getLogger(__name__)


class _Sweeper:
    """Calls ``service.beat()`` and ``service.sweep_if_due()`` every ``interval`` seconds until
    stopped."""

    def __init__(self, service: ResourceManagerService, interval: float) -> None:
        self._service = service
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="wharf-rm-sweeper", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self._service.beat()
                self._service.sweep_if_due()
            except WharfError as exc:  # the database may be away for a while: keep trying
                logger.warning("Resource Manager sweep failed: %s", exc)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


def create_app(
    settings: ApiSettings,
    *,
    clock: Callable[[], datetime] | None = None,
    token_clock: Callable[[], float] | None = None,
) -> FastAPI:
    """The API over the RM database in ``settings``; ``clock`` drives the service (aware UTC),
    ``token_clock`` token issue and expiry (seconds since the epoch); both default to real time.

    The app's lifespan opens (and migrates) the service, builds the token signer, the credential
    checker and the metrics reader, sizes the thread pool that runs service calls and records
    the service as serving before any request is served (a takeover after a restart extends
    live leases by the downtime); then a :class:`_Sweeper` records it again every
    ``liveness_interval_seconds`` and expires lapsed leases every ``sweep_interval_seconds``
    even when nobody calls. Shutdown stops the sweeper and closes everything.
    """

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        anyio.to_thread.current_default_thread_limiter().total_tokens = settings.threads
        options = ServiceOptions(
            sweep_interval=timedelta(seconds=settings.sweep_interval_seconds),
            liveness_interval=timedelta(seconds=settings.liveness_interval_seconds),
        )
        service = await anyio.to_thread.run_sync(
            lambda: ResourceManagerService.open(settings.database_url, clock=clock, options=options)
        )
        secret = settings.secret_key.get_secret_value().encode()
        admin_key = settings.admin_api_key
        state = AppState(
            settings=settings,
            service=service,
            signer=TokenSigner(secret, settings.access_token_ttl_seconds, *_opt(token_clock)),
            checker=CredentialChecker(
                settings.credentials, admin_key.get_secret_value() if admin_key else None
            ),
            metrics=MetricsReader(settings.database_url, service, settings.metrics_cache_seconds),
        )
        try:  # before serving: a takeover extends the leases nobody could renew
            await anyio.to_thread.run_sync(service.beat)
        except BaseException:
            service.close()
            raise
        tick = min(settings.liveness_interval_seconds, settings.sweep_interval_seconds)
        sweeper = _Sweeper(service, tick)
        sweeper.start()
        app.state.rm = state
        try:
            yield
        finally:
            sweeper.stop()
            state.metrics.close()
            service.close()

    app = FastAPI(
        title="Wharf Resource Manager",
        version=__version__,
        lifespan=lifespan,
        docs_url="/docs",
        redoc_url=None,
        **_telemetry(),
    )
    install_error_handlers(app)
    for module in (auth, ops, config):
        app.router.routes.extend(module.router.routes)
    requests.routes.mount(app)
    guard(app, settings.max_body_bytes)
    return app


_UNSET_PROVIDERS = frozenset(
    {
        "ProxyTracerProvider",
        "NoOpTracerProvider",
        "_ProxyMeterProvider",
        "NoOpMeterProvider",
        "ProxyLoggerProvider",
        "NoOpLoggerProvider",
    }
)
"""OpenTelemetry's placeholders for a global provider nobody set up."""


def _telemetry() -> dict[str, Any]:
    """FastAPI's own OpenTelemetry hooks (FastAPI >= 0.165), on for the signals whose provider
    is set up when the app is built, or all of them when FastAPI is asked to set them up:
    with no provider anywhere FastAPI would still ask OpenTelemetry for the three global
    providers on every request (each lookup reads the environment)."""
    if "telemetry" not in inspect.signature(FastAPI.__init__).parameters:
        return {}
    if os.environ.get("FASTAPI_OTEL_AUTO_CONFIGURE", "").lower() == "true":
        return {}
    try:
        from opentelemetry import _logs, metrics, trace
    except ImportError:
        return {}
    providers = {
        "tracing": trace.get_tracer_provider(),
        "metrics": metrics.get_meter_provider(),
        "logs": _logs.get_logger_provider(),
    }
    return {
        "telemetry": {
            signal: type(provider).__name__ not in _UNSET_PROVIDERS
            for signal, provider in providers.items()
        }
    }


def _opt(clock: Callable[[], float] | None) -> tuple[Callable[[], float], ...]:
    return () if clock is None else (clock,)
