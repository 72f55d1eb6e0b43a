"""Serving an ASGI app in the foreground with uvicorn (:func:`serve`, :func:`config`), for the
workspace server and the Resource Manager's API alike.

Invariant: HTTP is parsed by h11 with a bound on request heads (uvicorn's
``h11_max_incomplete_event_size``): a head is buffered only until more than
``MAX_REQUEST_HEAD_BYTES`` of it has arrived without its end, then refused (400, the connection
closed); anything within the bound reaches the app.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import uvicorn

MAX_REQUEST_HEAD_BYTES = 256 * 1024
"""Request lines and headers up to this size always reach the app; h11 checks the bound after
each read, so a head up to one read larger may still get through."""
KEEP_ALIVE_SECONDS = 75
"""Longer than clients keep idle connections (httpx: 5 s by default), so a client never reuses a
connection the server is closing; steps beat every 15 s by default."""
GRACEFUL_SHUTDOWN_SECONDS = 10


@dataclass(frozen=True)
class _FreezingFactory:
    """``build`` (picklable, run in each worker), then the worker's heap frozen: what is loaded
    and built by now lives as long as the worker, so full collections (which stall every request
    of the worker) need not walk it."""

    build: Callable[[], Any]

    def __call__(self) -> Any:
        app = self.build()
        gc.freeze()
        return app


def config(
    app_factory: Callable[[], Any],
    *,
    host: str,
    port: int,
    workers: int = 1,
    log_level: str = "info",
    access_log: bool = False,
) -> uvicorn.Config:
    """uvicorn's settings for the app ``app_factory`` builds: h11 with the request-head bound,
    and requests in flight given up to ``GRACEFUL_SHUTDOWN_SECONDS`` to finish on SIGINT or
    SIGTERM (uvicorn's handlers)."""
    import uvicorn

    return uvicorn.Config(
        app_factory,
        factory=True,
        host=host,
        port=port,
        workers=workers,
        http="h11",
        h11_max_incomplete_event_size=MAX_REQUEST_HEAD_BYTES,
        timeout_keep_alive=KEEP_ALIVE_SECONDS,
        log_level=log_level,
        access_log=access_log,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
    )


def serve(
    factory: Callable[[], Any],
    *,
    host: str,
    port: int,
    workers: int = 1,
    log_level: str = "info",
    access_log: bool = False,
) -> None:
    """Serve the app ``factory`` builds (in each worker) until interrupted: blocks.

    One worker is a ``uvicorn.Server``; several are uvicorn's own supervisor (``Multiprocess``:
    a socket bound once, handed to spawned workers, restarted if they die). Either way SIGINT
    (Ctrl-C) ends it normally: it returns once the server has shut down. ``factory`` is a
    picklable object holding the settings, so no import string, environment variable or
    module-level app is needed to pass them to the workers.
    """
    import uvicorn
    from uvicorn.supervisors import Multiprocess

    settings = config(
        _FreezingFactory(factory),
        host=host,
        port=port,
        workers=workers,
        log_level=log_level,
        access_log=access_log,
    )
    if workers <= 1:
        # Once shut down, uvicorn raises the SIGINT it caught again (KeyboardInterrupt here):
        # Ctrl-C is how a foreground server is meant to end, as with several workers.
        with contextlib.suppress(KeyboardInterrupt):
            uvicorn.Server(settings).run()
        return
    sock = settings.bind_socket()
    try:
        Multiprocess(settings, sockets=[sock]).run()
    finally:
        sock.close()
