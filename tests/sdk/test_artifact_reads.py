"""A step's output read by name (``Client.load_step_output``): a misspelt output is refused
suggesting the close name and listing the step's outputs."""

from __future__ import annotations

from typing import Annotated

import pytest

from wharf import Client, pipeline, step
from wharf.core.errors import EntityNotFoundError
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
