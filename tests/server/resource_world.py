"""Team mode in one test process: a Resource Manager API and the workspace server, each a real
uvicorn server in a thread, the workspace logged in to the RM as the RM principal ``alice``.

``make_team(...)`` builds a :class:`Team` on a workspace database URL: projects A and B, users
``member`` / ``viewer`` of A and ``other`` of B, an admin service account, a pipeline and
snapshot of A on a stack with one orchestrator, and a ``licenses`` pool (two ``license``
units) whose policies admit every user account. Steps are made through :class:`RestStore`
clients, as the engine makes them.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from tests.conftest import _shared_database, wipe
from tests.resource_manager.api.live import ADMIN_KEY, ALICE_KEY, start_rm
from tests.resource_manager.api.live import LiveServer as RmServer
from tests.resource_manager.service.conftest import _rm_sqlite_template
from tests.server.conftest import TokenClock, World
from tests.server.live import FAST_PASSWORDS, LiveServer, admin_key, settings
from tests.store.conftest import spec
from wharf.config.settings import ResourceSettings
from wharf.config.spec import StepConfig, StepSpec
from wharf.core.enums import ComponentType, ExecutionStatus, StepRuntime
from wharf.resource_manager.client.http import HttpResourceManager
from wharf.resource_manager.contract.protocol import ResourceManagerClient
from wharf.sdk.pools import ensure_pool
from wharf.server.app import build_state
from wharf.server.resource_manager import connect
from wharf.store.account_models import ProjectRole
from wharf.store.models import (
    ComponentCreate,
    PipelineRunRecord,
    RunCreate,
    SnapshotCreate,
    SnapshotRecord,
    StepRunCreate,
)
from wharf.store.ports import Store
from wharf.store.rest import RestStore
from wharf.store.sql.server_stores import open_server_stores

LICENSE = ResourceSettings(resources={"license": 1})
POOL = "licenses"
ACCOUNTS = ("member", "viewer", "other", "boss")


def step_spec(name: str, resources: ResourceSettings | None = LICENSE) -> StepSpec:
    return StepSpec(
        name=name,
        source="pkg.steps:work",
        code_hash="h",
        config=StepConfig(resources=resources),
    )


@dataclass
class Team:
    world: World
    rm: RmServer | None
    rm_admin: ResourceManagerClient | None
    snapshot: SnapshotRecord
    stack_component_id: UUID
    _stores: list[RestStore] = field(default_factory=list)

    def rest(self, role_or_credential: str) -> RestStore:
        """A REST store with a role's credential (or any credential)."""
        credential = self.world.credentials.get(role_or_credential, role_or_credential)
        store = RestStore(self.world.url, credential)
        self._stores.append(store)
        return store

    def run(self, role: str = "member", project: str = "A") -> PipelineRunRecord:
        """A running run of A (or B, on a snapshot of its own) created by ``role``."""
        of = self.snapshot
        if project != "A":
            of = snapshot(self.world.stores.store, self.world.b.id, None)
        return self.rest(role).runs.create(
            RunCreate(
                project_id=of.project_id,
                pipeline_id=of.pipeline_id,
                snapshot_id=of.id,
                name=f"run-{uuid.uuid4().hex[:8]}",
                status=ExecutionStatus.RUNNING,
            )
        )

    def run_token(self, run: PipelineRunRecord, role: str = "member") -> str:
        answer = self.world.as_role(role).post(f"/api/v1/runs/{run.id}/token")
        assert answer.status_code == 200, answer.text
        token: str = answer.json()["access_token"]
        return token

    def queued(
        self,
        run: PipelineRunRecord,
        name: str | None = None,
        resources: ResourceSettings | None = LICENSE,
        **values: Any,
    ) -> StepRunCreate:
        """A queued, isolated step asking for ``resources`` (as the launcher creates it)."""
        name = name or f"step-{uuid.uuid4().hex[:6]}"
        return StepRunCreate(
            run_id=run.id,
            name=name,
            status=ExecutionStatus.QUEUED,
            spec=step_spec(name, resources),
            runtime=StepRuntime.ISOLATED,
            **values,
        )

    def close(self) -> None:
        for store in self._stores:
            store.close()


def snapshot(store: Store, project_id: UUID, stack_id: UUID | None) -> SnapshotRecord:
    pipeline = store.pipelines.get_or_create(project_id, "pipe")
    return store.snapshots.create(
        SnapshotCreate(
            project_id=project_id, pipeline_id=pipeline.id, stack_id=stack_id, spec=spec()
        )
    )


def start_resource_manager(tmp_path: Path, template: Path) -> RmServer:
    path = tmp_path / f"rm-{uuid.uuid4().hex[:8]}.db"
    shutil.copyfile(template, path)
    return start_rm(f"sqlite:///{path}")


