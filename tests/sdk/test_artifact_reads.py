"""A step's output read by name (``Client.load_step_output``): a misspelt output is refused
suggesting the close name and listing the step's outputs; a run's artifact store
(``run_artifact_store``) once its stack was deleted."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import pytest

from wharf import Client, pipeline, step
from wharf.config.global_config import load_config
from wharf.core.enums import ComponentType
from wharf.core.errors import EntityNotFoundError
from wharf.sdk import stacks
from wharf.sdk.workspace import Workspace


@step(enable_cache=False)
def split() -> tuple[Annotated[list[int], "train"], Annotated[list[int], "test"]]:
    return [1, 2, 3], [4]


@pipeline(enable_cache=False)
def splitting() -> None:
    split()


def test_a_misspelt_output_is_refused_suggesting_the_close_one_and_listing_them(
    workspace: Workspace,
) -> None:
    run = splitting.run_in(workspace)
    client = Client(workspace.config, workspace.store)
    assert client.load_step_output(run.id, "split", "train") == [1, 2, 3]
    with pytest.raises(EntityNotFoundError) as misspelt:
        client.load_step_output(run.id, "split", "trian")
    assert str(misspelt.value) == (
        "Step 'split' has no output 'trian'; did you mean 'train'? Its outputs: test, train."
    )
    with pytest.raises(EntityNotFoundError) as unlike:
        client.load_step_output(run.name, "split", "zzz")
    assert str(unlike.value) == "Step 'split' has no output 'zzz'. Its outputs: test, train."


@step(enable_cache=False)
def chatty() -> int:
    print("hello from chatty")
    return 1


@step(enable_cache=False)
def silent_output() -> None:
    print("hello from a step with no output")


@pipeline(enable_cache=False)
def chatting() -> None:
    chatty()


@pipeline(enable_cache=False)
def no_outputs() -> None:
    silent_output()


def test_a_run_of_a_deleted_stack_reads_the_store_its_artifacts_were_written_to(
    tmp_path: Path,
) -> None:
    """Not the active stack's store (its files are not there): the store the run's artifact
    versions record; with none recorded, an error says the store is unknown."""
    home = tmp_path / "home"
    setup = Workspace.open(load_config({}, home=home))
    stacks.register_component(
        setup, "elsewhere", ComponentType.ARTIFACT_STORE, "local", {"path": str(tmp_path / "e")}
    )
    stacks.register_stack(setup, "gone", orchestrator="default", artifact_store="elsewhere")
    setup.close()
    on_gone = Workspace.open(load_config({"WHARF_ACTIVE_STACK": "gone"}, home=home))
    with_outputs, without = chatting.run_in(on_gone), no_outputs.run_in(on_gone)
    on_gone.close()
    workspace = Workspace.open(load_config({}, home=home))
    try:
        stacks.delete_stack(workspace, "gone")
        client = Client(workspace.config, workspace.store)
        assert "hello from chatty" in client.step_logs("chatty", run=with_outputs.id)
        with pytest.raises(EntityNotFoundError) as unknown:
            client.step_logs("silent_output", run=without.id)
        assert str(unknown.value) == (
            f"Run '{without.name}' ran on a stack that has since been deleted, and none of its "
            "steps recorded the artifact store it wrote to: its artifact store (and so its "
            "steps' logs) is unknown."
        )
    finally:
        workspace.close()
