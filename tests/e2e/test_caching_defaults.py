"""A step's parameter left to a default that is no JSON value: the step runs with it, and its
cache key counts it by content."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_caching import status_map
from wharf import Client, pipeline, step
from wharf.core.enums import ExecutionStatus
from wharf.core.errors import StepInterfaceError
from wharf.sdk.workspace import Workspace


class Config:
    """No repr of its own: only its content tells two apart."""

    def __init__(self, depth: Any) -> None:
        self.depth = depth


def made_with_default(default: Config, dynamic: bool = False, **given: Any) -> Any:
    @step(name="configured")
    def configured(rows: int = 2, path: Path = Path("data/a.csv"), cfg: Config = default) -> str:
        return f"{rows} {path.as_posix()} {cfg.depth}"

    @pipeline(name="configuring", dynamic=dynamic)
    def configuring() -> None:
        configured(**given)

    return configuring


def run(workspace: Workspace, made: Any) -> tuple[ExecutionStatus, str]:
    done = made.run_in(workspace)
    with Client(workspace.config, workspace.store) as client:
        output = client.load_step_output(done.id, "configured")
    return status_map(workspace, done.id)["configured"], output


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_a_default_that_is_no_json_value_is_the_steps_own(
    workspace: Workspace, dynamic: bool
) -> None:
    """Such a default refused the whole step ('Parameter 'path' ... is not
    JSON-serialisable') though the call never gave it: the run records no value for it, the
    step's function uses its own where it runs."""
    first = made_with_default(Config(3), dynamic)
    assert run(workspace, first) == (ExecutionStatus.COMPLETED, "2 data/a.csv 3")
    spec = workspace.store.snapshots.get(first.run_in(workspace).snapshot_id).spec
    if not dynamic:
        assert spec.steps["configured"].parameters == {"rows": 2}
    assert run(workspace, made_with_default(Config(3), dynamic))[0] is ExecutionStatus.CACHED
    assert run(workspace, made_with_default(Config(4), dynamic)) == (
        ExecutionStatus.COMPLETED,
        "2 data/a.csv 4",
    )
    given = made_with_default(Config(3), dynamic, rows=5)
    assert run(workspace, given) == (ExecutionStatus.COMPLETED, "5 data/a.csv 3")


def test_a_value_given_that_is_no_json_value_is_still_refused(workspace: Workspace) -> None:
    made = made_with_default(Config(3), path=Path("data/b.csv"))
    with pytest.raises(StepInterfaceError, match="Parameter 'path' of step 'configured' is a "):
        made.run_in(workspace)


def test_a_default_that_cannot_be_hashed_leaves_the_step_uncached(
    workspace: Workspace,
) -> None:
    made = made_with_default(Config(threading.Lock()))
    assert run(workspace, made)[0] is ExecutionStatus.COMPLETED
    assert run(workspace, made)[0] is ExecutionStatus.COMPLETED
