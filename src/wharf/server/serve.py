"""Running the workspace server in the foreground: uvicorn as :mod:`wharf.serving` sets it up.

Owns :class:`AppFactory` (what each worker process calls to build its app) and :func:`run`.
"""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import FastAPI

from wharf.server.settings import ServerSettings
from wharf.serving import serve


@dataclass(frozen=True)
class AppFactory:
    settings: ServerSettings

    def __call__(self) -> FastAPI:
        from wharf.server.app import create_app

        return create_app(self.settings)


def run(
    settings: ServerSettings,
    *,
    host: str = "127.0.0.1",
    port: int = 8237,
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
