"""Running the API in the foreground with uvicorn, with one or several worker processes.

Owns: :class:`AppFactory`, :func:`run`, :func:`bind_socket`.

Workers are uvicorn's own supervisor (a socket bound once, handed to spawned workers, restarted
if they die). Each worker builds its app by calling :class:`AppFactory`, a picklable object
holding the settings, so no import string, environment variable or module-level app is needed.
Every worker runs its own service on the same database: the service is safe with several
processes (one scheduling transaction at a time), so workers need no coordination.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass

from fastapi import FastAPI

from wharf.resource_manager.api.settings import ApiSettings


@dataclass(frozen=True)
class AppFactory:
    settings: ApiSettings

    def __call__(self) -> FastAPI:
        from wharf.resource_manager.api.app import create_app

        return create_app(self.settings)


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket created with ``IPPROTO_TCP``, so asyncio sets ``TCP_NODELAY`` on
    its connections (otherwise a response written in two parts waits for a delayed ACK)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


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
    import uvicorn
    from uvicorn.supervisors import Multiprocess

    config = uvicorn.Config(
        AppFactory(settings),
        factory=True,
        host=host,
        port=port,
        workers=workers,
        log_level=log_level,
        access_log=access_log,
        timeout_graceful_shutdown=10,
    )
    sock = bind_socket(host, port)
    try:
        if workers <= 1:
            uvicorn.Server(config).run(sockets=[sock])
        else:
            Multiprocess(config, sockets=[sock]).run()
    finally:
        sock.close()
