"""Isolated steps over a workspace server: the step's own process reaches the server with a
token scoped to its run (obtained by the orchestrator), never with the user's credential, and
that token reads nothing of other runs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e import rest_steps_lib
from tests.server.conftest import (  # noqa: F401 (fixtures)
    World,
    live,
    world,
)
from tests.store.conftest import spec
from wharf import pipeline
from wharf.config.global_config import load_config
from wharf.core.enums import ComponentType, ExecutionStatus
from wharf.execution.log_capture import read_log
from wharf.sdk.workspace import Workspace
from wharf.store.models import (
    ComponentCreate,
    ProjectRecord,
    RunCreate,
    SnapshotCreate,
    StepRunFilter,
)


@pytest.fixture
def server(request: pytest.FixtureRequest) -> World:
    """The server fixtures' ``world``: projects A and B, and principals of every role."""
    result: World = request.getfixturevalue("world")
    return result


OPERATOR = "subprocess"


def some_run(server: World, project: ProjectRecord) -> str:
    store = server.stores.store
    pipeline_record = store.pipelines.get_or_create(project.id, "elsewhere")
    snapshot = store.snapshots.create(
        SnapshotCreate(project_id=project.id, pipeline_id=pipeline_record.id, spec=spec())
    )
    run = store.runs.create(
        RunCreate(
            project_id=project.id,
            pipeline_id=pipeline_record.id,
            snapshot_id=snapshot.id,
            name=f"other-{project.name}",
        )
    )
    return str(run.id)


@pytest.fixture(params=["orchestrator", "step_operator"])
def isolation(request: pytest.FixtureRequest) -> str:
    """What isolates the step: a ``local_process`` orchestrator, or a ``local_process`` step
    operator under the ``local`` orchestrator."""
    return str(request.param)


@pytest.fixture
def member_workspace(
    server: World, isolation: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Workspace]:
    """Member of project A, working in A, on a stack that isolates the step."""
    for name in ("WHARF_STORE_URL", "WHARF_SERVER_URL", "WHARF_API_KEY", "WHARF_PROJECT"):
        monkeypatch.delenv(name, raising=False)
    config = load_config(
        {
            "WHARF_HOME": str(tmp_path / "home"),
            "WHARF_SERVER_URL": server.url,
            "WHARF_API_KEY": str(server.credentials["member"]),
            "WHARF_PROJECT": "A",
            "WHARF_ACTIVE_STACK": "isolating",
            "WHARF_HEARTBEAT_INTERVAL": "0.2",
        }
    )
    workspace = Workspace.open(config)
    stacks = workspace.store.stacks
    orchestrator = "local_process" if isolation == "orchestrator" else "local"
    components = {
        ComponentType.ORCHESTRATOR: ComponentCreate(
            name="isolating", type=ComponentType.ORCHESTRATOR, flavor=orchestrator
        ),
        ComponentType.ARTIFACT_STORE: ComponentCreate(
            name="isolating",
            type=ComponentType.ARTIFACT_STORE,
            flavor="local",
            configuration={"path": str(config.artifact_root)},
        ),
    }
    if isolation == "step_operator":
        components[ComponentType.STEP_OPERATOR] = ComponentCreate(
            name=OPERATOR, type=ComponentType.STEP_OPERATOR, flavor="local_process"
        )
    stacks.create_stack(
        "isolating", {t: stacks.create_component(c).id for t, c in components.items()}
    )
    yield workspace
    workspace.close()


def test_an_isolated_step_uses_a_token_scoped_to_its_run(
    server: World, isolation: str, member_workspace: Workspace, tmp_path: Path
) -> None:
    w = server
    report = tmp_path / "identity.json"
    same_project_run, other_project_run = some_run(w, w.a), some_run(w, w.b)

    report_identity = rest_steps_lib.report_identity
    if isolation == "step_operator":
        report_identity = report_identity.with_options(step_operator=OPERATOR)

    @pipeline(name="who_am_i")
    def who_am_i() -> None:
        report_identity(
            path=str(report),
            same_project_run=same_project_run,
            other_project_run=other_project_run,
        )

    run = who_am_i.run_in(member_workspace)
    assert run.status is ExecutionStatus.COMPLETED, run.status_reason
    assert run.project_id == w.a.id and run.user_id == w.users["member"].id
    facts = json.loads(report.read_text())
    me = facts["me"]
    # the server takes the step's process for this run, acting for the member, not as admin
    assert me["run_id"] == str(run.id)
    assert (me["kind"], me["name"], me["is_admin"]) == ("user", "member", False)
    assert facts["credential"] != rest_steps_lib.credential_digest(str(w.credentials["member"]))
    # other runs: refused in its own project, unseen in another
    assert facts["same_project_run"] == 403
    assert facts["other_project_run"] == 404
    # the process recorded its pid and its result with that token
    (step,) = member_workspace.store.steps.list(StepRunFilter(run_id=run.id)).items
    assert step.status is ExecutionStatus.COMPLETED and step.pid == facts["pid"]
    assert step.outputs and step.runtime is not None and step.runtime.value == "isolated"
    # its captured log is what it printed: no line per HTTP request (its own or Wharf's)
    artifacts = member_workspace.component_instance(
        member_workspace.active_stack(), ComponentType.ARTIFACT_STORE
    )
    assert step.logs_uri is not None
    assert "HTTP Request" not in read_log(artifacts, step.logs_uri)
