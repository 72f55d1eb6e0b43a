"""The cache decisions of a run (``CacheDecisions``), on real local runs with the embedded store.

How many store calls made the decisions is read from the store itself: every step run one
``find_cached_or_create_many`` call writes gets that call's single instant (``created``, one
transaction), so the distinct instants of a fully cached run's step runs count the calls that
recorded them.
"""

from __future__ import annotations

import collections
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from wharf.config.global_config import load_config
from wharf.core.enums import ComponentType, ExecutionStatus
from wharf.sdk.workspace import Workspace
from wharf.store.models import PageRequest, PipelineRunRecord, StepRunFilter, StepRunRecord

CACHED = ExecutionStatus.CACHED

STEPS = """
from wharf import pipeline, step


@step
def trivial(i: int) -> int:
    return i


@step
def plus_one(i: int) -> int:
    return i + 1


def wide(n: int, parallelism: int | None, new_from: int | None = None):
    # n independent steps; from step ``new_from`` on, every other one has a new parameter.
    @pipeline(name="wide", max_parallelism=parallelism)
    def wide_pipeline() -> None:
        for i in range(n):
            fresh = new_from is not None and i >= new_from and i % 2
            trivial(1000 + i if fresh else i)

    return wide_pipeline


@step(enable_cache=False)
def consume(i: int) -> int:
    return i * 10


def consumed(n: int, parallelism: int | None):
    # n chains of a cacheable step and an uncached one that loads its output.
    @pipeline(name="consumed", max_parallelism=parallelism)
    def consumed_pipeline() -> None:
        for i in range(n):
            consume(trivial(i))

    return consumed_pipeline


def pairs(n: int):
    # n chains of two steps: the second ready only once the first ended.
    @pipeline(name="pairs", max_parallelism=4)
    def pairs_pipeline() -> None:
        for i in range(n):
            plus_one(trivial(i))

    return pairs_pipeline
"""


@pytest.fixture
def workspace(tmp_path: Path) -> Iterator[Workspace]:
    (tmp_path / "cache_steps_mod.py").write_text(STEPS)
    sys.path.insert(0, str(tmp_path))
    opened = Workspace.open(load_config({}, home=tmp_path / "home"))
    try:
        yield opened
    finally:
        opened.close()
        sys.path.remove(str(tmp_path))
        sys.modules.pop("cache_steps_mod", None)


def steps_of(workspace: Workspace, run: PipelineRunRecord) -> list[StepRunRecord]:
    page = workspace.store.steps.list(StepRunFilter(run_id=run.id), PageRequest(size=1000))
    return list(page.items)


@pytest.mark.parametrize("parallelism", [None, 1, 50])
def test_a_fully_cached_run_decides_many_steps_per_store_call(
    workspace: Workspace, parallelism: int | None
) -> None:
    import cache_steps_mod  # type: ignore[import-not-found]

    pipeline = cache_steps_mod.wide(300, parallelism)
    first = pipeline.run_in(workspace)
    assert first.status is ExecutionStatus.COMPLETED
    again = pipeline.run_in(workspace)
    assert again.status is ExecutionStatus.COMPLETED
    steps = steps_of(workspace, again)
    assert len(steps) == 300
    assert {s.status for s in steps} == {ExecutionStatus.CACHED}
    originals = {s.name: s.id for s in steps_of(workspace, first)}
    assert {s.name: s.original_step_run_id for s in steps} == originals
    calls = len({s.created for s in steps})
    # 300 steps, one per call before; the look-ahead doubles from 8 steps up to 200 per call.
    # How many slot-holding threads meet in one call depends on thread timing (12-16 calls
    # seen at parallelism 50), so the bound is what batching guarantees: ten times fewer.
    assert calls <= 30, calls


def test_steps_found_missing_ahead_are_created_once_they_get_a_slot(
    workspace: Workspace,
) -> None:
    import cache_steps_mod

    first = cache_steps_mod.wide(120, 4).run_in(workspace)
    assert first.status is ExecutionStatus.COMPLETED
    # The first 40 steps are cached, and the look-ahead grows; then every other step is new:
    # looked at ahead, found missing, left ready, and created once it gets its slot.
    again = cache_steps_mod.wide(120, 4, new_from=40).run_in(workspace)
    assert again.status is ExecutionStatus.COMPLETED
    steps = steps_of(workspace, again)
    assert len(steps) == 120 and len({s.name for s in steps}) == 120  # each step once
    statuses = collections.Counter(s.status for s in steps)
    assert statuses == {ExecutionStatus.CACHED: 80, ExecutionStatus.COMPLETED: 40}
    assert all(s.attempt == 1 for s in steps)


def test_steps_that_become_ready_when_cached_ones_end_are_decided_ahead_too(
    workspace: Workspace,
) -> None:
    import cache_steps_mod

    pipeline = cache_steps_mod.pairs(100)
    assert pipeline.run_in(workspace).status is ExecutionStatus.COMPLETED
    again = pipeline.run_in(workspace)
    assert again.status is ExecutionStatus.COMPLETED
    steps = steps_of(workspace, again)
    assert len(steps) == 200 and {s.status for s in steps} == {ExecutionStatus.CACHED}
    assert len({s.created for s in steps}) <= 20


@pytest.mark.parametrize("parallelism", [None, 1])
def test_a_cached_step_whose_output_files_are_gone_runs_again(
    workspace: Workspace, parallelism: int | None
) -> None:
    """Files deleted from the artifact store by hand: the steps that made them are no hits (a
    consumer would fail to load them), so they run again; the others stay cached."""
    import cache_steps_mod

    pipeline = cache_steps_mod.consumed(30, parallelism)
    first = pipeline.run_in(workspace)
    assert first.status is ExecutionStatus.COMPLETED
    store = workspace.component_instance(workspace.active_stack(), ComponentType.ARTIFACT_STORE)
    made = {s.name: s for s in steps_of(workspace, first) if s.name.startswith("trivial")}
    deleted = sorted(made)[::7]  # a few, among the first decided and those looked at ahead
    for name in deleted:
        (version_id,) = made[name].outputs.values()
        store.rmtree(workspace.store.artifacts.get_version(version_id).uri)

    again = pipeline.run_in(workspace)
    assert again.status is ExecutionStatus.COMPLETED, again.status_reason
    steps = {s.name: s for s in steps_of(workspace, again)}
    assert len(steps) == 60 and all(s.attempt == 1 for s in steps.values())
    ran = {n for n, s in steps.items() if n.startswith("trivial") and s.status is not CACHED}
    assert ran == set(deleted)
    assert all(steps[n].status is ExecutionStatus.COMPLETED for n in deleted)
    assert all(
        s.original_step_run_id == made[n].id
        for n, s in steps.items()
        if n not in ran and n.startswith("trivial")
    )
    third = pipeline.run_in(workspace)  # the outputs made again are reused
    assert {s.status for s in steps_of(workspace, third) if s.name.startswith("trivial")} == {
        CACHED
    }
