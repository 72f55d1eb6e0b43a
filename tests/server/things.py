"""What the RBAC matrix needs: the expectations per kind of route, the ``Route`` row, ``Things``.

``Things`` are records of project A made directly in the store (as an admin would); ``fresh``
helpers make a new one per request for routes that consume what they touch (delete, finish...).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from tests.server.conftest import World
from tests.store.conftest import spec
from wharf.core.enums import ComponentType, ExecutionStatus
from wharf.server.auth import api_keys
from wharf.store.account_models import ProjectRole
from wharf.store.models import (
    ArtifactVersionCreate,
    ComponentCreate,
    RunCreate,
    ScheduleCreate,
    SnapshotCreate,
    StepRunCreate,
)

NOW = datetime.now(UTC).isoformat()

# What each kind of route answers, per role (None: the route's success status).
OK = None
EXPECT: dict[str, dict[str, int | None]] = {
    "public": {"anonymous": OK, "viewer": OK, "member": OK, "padmin": OK, "other": OK, "admin": OK},
    "account": {
        "anonymous": 401,
        "viewer": OK,
        "member": OK,
        "padmin": OK,
        "other": OK,
        "admin": OK,
    },
    # Logging out ends a user's logins: an API key (the admin role's) is refused, never revoked.
    "user_login": {
        "anonymous": 401,
        "viewer": OK,
        "member": OK,
        "padmin": OK,
        "other": OK,
        "admin": 403,
    },
    "read_a": {
        "anonymous": 401,
        "viewer": OK,
        "member": OK,
        "padmin": OK,
        "other": 404,
        "admin": OK,
    },
    "write_a": {
        "anonymous": 401,
        "viewer": 403,
        "member": OK,
        "padmin": OK,
        "other": 404,
        "admin": OK,
    },
    "manage_a": {
        "anonymous": 401,
        "viewer": 403,
        "member": 403,
        "padmin": OK,
        "other": 404,
        "admin": OK,
    },
    "admin": {
        "anonymous": 401,
        "viewer": 403,
        "member": 403,
        "padmin": 403,
        "other": 403,
        "admin": OK,
    },
    "global_write": {
        "anonymous": 401,
        "viewer": 403,
        "member": OK,
        "padmin": OK,
        "other": OK,
        "admin": OK,
    },
    # Only a run token of the step's run records the step's process (tested with one in
    # tests/server/test_step_process.py): every login, an admin's too, is refused.
    "own_process": {
        "anonymous": 401,
        "viewer": 403,
        "member": 403,
        "padmin": 403,
        "other": 404,
        "admin": 403,
    },
    # Sweeps and metadata lists of something invisible answer like an unknown id: nothing.
    "sweep_a": {
        "anonymous": 401,
        "viewer": 403,
        "member": OK,
        "padmin": OK,
        "other": OK,
        "admin": OK,
    },
    "list_of_a": {
        "anonymous": 401,
        "viewer": OK,
        "member": OK,
        "padmin": OK,
        "other": OK,
        "admin": OK,
    },
}


@dataclass
class Things:
    world: World

    def __post_init__(self) -> None:
        w = self.world
        store = w.stores.store
        a = w.a.id
        self.pipeline = store.pipelines.get_or_create(a, "pipe")
        self.snapshot = store.snapshots.create(
            SnapshotCreate(project_id=a, pipeline_id=self.pipeline.id, spec=spec())
        )
        self.run = self.fresh_run()
        self.step = self.fresh_step()
        self.version = store.artifacts.create_version(self.version_create())
        self.schedule = self.fresh_schedule()
        self.component = store.stacks.create_component(
            ComponentCreate(name="orch", type=ComponentType.ORCHESTRATOR, flavor="local")
        )
        self.stack = store.stacks.create_stack(
            "st", {ComponentType.ORCHESTRATOR: self.component.id}
        )
        self.account = w.state.accounts.service_accounts.create("robot")
        self.counter = 0

    def name(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}-{self.counter}"

    def fresh_run(self) -> Any:
        return self.world.stores.store.runs.create(
            RunCreate(
                project_id=self.world.a.id,
                pipeline_id=self.pipeline.id,
                snapshot_id=self.snapshot.id,
                name=f"run-{uuid.uuid4().hex[:8]}",
                status=ExecutionStatus.RUNNING,
            )
        )

    def fresh_step(self) -> Any:
        return self.world.stores.store.steps.create(
            StepRunCreate(
                run_id=self.run.id,
                name=f"step-{uuid.uuid4().hex[:8]}",
                status=ExecutionStatus.RUNNING,
            )
        )

    def fresh_schedule(self) -> Any:
        return self.world.stores.store.schedules.create(
            ScheduleCreate(
                project_id=self.world.a.id,
                pipeline_id=self.pipeline.id,
                snapshot_id=self.snapshot.id,
                name=f"sched-{uuid.uuid4().hex[:8]}",
                interval_seconds=60,
            )
        )

    def fresh_component(self) -> Any:
        return self.world.stores.store.stacks.create_component(
            ComponentCreate(name=self.name("c"), type=ComponentType.ORCHESTRATOR, flavor="local")
        )

    def fresh_stack(self) -> Any:
        return self.world.stores.store.stacks.create_stack(self.name("stack"), {})

    def fresh_key(self) -> Any:
        _, digest = api_keys.new_secret()
        return self.world.state.accounts.api_keys.create(self.account.id, self.name("k"), digest)

    def fresh_member(self) -> Any:
        user = self.world.user(self.name("tmp"))
        self.world.state.accounts.memberships.set_role(
            self.world.a.id, ProjectRole.VIEWER, user_id=user.id
        )
        return user

    def version_create(self) -> ArtifactVersionCreate:
        return ArtifactVersionCreate(
            project_id=self.world.a.id, name="art", uri="/a/1", data_type="t", materializer="m"
        )

    def step_body(self) -> dict[str, Any]:
        return {"run_id": str(self.run.id), "name": self.name("s"), "status": "running"}


Path = Callable[[Things], str]
Body = Callable[[Things], Any]


@dataclass(frozen=True)
class Route:
    method: str
    template: str
    kind: str
    status: int
    path: Path
    body: Body | None = None


def version_body(t: Things) -> dict[str, Any]:
    return t.version_create().model_dump(mode="json")
