"""The ``stop_grace_period`` of a ``local_process`` orchestrator or step operator reaches each
step's process as ``WHARF_STEP_STOP_GRACE`` (``wharf.execution.stop_deadline``), the default
when the component sets none, and never the submitter's own: real components registered in a
real workspace, their step backends starting a stand-in interpreter that prints the variable.
The cut-off after that grace, end to end: ``tests/e2e/test_reclaim_cutoff.py``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.execution.test_local_process_backend import interpreter, launch, wait_all
from tests.store.conftest import World
from wharf.artifacts.store import LocalArtifactStore
from wharf.config.global_config import load_config
from wharf.core.enums import ComponentType
from wharf.execution.backends import Ended
from wharf.execution.local_process import LocalProcessBackend
from wharf.execution.log_capture import read_log
from wharf.execution.stop_deadline import (
    DEFAULT_STOP_GRACE_SECONDS,
    STOP_GRACE_ENV,
    stop_grace_from_env,
)
from wharf.orchestrators.local_process import LocalProcessOrchestrator
from wharf.sdk import stacks
from wharf.sdk.workspace import Workspace
from wharf.step_operators.local_process import LocalProcessStepOperator
from wharf.store.models import ComponentRecord

PRINTS_GRACE = f'echo "grace=[${STOP_GRACE_ENV}]"'


@pytest.fixture
def workspace(tmp_path: Path) -> Iterator[Workspace]:
    ws = Workspace.open(load_config({}, home=tmp_path / "home"))
    yield ws
    ws.close()


def backend_of(record: ComponentRecord) -> LocalProcessBackend:
    if record.type is ComponentType.ORCHESTRATOR:
        return LocalProcessOrchestrator(record).step_backend()
    return LocalProcessStepOperator(record).step_backend()


def grace_seen_by_the_step(backend: LocalProcessBackend, world: World, tmp_path: Path) -> str:
    """What the step's process was given as its stop grace (the text of the variable)."""
    logs = LocalArtifactStore(tmp_path / "artifacts")
    attempt = launch(world, logs)
    handle = backend.submit(attempt, None)
    assert wait_all(backend, [handle]) == {handle: Ended.SUCCEEDED}
    backend.cleanup(handle)
    assert attempt.record.logs_uri is not None
    line = read_log(logs, attempt.record.logs_uri).strip()
    assert line.startswith("grace=[") and line.endswith("]"), line
    return line.removeprefix("grace=[").removesuffix("]")


@pytest.mark.parametrize("type", [ComponentType.ORCHESTRATOR, ComponentType.STEP_OPERATOR])
@pytest.mark.parametrize(
    ("configured", "expected"), [(4, 4.0), ("0.5", 0.5), (None, DEFAULT_STOP_GRACE_SECONDS)]
)
def test_the_step_process_is_given_its_components_stop_grace(
    workspace: Workspace,
    world: World,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    type: ComponentType,
    configured: object,
    expected: float,
) -> None:
    monkeypatch.setenv(STOP_GRACE_ENV, "1")  # the submitter's own: never the step's
    options: dict[str, object] = {"python": interpreter(tmp_path, "python", PRINTS_GRACE)}
    if configured is not None:
        options["stop_grace_period"] = configured
    record = stacks.register_component(workspace, "procs", type, "local_process", options)
    text = grace_seen_by_the_step(backend_of(record), world, tmp_path)
    assert stop_grace_from_env({STOP_GRACE_ENV: text}) == expected
