"""A run's step found by name (``Client.get_run_step``, ``load_step_output``,
``find_step_run``): a misspelt name is refused naming the run, suggesting the close name and
listing the run's steps; a step the run did not reach is said so."""

from __future__ import annotations

import pytest

from wharf import Client, pipeline, step
from wharf.core.errors import EntityNotFoundError
from wharf.core.suggestions import MAX_LISTED
from wharf.sdk.workspace import Workspace


@step(enable_cache=False)
def load() -> int:
    return 1


@step(enable_cache=False)
def clean(x: int) -> int:
    return x + 1


@step(enable_cache=False)
def fail(x: int) -> int:
    raise ValueError("no")


@pipeline(enable_cache=False)
def three() -> None:
    clean(load())
    load(id="reload")


@pipeline(enable_cache=False, raise_on_failure=False)
def stops_early() -> None:
    clean(fail(load()))


@pipeline(dynamic=True, enable_cache=False)
def wide() -> None:
    clean.map(list(range(MAX_LISTED + 5))).wait()


def test_a_misspelt_step_is_refused_suggesting_the_close_one_and_listing_the_steps(
    workspace: Workspace,
) -> None:
    run = three.run_in(workspace)
    client = Client(workspace.config, workspace.store)
    expected = (
        f"Run '{run.name}' has no step 'laod'; did you mean 'load'? Its steps: load, clean, reload."
    )
    for read in (
        lambda: client.load_step_output(run.id, "laod"),
        lambda: client.get_run_step(run.name, "laod"),
        lambda: client.find_step_run("laod", run=str(run.id)),
    ):
        with pytest.raises(EntityNotFoundError) as refused:
            read()
        assert str(refused.value) == expected
    with pytest.raises(EntityNotFoundError) as unlike:
        client.load_step_output(run.id, "zzz")
    assert (
        str(unlike.value) == f"Run '{run.name}' has no step 'zzz'. Its steps: load, clean, reload."
    )
    assert client.load_step_output(run.id, "clean") == 2


def test_a_step_the_run_never_reached_is_said_so(workspace: Workspace) -> None:
    run = stops_early.run_in(workspace)
    client = Client(workspace.config, workspace.store)
    with pytest.raises(EntityNotFoundError) as refused:
        client.load_step_output(run.id, "clean")
    assert str(refused.value) == f"Run '{run.name}' never ran its step 'clean' (the run is failed)."


def test_a_long_list_of_steps_is_capped(workspace: Workspace) -> None:
    run = wide.run_in(workspace)
    client = Client(workspace.config, workspace.store)
    with pytest.raises(EntityNotFoundError) as refused:
        client.load_step_output(run.id, "claen_3")
    message = str(refused.value)
    assert message.startswith(f"Run '{run.name}' has no step 'claen_3'; did you mean 'clean_3'")
    listed, more = message.split("Its steps: ")[1].split(", ... ")
    assert more == "(5 more)."
    names = listed.split(", ")  # in the order they were made: the map's run concurrently
    assert len(names) == MAX_LISTED
    assert set(names) <= {f"clean_{i}" for i in range(MAX_LISTED + 5)}
