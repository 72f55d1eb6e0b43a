"""A real uvicorn server on a free local port, running an app in a thread of the test process.

Requests go over TCP like any client's. Credentials are hashed with cheap argon2 parameters (the
parameters travel in the hash, so verification is cheap too); the principals are:

- ``admin`` — the bootstrap key :data:`ADMIN_KEY` (administrator);
- ``alice``, ``bob`` — API keys :data:`ALICE_KEY`, :data:`BOB_KEY` (not administrators, trusted
  to assert subjects like a workspace server: alice is the workspace's principal in team tests);
- ``eve`` — API key :data:`EVE_KEY` (neither: her requests are made for her account only);
- ``ops`` — username ``ops`` / password :data:`OPS_PASSWORD` (administrator).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from datetime import datetime
from functools import cache
from typing import Any

import uvicorn
from argon2 import PasswordHasher
from fastapi import FastAPI

from wharf.resource_manager.api.app import create_app
from wharf.resource_manager.api.settings import ApiSettings, Credential
from wharf.resource_manager.client.http import HttpResourceManager

SECRET = "rm-test-secret-" + "x" * 32
ADMIN_KEY = "bootstrap-admin-key-0123456789"
ALICE_KEY = "wrm.alice." + "a" * 48
BOB_KEY = "wrm.bob." + "b" * 48
EVE_KEY = "wrm.eve." + "e" * 48
OPS_PASSWORD = "correct horse battery staple"
_FAST = PasswordHasher(time_cost=1, memory_cost=64, parallelism=1)


@cache
def credentials() -> tuple[Credential, ...]:
    return (
        Credential(name="alice", api_key_hash=_FAST.hash(ALICE_KEY), asserts_subjects=True),
        Credential(name="bob", api_key_hash=_FAST.hash(BOB_KEY), asserts_subjects=True),
        Credential(name="eve", api_key_hash=_FAST.hash(EVE_KEY)),
        Credential(name="ops", admin=True, password_hash=_FAST.hash(OPS_PASSWORD)),
    )


def settings(database_url: str, **overrides: Any) -> ApiSettings:
    values: dict[str, Any] = {
        "database_url": database_url,
        "secret_key": SECRET,
        "admin_api_key": ADMIN_KEY,
        "credentials": credentials(),
        "metrics_cache_seconds": 0.0,
        "threads": 16,
    }
    values.update(overrides)
    return ApiSettings(**values)


def free_socket(port: int = 0) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    return sock


class LiveServer:
    """``app`` served on ``port`` (a free one by default) from a thread; ``start``/``stop``."""

    def __init__(self, app: FastAPI, port: int = 0) -> None:
        self.app = app
        self._socket = free_socket(port)
        self.port = self._socket.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(app, log_level="warning", access_log=False)
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
            time.sleep(0.005)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=20)
        self._socket.close()

    def client(self, api_key: str = ADMIN_KEY, **options: Any) -> HttpResourceManager:
        return HttpResourceManager(self.url, api_key=api_key, **options)


def start_rm(
    database_url: str,
    clock: Callable[[], datetime] | None = None,
    port: int = 0,
    **overrides: Any,
) -> LiveServer:
    if clock is not None:  # a fake clock jumps, and no timer beats in its time
        overrides.setdefault("liveness_interval_seconds", 3600.0)
    app = create_app(settings(database_url, **overrides), clock=clock)
    return LiveServer(app, port=port).start()
