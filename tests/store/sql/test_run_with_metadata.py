"""``runs.create_with_metadata`` on each SQL database: the run and its metadata are written in
one transaction, so when the database refuses the metadata (a trigger) no run is left behind and
a retry creates both."""

from __future__ import annotations

import pytest

from tests.faults.refused_metadata import refusing_metadata_key
from tests.store.conftest import World
from wharf.core.enums import MetadataResourceType
from wharf.core.errors import InputError, WharfError
from wharf.store.models import RunFilter


def test_a_refused_metadata_write_leaves_no_run(world: World) -> None:
    store = world.store
    create = world.run_create(orchestrator_run_id="fired-1")
    fired_by = {"fired_by": "schedule-1", "note": "x"}
    with refusing_metadata_key(store._db.engine, "fired_by"), pytest.raises(WharfError):
        store.runs.create_with_metadata(create, fired_by)
    assert store.runs.list(RunFilter(orchestrator_run_id="fired-1")).total == 0
    run = store.runs.create_with_metadata(create, fired_by)  # the retry creates both
    recorded = store.run_metadata.list(MetadataResourceType.PIPELINE_RUN, run.id)
    assert {m.key: m.value for m in recorded} == fired_by


def test_bad_metadata_is_refused_before_the_run_is_written(world: World) -> None:
    store = world.store
    create = world.run_create(orchestrator_run_id="fired-2")
    with pytest.raises(InputError, match="not JSON-serialisable"):
        store.runs.create_with_metadata(create, {"when": object()})
    with pytest.raises(InputError):
        store.runs.create_with_metadata(create, {"": "no key"})
    assert store.runs.list(RunFilter(orchestrator_run_id="fired-2")).total == 0
