"""A step gets the parameter values it was given wherever it runs: isolated in its own process
(which reads them from the stored snapshot) as inline. Plain JSON turned a tuple into a list
and an int key into a str there, and a string holding a lone surrogate failed the pipeline call
with a serialisation traceback."""

from __future__ import annotations

import math
import os
from typing import Any

import pytest

from tests.e2e import steps_lib
from tests.e2e.test_isolated import process_workspace  # noqa: F401 (fixture)
from wharf import Client, pipeline
from wharf.core.enums import ExecutionStatus
from wharf.core.errors import StepInterfaceError
from wharf.core.exact_values import MARK
from wharf.sdk.workspace import Workspace

GIVEN: dict[str, Any] = {
    "shape": (3, 4),
    "by_id": {1: "a", None: (2, [3])},
    "nan": math.nan,
    "inf": -math.inf,
    "text": "bad \udcff",
    "looks_tagged": [{MARK: ["tuple", [1]]}],
}


def _run(workspace: Workspace, *, dynamic: bool, runtime: str = "inline") -> dict[str, str]:
    """Each value of :data:`GIVEN` given to a step; what each step saw (``repr``) by name."""
    if dynamic:

        @pipeline(dynamic=True)
        def p(values: dict[str, Any]) -> None:
            for name, value in values.items():
                steps_lib.repr_of.with_options(name=name, runtime=runtime)(value)
    else:

        @pipeline
        def p(values: dict[str, Any]) -> None:
            for name, value in values.items():
                steps_lib.repr_of.with_options(name=name, runtime=runtime)(value)

    run = p.run_in(workspace, values=GIVEN)
    assert run.status is ExecutionStatus.COMPLETED, run.status_reason
    client = Client(workspace.config, workspace.store)
    return {name: client.load_step_output(run.id, name) for name in GIVEN}


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_an_isolated_step_gets_the_values_given(
    process_workspace: Workspace,  # noqa: F811
    dynamic: bool,
) -> None:
    seen = _run(process_workspace, dynamic=dynamic, runtime="isolated")
    for name, value in GIVEN.items():
        pid, _, shown = seen[name].partition(" ")
        assert int(pid) != os.getpid(), name  # it ran in a process of its own
        assert shown == repr(value), name


def test_an_inline_step_gets_them_too(workspace: Workspace) -> None:
    seen = _run(workspace, dynamic=False)
    assert {name: text.partition(" ")[2] for name, text in seen.items()} == {
        name: repr(value) for name, value in GIVEN.items()
    }


def test_the_step_run_records_them_readably(workspace: Workspace) -> None:
    """The step run's ``parameters`` are for people (plain JSON, a lone surrogate written
    out); the run's snapshot holds the values themselves."""

    @pipeline
    def p() -> None:
        steps_lib.repr_of(value=("bad \udcff", 1))

    run = p.run_in(workspace)
    client = Client(workspace.config, workspace.store)
    assert client.list_run_steps(run.id).items[0].parameters == {"value": ["bad \\udcff", 1]}
    spec = client.get_snapshot(run.snapshot_id).spec  # read back from the store
    assert spec.steps["repr_of"].parameters == {"value": ("bad \udcff", 1)}


def test_a_value_shaped_like_a_stored_one_is_refused(workspace: Workspace) -> None:
    """A dict whose only key is the mark would be read as a stored tree: refused, naming
    the parameter, before the run is created."""

    @pipeline
    def by_step() -> None:
        steps_lib.repr_of(value={MARK: ["tuple", [1]]})

    @pipeline
    def by_pipeline(values: object) -> None:
        steps_lib.repr_of(value=values)

    with pytest.raises(StepInterfaceError, match="Parameter 'value' of step 'repr_of' is a dict"):
        by_step.run_in(workspace)
    with pytest.raises(StepInterfaceError, match="Pipeline parameter 'values' of 'by_pipeline'"):
        by_pipeline.run_in(workspace, values={MARK: 1})
    assert Client(workspace.config, workspace.store).list_pipeline_runs().total == 0


def _nested(depth: int) -> object:
    value: object = 0
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("depth", [201, 300, 5000])
def test_a_value_nested_too_deep_is_refused_in_one_line(workspace: Workspace, depth: int) -> None:
    """It failed the pipeline call with a serialisation traceback (or a RecursionError)."""

    @pipeline
    def by_step() -> None:
        steps_lib.repr_of(value=_nested(depth))

    @pipeline
    def by_pipeline(values: object) -> None:
        steps_lib.repr_of(value=0)

    with pytest.raises(StepInterfaceError, match="is nested more than 200 levels deep"):
        by_step.run_in(workspace)
    with pytest.raises(StepInterfaceError, match="'values' of 'by_pipeline' is nested more"):
        by_pipeline.run_in(workspace, values=_nested(depth))
    assert Client(workspace.config, workspace.store).list_pipeline_runs().total == 0


def test_a_value_nested_200_levels_deep_reaches_its_step(workspace: Workspace) -> None:
    @pipeline
    def deep() -> None:
        steps_lib.repr_of(value=_nested(200))

    run = deep.run_in(workspace)
    seen = Client(workspace.config, workspace.store).load_step_output(run.id, "repr_of")
    assert seen.partition(" ")[2] == repr(_nested(200))


def test_what_json_cannot_write_is_named(workspace: Workspace) -> None:
    circular: list[object] = []
    circular.append(circular)
    for value, words in (
        (circular, "is a list that JSON cannot write (Circular reference detected)"),
        (10**5000, "is an int that JSON cannot write (Exceeds the limit"),
    ):

        @pipeline
        def p() -> None:
            steps_lib.repr_of(value=value)  # noqa: B023 (called at once)

        with pytest.raises(StepInterfaceError) as refused:
            p.run_in(workspace)
        assert words in str(refused.value) and "\n" not in str(refused.value)
