"""Stress: a dynamic pipeline of 1,000 steps, 100 at a time, keeps every record intact."""

from __future__ import annotations

import pytest

from tests.e2e import steps_lib
from wharf import pipeline
from wharf.core.enums import ExecutionStatus
from wharf.sdk.workspace import Workspace
from wharf.store.models import StepRunFilter

STEPS = 1000


@pytest.mark.slow
def test_thousand_dynamic_steps_hundred_in_parallel(workspace: Workspace) -> None:
    @pipeline(dynamic=True, max_parallelism=100, enable_cache=False)
    def stress() -> None:
        results = steps_lib.double.map(list(range(STEPS)))
        assert results.load() == [2 * i for i in range(STEPS)]

    run = stress.run_in(workspace)
    assert run.status is ExecutionStatus.COMPLETED, run.status_reason
    store = workspace.store
    page = store.steps.list(StepRunFilter(run_id=run.id))
    assert page.total == STEPS
    completed = store.steps.list(
        StepRunFilter(run_id=run.id, status=ExecutionStatus.COMPLETED)
    ).total
    assert completed == STEPS
    versions = store.artifacts.list_versions().total
    assert versions == STEPS
    names = set()
    for index in range(1, page.total_pages + 1):
        from wharf.store.models import PageRequest

        batch = store.steps.list(StepRunFilter(run_id=run.id), PageRequest(index=index, size=500))
        for record in batch.items:
            names.add(record.name)
            assert len(record.outputs) == 1 and record.end_time is not None
    assert len(names) == STEPS
