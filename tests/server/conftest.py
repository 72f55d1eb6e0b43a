"""Server fixtures: one real uvicorn server per test process, a fresh database per test.

``world`` gives a server whose store is a fresh SQLite file (real store clock; the token clock
is a controllable :class:`TokenClock`), with projects A and B and principals of every role:

    admin      an admin service account (API key)
    padmin     admin of project A        member     member of project A
    viewer     viewer of project A       other      member of project B only

``world.client(credential)`` is an ``httpx.Client`` on the server (``None``: anonymous).
"""

from __future__ import annotations

import shutil
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.server.live import LiveServer, admin_key, open_state, start_server
from wharf.server.auth import issue
from wharf.server.auth.principal import Principal
from wharf.server.state import ServerState
from wharf.store.account_models import ProjectRole
from wharf.store.models import ProjectRecord, UserRecord
from wharf.store.sql.server_stores import ServerStores

ROLES = ("anonymous", "viewer", "member", "other", "admin")


class TokenClock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class World:
    server: LiveServer
    state: ServerState
    stores: ServerStores
    clock: TokenClock
    a: ProjectRecord
    b: ProjectRecord
    credentials: dict[str, str | None] = field(default_factory=dict)
    users: dict[str, UserRecord] = field(default_factory=dict)
    _clients: list[httpx.Client] = field(default_factory=list)

    @property
    def url(self) -> str:
        return self.server.url

    def client(self, credential: str | None = None) -> httpx.Client:
        headers = {"authorization": f"Bearer {credential}"} if credential else {}
        client = httpx.Client(base_url=self.url, headers=headers, timeout=30)
        self._clients.append(client)
        return client

    def as_role(self, role: str) -> httpx.Client:
        return self.client(self.credentials[role])

    def user(self, name: str, *, is_admin: bool = False, password: str | None = None) -> UserRecord:
        user = self.stores.store.users.create(name, is_admin=is_admin)
        credentials = self.state.accounts.credentials
        if password is None:
            credentials.set_active(user.id, True)
        else:
            credentials.set_password(user.id, self.state.passwords.hash(password))
        return user

    def token_for(self, user: UserRecord) -> str:
        principal = Principal("user", user.id, user.name, user.is_admin)
        return issue.access_token(self.state, principal).access_token

    def member(self, name: str, project: ProjectRecord, role: ProjectRole) -> str:
        user = self.user(name)
        self.state.accounts.memberships.set_role(project.id, role, user_id=user.id)
        self.users[name] = user
        return self.token_for(user)


@pytest.fixture(scope="session")
def live() -> Iterator[LiveServer]:
    server = start_server()
    yield server
    server.stop()


@pytest.fixture
def world(live: LiveServer, tmp_path: Path, _sqlite_template: Path) -> Iterator[World]:
    path = tmp_path / f"server-{uuid.uuid4().hex[:8]}.db"
    shutil.copyfile(_sqlite_template, path)
    clock = TokenClock()
    state, stores = open_state(f"sqlite:///{path}", token_clock=clock)
    live.use(state)
    store = stores.store
    world = World(
        live, state, stores, clock, store.projects.create("A"), store.projects.create("B")
    )
    world.credentials = {
        "anonymous": None,
        "admin": admin_key(state),
        "padmin": world.member("padmin", world.a, ProjectRole.ADMIN),
        "member": world.member("member", world.a, ProjectRole.MEMBER),
        "viewer": world.member("viewer", world.a, ProjectRole.VIEWER),
        "other": world.member("other", world.b, ProjectRole.MEMBER),
    }
    try:
        yield world
    finally:
        for client in world._clients:
            client.close()
        stores.close()


def body(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return response.text


@pytest.fixture(params=["sqlite", "postgresql"])
def db_world(
    request: pytest.FixtureRequest, live: LiveServer, tmp_path: Path, _sqlite_template: Path
) -> Iterator[World]:
    """``world``'s server on SQLite or on the shared PostgreSQL database (wiped afterwards)."""
    from tests.conftest import _shared_database, wipe

    if request.param == "sqlite":
        yield request.getfixturevalue("world")
        return
    database = _shared_database(
        "postgresql",
        request.getfixturevalue("_servers"),
        request.getfixturevalue("_shared_databases"),
    )
    state, stores = open_state(database.url.render_as_string(hide_password=False))
    live.use(state)
    store = stores.store
    world = World(
        live, state, stores, TokenClock(), store.projects.create("A"), store.projects.create("B")
    )
    world.credentials = {"anonymous": None, "admin": admin_key(state)}
    world.credentials["member"] = world.member("member", world.a, ProjectRole.MEMBER)
    try:
        yield world
    finally:
        for client in world._clients:
            client.close()
        stores.close()
        wipe(database.wipe_engine)
