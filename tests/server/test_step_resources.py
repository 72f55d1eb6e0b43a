# ruff: noqa: F811  (the store world fixture is imported from tests.store.conftest)
"""The step-resource service of the workspace server keeps the store's combined calls one call
of the store's own (one store call instead of two per step); in embedded mode the engine makes
explicit port calls and neither store is wrapped."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.store.conftest import World, world  # noqa: F401 (fixture)
from wharf.config.global_config import load_config
from wharf.core.enums import ExecutionStatus
from wharf.execution.resources.embedded import LazyResourceManager
from wharf.sdk.workspace import Workspace
from wharf.server.step_resources import StepResourceService
from wharf.store.models import StepRunCreate, StepRunUpdate


def test_embedded_port_makes_explicit_calls_and_the_store_only_stores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WHARF_HOME", str(tmp_path))
    for var in ("WHARF_STORE_URL", "WHARF_SERVER_URL", "WHARF_RESOURCE_MANAGER"):
        monkeypatch.delenv(var, raising=False)
    workspace = Workspace.open(load_config())
    try:
        resources = workspace.step_resources
        assert resources is not None
        assert not hasattr(resources, "step_runs")  # the engine calls request/renew/release
        assert not isinstance(workspace.store.steps, StepResourceService)  # it only stores
    finally:
        workspace.close()


class Recorded:
    """A step-run repository whose calls are recorded by name (then made as they are)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._inner, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(name)
            return method(*args, **kwargs)

        return call


@pytest.mark.parametrize("backend_name", ["sqlite"], indirect=True)
def test_each_combined_call_stays_one_call_of_the_store(world: World) -> None:
    def no_resource_manager() -> Any:
        raise AssertionError("steps without resources never reach the Resource Manager")

    inner = Recorded(world.store.steps)
    paired = StepResourceService(world.store, LazyResourceManager(no_resource_manager))
    paired._inner = inner  # type: ignore[assignment]
    run = world.run(status=ExecutionStatus.RUNNING)
    create = StepRunCreate(run_id=run.id, name="a", status=ExecutionStatus.RUNNING, cache_key="k")
    step = paired.find_cached_or_create(create, world.project.id, datetime.now(UTC)).step
    paired.finish(step.id, StepRunUpdate(status=ExecutionStatus.COMPLETED), {})
    paired.create_many([create.model_copy(update={"name": "b", "cache_key": None})])
    assert inner.calls == ["find_cached_or_create", "finish", "create_many"]
