"""A real uvicorn server on a free local port, running an app in a thread of the test process.

Requests go over TCP like any client's; the app's state (stores, clock) can still be swapped
between tests (``app.state.wharf``), so one server serves a whole session.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import uvicorn
from argon2 import PasswordHasher
from fastapi import FastAPI

from wharf.server.app import build_state, create_app
from wharf.server.auth import api_keys
from wharf.server.auth.passwords import Passwords
from wharf.server.settings import ServerSettings
from wharf.server.state import ServerState
from wharf.store.sql.server_stores import ServerStores, open_server_stores

SECRET = "test-secret-" + "x" * 32
FAST_PASSWORDS = Passwords(PasswordHasher(time_cost=1, memory_cost=64, parallelism=1))


def settings(**overrides: Any) -> ServerSettings:
    values: dict[str, Any] = {
        "database_url": "sqlite:///unused.db",
        "secret_key": SECRET,
        "create_defaults": False,
        "auth_cache_seconds": 0.0,
    }
    values.update(overrides)
    return ServerSettings(**values)


class LiveServer:
    def __init__(self, app: FastAPI) -> None:
        self.app = app
        # proto=IPPROTO_TCP: asyncio sets TCP_NODELAY only on such sockets (else Nagle's
        # algorithm and delayed ACKs add 40 ms to every response).
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind(("127.0.0.1", 0))
        self.port = self._socket.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(app, lifespan="off", log_level="warning", access_log=False)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, daemon=True
        )

    def start(self) -> LiveServer:
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the test server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=20)
        self._socket.close()

    def use(self, state: ServerState) -> None:
        self.app.state.wharf = state


def start_server(server_settings: ServerSettings | None = None) -> LiveServer:
    return LiveServer(create_app(server_settings or settings())).start()


def open_state(
    url: str,
    *,
    clock: Callable[[], datetime] | None = None,
    token_clock: Callable[[], float] | None = None,
    server_settings: ServerSettings | None = None,
) -> tuple[ServerState, ServerStores]:
    stores = open_server_stores(url, clock=clock)
    state = build_state(
        server_settings or settings(database_url=url),
        stores,
        clock=token_clock,
        passwords=FAST_PASSWORDS,
    )
    return state, stores


def admin_key(state: ServerState, name: str = "test-admin") -> str:
    """A new admin service account's API key (its ``last_used`` is not written by requests)."""
    account = state.accounts.service_accounts.create(name, is_admin=True)
    return service_key(state, account.id)


def service_key(state: ServerState, account_id: Any, name: str = "key") -> str:
    secret, digest = api_keys.new_secret()
    record = state.accounts.api_keys.create(account_id, name, digest)
    state.key_touches[record.id] = time.monotonic() + 1e9  # never written by requests
    return api_keys.format_key(record.id, secret)


def shared_default_stack(state: ServerState, artifact_root: Path) -> None:
    """The ``default`` stack of a server started with ``--artifact-root artifact_root``."""
    from wharf.server.default_stack import ensure_default_stack

    ensure_default_stack(state.store, str(artifact_root))
