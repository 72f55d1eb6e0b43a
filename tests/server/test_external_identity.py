"""External identity: the server introspects the provider's token at a configured URL (a real
local HTTP server here) and creates or updates the Wharf account."""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import httpx
import pytest

from tests.server.live import LiveServer, open_state, settings
from wharf.server.state import ServerState

TOKENS: dict[str, dict[str, Any]] = {
    "tok-alice": {"active": True, "sub": "ext-1", "username": "alice", "is_superuser": True},
    "tok-alice-demoted": {
        "active": True,
        "id": "ext-1",
        "username": "alice",
        "is_superuser": False,
    },
    "tok-bob": {"active": True, "id": "ext-2", "username": "bob"},
    "tok-robot": {
        "active": True,
        "id": "ext-3",
        "username": "robot",
        "is_service_account": True,
        "is_superuser": True,
    },
    "tok-expired": {"active": False},
    "tok-taken": {"active": True, "id": "ext-4", "username": "local"},
}


class Provider(BaseHTTPRequestHandler):
    seen: list[tuple[str, str | None]] = []

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length", 0))
        token = parse_qs(self.rfile.read(length).decode()).get("token", [""])[0]
        Provider.seen.append((token, self.headers.get("authorization")))
        if token == "tok-broken":
            self.send_response(500)
            self.end_headers()
            return
        answer = TOKENS.get(token, {"active": False})
        payload = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def provider() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Provider)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/introspect"
    server.shutdown()
    server.server_close()


@pytest.fixture
def external(
    live: LiveServer, provider: str, tmp_path: Path, _sqlite_template: Path
) -> Iterator[tuple[ServerState, httpx.Client]]:
    path = tmp_path / "external.db"
    shutil.copyfile(_sqlite_template, path)
    url = f"sqlite:///{path}"
    state, stores = open_state(
        url,
        server_settings=settings(
            database_url=url,
            introspection_url=provider,
            introspection_authorization="Basic cWE6cWE=",
        ),
    )
    live.use(state)
    with httpx.Client(base_url=live.url) as client:
        yield state, client
    stores.close()


def login(client: httpx.Client, token: str) -> httpx.Response:
    return client.post("/api/v1/auth/external", json={"token": token})


def me(client: httpx.Client, response: httpx.Response) -> dict[str, Any]:
    token = response.json()["access_token"]
    answer: dict[str, Any] = client.get(
        "/api/v1/auth/me", headers={"authorization": f"Bearer {token}"}
    ).json()
    return answer


def test_users_are_created_and_superuser_maps_to_admin(
    external: tuple[ServerState, httpx.Client],
) -> None:
    state, client = external
    first = login(client, "tok-alice")
    assert first.status_code == 200
    assert Provider.seen[-1] == ("tok-alice", "Basic cWE6cWE=")
    info = me(client, first)
    assert (info["kind"], info["name"], info["is_admin"]) == ("user", "alice", True)
    alice = state.store.users.get_by_name("alice")
    assert alice.is_admin and state.accounts.credentials.get(alice.id).external_id == "ext-1"
    # The next login updates the flag; the same account is found by its external id.
    again = me(client, login(client, "tok-alice-demoted"))
    assert (again["id"], again["is_admin"]) == (str(alice.id), False)
    assert state.store.users.get(alice.id).is_admin is False
    assert me(client, login(client, "tok-bob"))["is_admin"] is False


def test_service_accounts_never_get_admin_from_the_provider(
    external: tuple[ServerState, httpx.Client],
) -> None:
    state, client = external
    info = me(client, login(client, "tok-robot"))
    assert (info["kind"], info["name"], info["is_admin"]) == ("service_account", "robot", False)
    assert state.accounts.service_accounts.get_by_name("robot").is_admin is False
    assert state.store.users.list().total == 0


def test_refusals(external: tuple[ServerState, httpx.Client]) -> None:
    state, client = external
    assert login(client, "tok-expired").status_code == 401
    assert login(client, "tok-unknown").status_code == 401
    assert login(client, "tok-broken").status_code == 503
    local = state.store.users.create("local")
    state.accounts.credentials.set_password(local.id, state.passwords.hash("a password"))
    taken = login(client, "tok-taken")
    assert taken.status_code == 409 and "already exists" in taken.json()["detail"]
    alice = me(client, login(client, "tok-alice"))
    state.accounts.credentials.set_active(state.store.users.get_by_name("alice").id, False)
    assert login(client, "tok-alice").status_code == 401
    response = client.get("/api/v1/auth/me", headers={"authorization": "Bearer tok-alice"})
    assert response.status_code == 401 and alice["name"] == "alice"  # never a bearer credential


def test_without_a_provider_external_login_is_refused(
    live: LiveServer, tmp_path: Path, _sqlite_template: Path
) -> None:
    path = tmp_path / "plain.db"
    shutil.copyfile(_sqlite_template, path)
    state, stores = open_state(f"sqlite:///{path}")
    live.use(state)
    with httpx.Client(base_url=live.url) as client:
        assert login(client, "tok-alice").status_code == 401
    stores.close()
