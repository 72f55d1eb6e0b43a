# ruff: noqa: F811  (fixtures imported from the server tests)
"""A server or Resource Manager URL carrying a secret parameter (``;token=``) is shown
with that value as ``***`` in the CLI's error line (``wharf.core.url_credentials``). Real
``wharf`` processes against a port that refuses connections, or a live workspace server behind
a gateway whose path carries a token."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from tests.cli.test_cli import assert_one_line_error
from tests.cli.test_rm_cli import run
from tests.cli.workspace_cli import live  # noqa: F401 (fixture)
from tests.resource_manager.api.live import free_socket
from tests.server.resource_world import (  # noqa: F401 (fixtures)
    Team,
    _rm_sqlite_template,
    rm_server,
    team,
)

SECRET = "S3cretTok"


@pytest.fixture
def refused() -> Iterator[str]:
    """``http://127.0.0.1:PORT``: a port bound, never listening, so connections are refused."""
    sock = free_socket()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        sock.close()


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WHARF_")}
    return {**env, "WHARF_HOME": str(tmp_path / "home"), **extra}


def test_an_unreachable_server_url_is_shown_without_its_token(tmp_path: Path, refused: str) -> None:
    url = f"{refused}/wharf;token={SECRET}"  # a query string is refused: test_server_url_query
    env = _env(tmp_path, WHARF_SERVER_URL=url, WHARF_API_KEY="k" * 20)
    result = run("runs", "list", env=env)
    assert_one_line_error(result, f"Cannot reach the Wharf server at {refused}/wharf;token=***")
    assert SECRET not in result.stdout + result.stderr


def test_an_unreachable_resource_manager_url_is_shown_without_its_key(
    tmp_path: Path, refused: str
) -> None:
    url = f"{refused}/rm;api_key={SECRET};sig={SECRET}"
    result = run("pool", "list", "--rm-url", url, "--api-key", "k" * 20, env=_env(tmp_path))
    assert_one_line_error(
        result, f"The Resource Manager at {refused}/rm;api_key=***;sig=*** is unreachable"
    )
    assert SECRET not in result.stdout + result.stderr


GATEWAY_PREFIX = f"/wharf;token={SECRET}"


@pytest.fixture
def gateway(team: Team) -> Iterator[str]:
    """The team's workspace server behind an HTTP gateway that takes its requests under
    ``/wharf;token=SECRET`` (a path parameter such gateways check) and passes them on without
    that prefix; its URL, prefix included."""
    upstream = team.world.url.rstrip("/")

    class Forward(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            assert self.path.startswith(GATEWAY_PREFIX), self.path
            headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
            answer = httpx.get(upstream + self.path[len(GATEWAY_PREFIX) :], headers=headers)
            self.send_response(answer.status_code)
            self.send_header("content-type", answer.headers.get("content-type", "text/plain"))
            self.send_header("content-length", str(len(answer.content)))
            self.end_headers()
            self.wfile.write(answer.content)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Forward)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}{GATEWAY_PREFIX}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_request_list_names_the_server_without_its_token(
    team: Team, gateway: str, tmp_path: Path
) -> None:
    world = team.world
    env = _env(
        tmp_path, WHARF_SERVER_URL=gateway, WHARF_API_KEY=world.token_for(world.user("loner"))
    )
    result = run("request", "list", env=env)
    assert_one_line_error(
        result,
        f"(loner) are a member of no project on the server at {gateway.replace(SECRET, '***')}: ",
    )
    assert SECRET not in result.stdout + result.stderr
