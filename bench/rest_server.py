"""Shared by the REST benchmarks: a workspace server in its own process(es), and its database.

``ServerProcess`` runs ``wharf server serve`` (uvicorn, ``workers`` processes) on a free port
with a throw-away Wharf home and an admin (``bench`` / ``bench-password``); ``database`` yields a
fresh SQLite file or a fresh PostgreSQL database (dropped at the end).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import sqlalchemy as sa

ADMIN = ("bench", "bench-password")
POSTGRES_URL = os.environ.get(
    "WHARF_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def database(kind: str) -> Iterator[str]:
    if kind == "sqlite":
        with tempfile.TemporaryDirectory() as tmp:
            yield f"sqlite:///{Path(tmp) / 'bench.db'}"
        return
    from wharf.store.sql.engine import normalize_url

    admin = normalize_url(POSTGRES_URL)
    name = f"wharf_bench_{uuid.uuid4().hex[:8]}"
    engine = sa.create_engine(admin, isolation_level="AUTOCOMMIT", poolclass=sa.NullPool)
    with engine.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    try:
        yield admin.set(database=name).render_as_string(hide_password=False)
    finally:
        with engine.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        engine.dispose()


class ServerProcess:
    def __init__(self, db_url: str, workers: int = 1) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._home = tempfile.TemporaryDirectory()
        env = {k: v for k, v in os.environ.items() if not k.startswith("WHARF_")}
        env.update(
            WHARF_HOME=self._home.name,
            WHARF_SERVER_ADMIN_USERNAME=ADMIN[0],
            WHARF_SERVER_ADMIN_PASSWORD=ADMIN[1],
        )
        command = [
            sys.executable,
            "-m",
            "wharf.cli.main",
            "server",
            "serve",
            "--port",
            str(self.port),
            "--db-url",
            db_url,
            "--workers",
            str(workers),
            "--log-level",
            "warning",
        ]
        self.process = subprocess.Popen(command, env=env, start_new_session=True)
        deadline = time.monotonic() + 60
        while True:
            if self.process.poll() is not None:
                raise RuntimeError("the server exited while starting")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/health", timeout=1).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError("the server did not start")
            time.sleep(0.1)

    def admin_token(self) -> str:
        answer = httpx.post(
            f"{self.url}/api/v1/auth/login", json={"username": ADMIN[0], "password": ADMIN[1]}
        )
        answer.raise_for_status()
        return str(answer.json()["access_token"])

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        self._home.cleanup()

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
