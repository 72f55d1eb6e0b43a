"""The workspace server's shared ``default`` stack, over real HTTP: its artifact store is the
server's ``artifact_root`` or none at all, never a directory of the first member's machine;
without one, a run says how to register one, and following that works."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.e2e import steps_lib
from tests.server.live import LiveServer, open_state, settings
from wharf import pipeline
from wharf.config.global_config import load_config
from wharf.core.enums import ComponentType, ExecutionStatus
from wharf.core.errors import InputError
from wharf.sdk.workspace import Workspace
from wharf.server.app import bootstrap
from wharf.server.auth import issue
from wharf.server.auth.principal import Principal
from wharf.server.default_stack import ensure_default_stack
from wharf.server.state import ServerState
from wharf.store.account_models import ProjectRole
from wharf.store.models import ComponentCreate, PageRequest
from wharf.store.sql.server_stores import ServerStores


@pipeline(name="shared_stack")
def shared_stack() -> None:
    steps_lib.double(steps_lib.produce(value=21))


class Team:
    """A started server (bootstrapped as ``wharf server serve`` does) with members."""

    def __init__(self, live: LiveServer, state: ServerState, stores: ServerStores) -> None:
        self.live, self.state, self.stores = live, state, stores

    def member(self, name: str) -> str:
        store = self.stores.store
        user = store.users.create(name)
        self.state.accounts.credentials.set_active(user.id, True)
        project = store.projects.get_by_name("default")
        self.state.accounts.memberships.set_role(project.id, ProjectRole.MEMBER, user_id=user.id)
        return issue.access_token(self.state, Principal("user", user.id, name, False)).access_token

    def env(self, token: str, home: Path) -> dict[str, str]:
        """A member's terminal: their own home, and artifact root, on their own machine."""
        return {
            "WHARF_HOME": str(home),
            "WHARF_ARTIFACT_ROOT": str(home / "my-artifacts"),
            "WHARF_SERVER_URL": self.live.url,
            "WHARF_API_KEY": token,
        }

    def workspace(self, token: str, home: Path) -> Workspace:
        return Workspace.open(load_config(self.env(token, home)))


@pytest.fixture
def start(
    live: LiveServer, tmp_path: Path, _sqlite_template: Path
) -> Iterator[Callable[..., Team]]:
    opened: list[ServerStores] = []

    def start(artifact_root: Path | None, *, bootstrapped: bool = True) -> Team:
        path = tmp_path / f"server-{uuid.uuid4().hex[:8]}.db"
        shutil.copyfile(_sqlite_template, path)
        url = f"sqlite:///{path}"
        root = None if artifact_root is None else str(artifact_root)
        state, stores = open_state(
            url,
            server_settings=settings(database_url=url, create_defaults=True, artifact_root=root),
        )
        opened.append(stores)
        if bootstrapped:
            bootstrap(state)
        live.use(state)
        return Team(live, state, stores)

    yield start
    for stores in opened:
        stores.close()


def artifact_paths(workspace: Workspace) -> list[str]:
    components = workspace.store.stacks.list_components(
        ComponentType.ARTIFACT_STORE, PageRequest(size=100)
    )
    return [str(c.configuration.get("path")) for c in components.items]


def test_the_default_stack_stores_artifacts_under_the_servers_artifact_root(
    start: Callable[..., Team], tmp_path: Path
) -> None:
    shared = tmp_path / "shared"
    team = start(shared)
    alice = team.workspace(team.member("alice"), tmp_path / "alice")
    try:
        run = shared_stack.run_in(alice)
        assert run.status is ExecutionStatus.COMPLETED, run.status_reason
        assert artifact_paths(alice) == [str(shared)]
    finally:
        alice.close()
    assert any(shared.rglob("*")) and not (tmp_path / "alice" / "my-artifacts").exists()


def test_without_an_artifact_root_a_run_says_how_to_register_one(
    start: Callable[..., Team], tmp_path: Path
) -> None:
    team = start(None)
    token = team.member("alice")
    alice = team.workspace(token, tmp_path / "alice")
    try:
        with pytest.raises(InputError) as refused:
            shared_stack.run_in(alice)
        message = str(refused.value)
        assert "\n" not in message and "no artifact store" in message
        assert "wharf component register" in message and "wharf stack set" in message
        assert artifact_paths(alice) == []
        assert alice.store.runs.list().total == 0  # refused before anything was recorded
    finally:
        alice.close()

    # Following the message, in alice's terminal, works.
    shared = tmp_path / "shared"
    env = {k: v for k, v in os.environ.items() if not k.startswith("WHARF_")}
    env.update(team.env(token, tmp_path / "alice"))
    for command in (
        [
            "component",
            "register",
            "shared",
            "-t",
            "artifact_store",
            "-f",
            "local",
            "-c",
            f"path={shared}",
        ],
        ["stack", "register", "team", "-o", "default", "-a", "shared"],
        ["stack", "set", "team"],
    ):
        done = subprocess.run(
            [sys.executable, "-m", "wharf.cli.main", *command],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
    alice = team.workspace(token, tmp_path / "alice")
    try:
        run = shared_stack.run_in(alice)
        assert run.status is ExecutionStatus.COMPLETED, run.status_reason
    finally:
        alice.close()
    assert any(shared.rglob("*"))


def test_a_member_never_makes_the_shared_stack_with_a_path_of_their_machine(
    start: Callable[..., Team], tmp_path: Path
) -> None:
    # A server whose default stack was not made at start-up (e.g. removed from its database):
    # the first member to need it does not give it their own artifact directory.
    team = start(None, bootstrapped=False)
    from wharf.store.defaults import ensure_defaults

    ensure_defaults(team.stores.store)
    alice = team.workspace(team.member("alice"), tmp_path / "alice")
    bob = team.workspace(team.member("bob"), tmp_path / "bob")
    try:
        stack = alice.active_stack()
        assert ComponentType.ARTIFACT_STORE not in stack.components
        assert artifact_paths(alice) == []
        with pytest.raises(InputError, match="no artifact store"):
            shared_stack.run_in(bob)
    finally:
        alice.close()
        bob.close()
    assert not (tmp_path / "alice" / "my-artifacts").exists()


def test_an_artifact_root_must_be_absolute() -> None:
    with pytest.raises(ValueError, match="absolute"):
        settings(artifact_root="relative/dir")


def test_a_default_stack_made_by_an_earlier_version_is_kept_with_a_warning(
    start: Callable[..., Team], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    team = start(None, bootstrapped=False)
    store = team.stores.store
    orchestrator = store.stacks.create_component(
        ComponentCreate(name="default", type=ComponentType.ORCHESTRATOR, flavor="local")
    )
    old = store.stacks.create_component(
        ComponentCreate(
            name="default",
            type=ComponentType.ARTIFACT_STORE,
            flavor="local",
            configuration={"path": "/home/first-member/.local/share/wharf/artifacts"},
        )
    )
    components = {ComponentType.ORCHESTRATOR: orchestrator.id, ComponentType.ARTIFACT_STORE: old.id}
    made = store.stacks.create_stack("default", components)
    with caplog.at_level(logging.WARNING, logger="wharf.server.default_stack"):
        kept = ensure_default_stack(store, str(tmp_path / "shared"))
    assert kept.id == made.id and kept.components == made.components
    assert "--artifact-root" in caplog.text and "first-member" in caplog.text
