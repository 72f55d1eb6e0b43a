"""Logging in (:mod:`wharf.store.rest.session`) over real HTTP: a refusal by a workspace server
stays what it is (a wrong password, a revoked key); a refusal by something else (a URL with
``/api/v1``, another HTTP server) says that no workspace server answers there, instead of the
bare "Not Found" or "HTTP 501" it used to be."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.server.live import LiveServer, open_state
from wharf.core.errors import InputError
from wharf.store.rest.errors import NotAuthenticatedError
from wharf.store.rest.session import login_with_password, whoami

NO_SERVER = "No Wharf workspace server answers at"


@pytest.fixture
def server_url(live_server: LiveServer, tmp_path: Path, _sqlite_template: Path) -> Iterator[str]:
    path = tmp_path / "server.db"
    shutil.copyfile(_sqlite_template, path)
    state, stores = open_state(f"sqlite:///{path}")
    live_server.use(state)
    try:
        yield live_server.url
    finally:
        stores.close()


@pytest.fixture
def other_program() -> Iterator[str]:
    """A plain HTTP server that knows nothing of Wharf: 404 for every GET, 501 for a POST."""

    class Quiet(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_error(404)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_workspace_servers_refusals_are_kept(server_url: str) -> None:
    with pytest.raises(NotAuthenticatedError, match="Invalid username or password"):
        login_with_password(server_url, "nobody", "wrong password")
    with pytest.raises(NotAuthenticatedError, match="Invalid or revoked API key"):
        whoami(server_url, "wharf_" + "0" * 32 + "_x")


def test_a_url_with_the_api_path_is_no_workspace_server(server_url: str) -> None:
    with pytest.raises(InputError, match=NO_SERVER):
        login_with_password(f"{server_url}/api/v1", "nobody", "wrong password")
    with pytest.raises(InputError, match=NO_SERVER):
        whoami(f"{server_url}/api/v1", "wharf_" + "0" * 32 + "_x")


def test_another_http_server_is_no_workspace_server(other_program: str) -> None:
    with pytest.raises(InputError, match=NO_SERVER):
        login_with_password(other_program, "admin", "some password")
    with pytest.raises(InputError, match=NO_SERVER):
        whoami(other_program, "wharf_key")
