"""``Client.load_artifact`` / ``get_artifact_version`` given an artifact's name (as ``wharf
artifacts load NAME`` takes) instead of a version's id: the error says how to get a version."""

from __future__ import annotations

import pytest

from wharf import Client, pipeline, step
from wharf.core.errors import EntityNotFoundError
from wharf.sdk.workspace import Workspace


@step(enable_cache=False)
def answer() -> int:
    return 42


@pipeline(name="answering")
def answering() -> None:
    answer()


def test_an_artifacts_name_given_for_a_version_says_how_to_get_its_latest(
    workspace: Workspace,
) -> None:
    answering.run_in(workspace)
    client = Client(workspace.config, workspace.store)
    name = "answering::answer::output"
    with pytest.raises(EntityNotFoundError) as info:
        client.load_artifact(name)
    assert str(info.value) == (
        f"'{name}' is an artifact's name, not a version's id: its latest version is "
        f"list_artifact_versions(name='{name}').items[0]."
    )
    assert client.load_artifact(client.list_artifact_versions(name=name).items[0]) == 42
    with pytest.raises(EntityNotFoundError) as unknown:
        client.get_artifact_version("answering::nothing::output")
    assert str(unknown.value) == (
        "No artifact version with id or id prefix 'answering::nothing::output'."
    )
