"""Running the Resource Manager's API in the foreground: uvicorn as :mod:`wharf.serving` sets it
up (bounded request heads, long keep-alive, one or several workers).

Owns :class:`AppFactory` (what each worker process calls to build its app) and :func:`run`.
Every worker runs its own service on the same database: the service is safe with several
processes (one scheduling transaction at a time), so workers need no coordination.
"""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import FastAPI

from wharf.resource_manager.api.settings import ApiSettings
from wharf.serving import serve


@dataclass(frozen=True)
class AppFactory:
    settings: ApiSettings

    def __call__(self) -> FastAPI:
        from wharf.resource_manager.api.app import create_app

        return create_app(self.settings)


def run(
    settings: ApiSettings,
    *,
    host: str = "127.0.0.1",
    port: int = 8238,
    workers: int = 1,
    log_level: str = "info",
    access_log: bool = False,
) -> None:
    """Serve until interrupted (SIGINT / SIGTERM): blocks."""
    serve(
        AppFactory(settings),
        host=host,
        port=port,
        workers=workers,
        log_level=log_level,
        access_log=access_log,
    )
