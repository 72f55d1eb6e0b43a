"""The workspace server's database cut away or emptied under a running server (a real
``wharf server serve`` process, its database reached through :mod:`tests.faults.tcp_proxy`).

While the database does not answer, requests fail in seconds with 503 and a body that names
nothing of the database, ``/health/live`` answers and ``/health/ready`` does not; once it is
back the server serves again without a restart. A database re-created empty answers 503
"schema missing; run migrations", never a 500 with SQL (on PostgreSQL, the server that rode out
the cut: starting a server and migrating its database costs seconds of CPU).
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa
from sqlalchemy.engine import URL, make_url

from tests.e2e.team import ADMIN, ADMIN_PASSWORD, Service, free_port
from tests.faults.tcp_proxy import TcpProxy

CUT_SECONDS = 15.0
FAST = 8.0
"""A request during the cut is answered within this (socket timeout 3 s, plus the pool's)."""
TIMEOUTS = {"connect_timeout": "2", "statement_timeout": "2", "socket_timeout": "3"}


@dataclass
class Served:
    url: str
    database: URL
    proxy: TcpProxy
    service: Service
    token: str = ""
    http: httpx.Client = field(default_factory=lambda: httpx.Client(timeout=30))

    def get(self, path: str, *, auth: bool = True) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.token}"} if auth else {}
        return self.http.get(f"{self.url}{path}", headers=headers)


@pytest.fixture
def served(
    backend_name: str, empty_database_url: Callable[[str], str], tmp_path: Path
) -> Iterator[Served]:
    database = make_url(empty_database_url(backend_name))
    assert database.host is not None and database.port is not None
    with TcpProxy(database.host, database.port) as proxy:
        proxied = database.set(host="127.0.0.1", port=proxy.port).update_query_dict(TIMEOUTS)
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("WHARF_")}
        env["WHARF_HOME"] = str(tmp_path / "service-home")
        service = Service(
            "workspace server",
            [
                "server",
                "serve",
                "--port",
                str(port),
                "--db-url",
                proxied.render_as_string(hide_password=False),
                "--secret-key",
                secrets.token_urlsafe(48),
                "--admin-username",
                ADMIN,
                "--admin-password",
                ADMIN_PASSWORD,
                "--log-level",
                "warning",
            ],
            env,
            f"{url}/health",
            tmp_path / "server.log",
        )
        service.start()
        try:
            login = httpx.post(
                f"{url}/api/v1/auth/login",
                json={"username": ADMIN, "password": ADMIN_PASSWORD},
                timeout=30,
            )
            login.raise_for_status()
            served = Served(url, database, proxy, service, login.json()["access_token"])
            with served.http:
                yield served
        finally:
            service.stop()


def _reveals_nothing(response: httpx.Response, database: URL) -> None:
    text = response.text
    for secret in (database.host, str(database.port), database.username, database.database):
        assert secret and secret not in text, f"{secret!r} in {text}"
    assert "select " not in text.lower()  # no SQL either


def _until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


@pytest.mark.parametrize("backend_name", ["postgresql"])  # the drivers' part: tests/sql
def test_a_database_cut_for_15_s_fails_requests_fast_and_the_server_recovers(
    served: Served,
) -> None:
    """The server then serves again; and once its database is recreated empty, it answers
    schema missing."""
    assert served.get("/api/v1/projects").status_code == 200
    served.proxy.cut("blackhole")
    cut_at = time.monotonic()
    answered = 0
    while time.monotonic() - cut_at < CUT_SECONDS:
        started = time.monotonic()
        response = served.get("/api/v1/projects")
        assert time.monotonic() - started < FAST
        assert response.status_code == 503, response.text
        assert response.json()["type"] == "StoreUnavailableError"
        _reveals_nothing(response, served.database)
        assert served.get("/health/live", auth=False).status_code == 200
        ready = served.get("/health/ready", auth=False)
        assert ready.status_code == 503
        _reveals_nothing(ready, served.database)
        answered += 1
        # A round a second at most: once the pool's connection is gone, each new one is
        # refused at once, and the server answers at once (a busy loop would burn a core).
        time.sleep(max(0.0, started + 1.0 - time.monotonic()))
    assert answered >= 2
    served.proxy.restore()
    _until(
        lambda: served.get("/health/ready", auth=False).status_code == 200,
        15,
        "the server never became ready again",
    )
    assert served.get("/api/v1/projects").status_code == 200
    _recreated_empty_answers_schema_missing(served)


@pytest.mark.parametrize("backend_name", ["mariadb"])  # PostgreSQL's: after the cut, above
def test_a_database_recreated_empty_answers_schema_missing(served: Served) -> None:
    assert served.get("/api/v1/projects").status_code == 200
    _recreated_empty_answers_schema_missing(served)


def _recreated_empty_answers_schema_missing(served: Served) -> None:
    admin = sa.create_engine(served.database, isolation_level="AUTOCOMMIT", poolclass=sa.NullPool)
    name = served.database.database
    try:
        with admin.connect() as conn:
            if conn.dialect.name == "postgresql":
                conn.exec_driver_sql("DROP SCHEMA public CASCADE")
                conn.exec_driver_sql("CREATE SCHEMA public")
            else:
                conn.exec_driver_sql(f"DROP DATABASE `{name}`")
                conn.exec_driver_sql(f"CREATE DATABASE `{name}`")
    finally:
        admin.dispose()
    for path, auth in (("/api/v1/projects", True), ("/health/ready", False), ("/health", False)):
        response = served.get(path, auth=auth)
        assert response.status_code == 503, response.text
        assert "schema missing; run migrations" in response.json()["detail"]
        _reveals_nothing(response, served.database)
    assert served.get("/health/live", auth=False).status_code == 200