def make_team(
    live: LiveServer, database_url: str, rm: RmServer | None, rm_key: str = ALICE_KEY
) -> Iterator[Team]:
    """A :class:`Team` whose workspace uses ``rm`` (None: a server without an RM), logged in to
    it with ``rm_key`` (``ADMIN_KEY``: the README's set-up, as the RM administrator)."""
    server_settings = settings(
        database_url=database_url,
        resource_manager_url=None if rm is None else rm.url,
        resource_manager_token=None if rm is None else rm_key,
    )
    client = connect(server_settings)
    stores = open_server_stores(database_url)
    clock = TokenClock()
    state = build_state(
        server_settings, stores, clock=clock, passwords=FAST_PASSWORDS, resource_manager=client
    )
    live.use(state)
    store = stores.store
    world = World(
        live, state, stores, clock, store.projects.create("A"), store.projects.create("B")
    )
    world.credentials = {
        "anonymous": None,
        "admin": admin_key(state),
        "member": world.member("member", world.a, ProjectRole.MEMBER),
        "viewer": world.member("viewer", world.a, ProjectRole.VIEWER),
        "other": world.member("other", world.b, ProjectRole.MEMBER),
        "boss": world.member("boss", world.a, ProjectRole.MEMBER),
    }
    component = store.stacks.create_component(
        ComponentCreate(name="orch", type=ComponentType.ORCHESTRATOR, flavor="local")
    )
    stack = store.stacks.create_stack("st", {ComponentType.ORCHESTRATOR: component.id})
    rm_admin = None if rm is None else HttpResourceManager(rm.url, api_key=ADMIN_KEY)
    team = Team(world, rm, rm_admin, snapshot(store, world.a.id, stack.id), component.id)
    if rm_admin is not None:
        for account in ACCOUNTS:
            ensure_pool(
                rm_admin,
                POOL,
                {"license": 2},
                account=account,
                reclaimable="coordinated",
                priority=10 if account == "boss" else 0,
            )
    try:
        yield team
    finally:
        team.close()
        for client_ in world._clients:
            client_.close()
        if rm_admin is not None:
            rm_admin.close()
        if client is not None:
            client.close()
        stores.close()


# ----------------------------------------------------------------------------- fixtures


@pytest.fixture
def rm_server(tmp_path: Path, _rm_sqlite_template: Path) -> Iterator[RmServer]:
    server = start_resource_manager(tmp_path, _rm_sqlite_template)
    yield server
    server.stop()


def _sqlite_url(tmp_path: Path, template: Path) -> str:
    path = tmp_path / f"server-{uuid.uuid4().hex[:8]}.db"
    shutil.copyfile(template, path)
    return f"sqlite:///{path}"


@pytest.fixture
def team(
    live: LiveServer, rm_server: RmServer, tmp_path: Path, _sqlite_template: Path
) -> Iterator[Team]:
    yield from make_team(live, _sqlite_url(tmp_path, _sqlite_template), rm_server)


@pytest.fixture
def admin_keyed_team(
    live: LiveServer, rm_server: RmServer, tmp_path: Path, _sqlite_template: Path
) -> Iterator[Team]:
    """``team`` with the workspace logged in to the RM as its administrator (the README's
    set-up: ``--resource-manager-token`` is the RM's ``--admin-api-key``)."""
    url = _sqlite_url(tmp_path, _sqlite_template)
    yield from make_team(live, url, rm_server, ADMIN_KEY)


@pytest.fixture
def team_without_rm(live: LiveServer, tmp_path: Path, _sqlite_template: Path) -> Iterator[Team]:
    yield from make_team(live, _sqlite_url(tmp_path, _sqlite_template), None)


@pytest.fixture(params=["sqlite", "postgresql"])
def db_team(
    request: pytest.FixtureRequest,
    live: LiveServer,
    rm_server: RmServer,
    tmp_path: Path,
    _sqlite_template: Path,
) -> Iterator[Team]:
    """``team`` with the workspace on SQLite or on the shared PostgreSQL database."""
    if request.param == "sqlite":
        yield from make_team(live, _sqlite_url(tmp_path, _sqlite_template), rm_server)
        return
    database = _shared_database(
        "postgresql",
        request.getfixturevalue("_servers"),
        request.getfixturevalue("_shared_databases"),
    )
    try:
        yield from make_team(live, database.url.render_as_string(hide_password=False), rm_server)
    finally:
        wipe(database.wipe_engine)


__all__ = [
    "LICENSE",
    "Team",
    "_rm_sqlite_template",
    "admin_keyed_team",
    "db_team",
    "rm_server",
    "team",
    "team_without_rm",
]
