"""Running the server in the foreground with uvicorn, with one or several worker processes.

Workers are uvicorn's own supervisor (``Multiprocess``: a socket bound once, handed to spawned
workers, restarted if they die). Each worker builds its app by calling :class:`AppFactory` --
a picklable object holding the settings -- so no import string, environment variable or
module-level app is needed to pass the settings along.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass

from fastapi import FastAPI

from wharf.server.settings import ServerSettings

H11_MAX_EVENT_BYTES = 256 * 1024
"""Request lines and headers up to this size reach the app (which answers 414 beyond its own
``max_url_bytes``); larger ones are refused by uvicorn itself."""


@dataclass(frozen=True)
class AppFactory:
    settings: ServerSettings

    def __call__(self) -> FastAPI:
        from wharf.server.app import create_app

        return create_app(self.settings)


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket for the workers.

    Created with ``proto=IPPROTO_TCP`` (uvicorn's ``Config.bind_socket`` leaves it 0): asyncio
    turns on ``TCP_NODELAY`` only for such sockets, and without it every response written in
    two parts waits ~40 ms for a delayed ACK.
    """
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
    settings: ServerSettings,
    *,
    host: str = "127.0.0.1",
    port: int = 8237,
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
        http="h11",
        h11_max_incomplete_event_size=H11_MAX_EVENT_BYTES,
        log_level=log_level,
        access_log=access_log,
        timeout_graceful_shutdown=10,
    )
    if workers <= 1:
        uvicorn.Server(config).run()
        return
    sock = bind_socket(host, port)
    try:
        Multiprocess(config, sockets=[sock]).run()
    finally:
        sock.close()
