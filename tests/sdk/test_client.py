"""The Client's reads of a step's outputs (what it answers when there is nothing to load) and\nits resource-pool shortcut."""

from __future__ import annotations

import pytest

from wharf import Client, pipeline, step
from wharf.core.errors import EntityNotFoundError, InputError
from wharf.sdk.workspace import Workspace


@step(enable_cache=False)
def broken() -> int:
    raise ValueError("no value today")


@step(enable_cache=False)
def quiet() -> None:
    return None


@pipeline(enable_cache=False, raise_on_failure=False)
def outputs_missing() -> None:
    quiet()
    broken()


def test_a_step_without_outputs_says_why_there_is_none(workspace: Workspace) -> None:
    run = outputs_missing.run_in(workspace)
    client = Client(workspace.config, workspace.store)
    with pytest.raises(EntityNotFoundError) as failed:
        client.load_step_output(run.id, "broken")
    assert str(failed.value) == "Step 'broken' has no outputs: it is failed."
    with pytest.raises(EntityNotFoundError) as named:
        client.load_step_output(run.id, "broken", "output")
    assert str(named.value) == "Step 'broken' has no output 'output': it is failed."
    with pytest.raises(EntityNotFoundError) as none:
        client.load_step_output(run.id, "quiet")
    assert str(none.value) == "Step 'quiet' has no outputs."


def test_a_pool_offering_cpu_by_a_custom_name_is_refused(workspace: Workspace) -> None:
    client = Client(workspace.config, workspace.store)
    with pytest.raises(InputError, match="built-in cpu kind: use its stock resource 'CPU'"):
        client.ensure_resource_pool("x", {"cpu": 2})
    names = [d.name for d in client.resource_manager.descriptors.list()]
    assert "cpu" not in names
    assert client.ensure_resource_pool("x", {"CPU": 2}).name == "x"


def test_the_runs_listed_are_what_a_loop_over_the_page_gets(workspace: Workspace) -> None:
    run = outputs_missing.run_in(workspace)
    client = Client(workspace.config, workspace.store)
    assert [r.id for r in client.list_pipeline_runs()] == [run.id]


def test_an_artifact_given_as_neither_a_version_nor_its_id_is_refused(
    workspace: Workspace,
) -> None:
    client = Client(workspace.config, workspace.store)
    with pytest.raises(TypeError) as refused:
        client.load_artifact(("output", "1234"))  # type: ignore[arg-type]
    assert str(refused.value) == (
        "load_artifact takes an artifact version (ArtifactVersionRecord) or its id "
        "(a UUID, or a str: the id or an id prefix), not a tuple."
    )
    with pytest.raises(TypeError, match=r"get_artifact_version takes an artifact version's id"):
        client.get_artifact_version(7)  # type: ignore[arg-type]
