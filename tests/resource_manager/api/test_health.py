"""The Resource Manager's health routes: ``/health/live`` answers while the process serves,
``/health/ready`` (and ``/health``) only while its database answers; a failing one says so in
fixed words, never naming the database. The database is cut away through a real TCP proxy
(:mod:`tests.faults.tcp_proxy`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import httpx
import pytest
from sqlalchemy.engine import URL, make_url

from tests.faults.tcp_proxy import TcpProxy
from tests.resource_manager.api.live import LiveServer, start_rm

TIMEOUTS = {"connect_timeout": "2", "statement_timeout": "1", "socket_timeout": "2"}


def test_health_routes_answer_without_a_token(http: httpx.Client) -> None:
    for path in ("/health", "/health/ready", "/health/live"):
        response = http.get(path)
        assert response.status_code == 200 and response.json() == {"status": "ok"}


@pytest.fixture
def behind_proxy(
    empty_database_url: Callable[[str], str],
) -> Iterator[tuple[TcpProxy, LiveServer, URL]]:
    database = make_url(empty_database_url("postgresql"))
    assert database.host is not None and database.port is not None
    with TcpProxy(database.host, database.port) as proxy:
        proxied = database.set(host="127.0.0.1", port=proxy.port).update_query_dict(TIMEOUTS)
        server = start_rm(proxied.render_as_string(hide_password=False))
        try:
            yield proxy, server, database
        finally:
            server.stop()


def test_readiness_follows_the_database_and_reveals_nothing_of_it(
    behind_proxy: tuple[TcpProxy, LiveServer, URL],
) -> None:
    proxy, server, database = behind_proxy
    assert httpx.get(f"{server.url}/health/ready", timeout=30).status_code == 200
    proxy.cut("blackhole")
    started = time.monotonic()
    ready = httpx.get(f"{server.url}/health/ready", timeout=30)
    assert time.monotonic() - started < 6
    assert ready.status_code == 503
    assert ready.json()["error"] == "StoreUnavailableError"
    for secret in (database.host, str(database.port), str(proxy.port), database.database):
        assert secret and secret not in ready.text
    assert httpx.get(f"{server.url}/health/live", timeout=30).status_code == 200
    proxy.restore()
    deadline = time.monotonic() + 15
    while httpx.get(f"{server.url}/health", timeout=30).status_code != 200:
        assert time.monotonic() < deadline, "never ready again"
        time.sleep(0.1)
