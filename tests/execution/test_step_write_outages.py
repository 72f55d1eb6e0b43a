# ruff: noqa: F811  (the workspace fixture of test_cache_decisions)
"""Creating step runs through a short store outage (:mod:`wharf.execution.step_writes`): the
engine names each step run before the first try and retries its creation until the outage
ends or the liveness timeout runs out; a try whose answer was lost is not written twice, and a
step's resource request is made once (released only if the write failed for good).

A real SQLite store whose step-run writes fail as in an outage (before writing, or after: the
answer lost); a fake clock, so the retries' backoff costs no time. Last, a real local run of a
static pipeline whose batched cache decisions lose their answers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import pytest

from tests.execution.clocks import Clock
from tests.execution.test_cache_decisions import steps_of as cached_steps_of
from tests.execution.test_cache_decisions import workspace  # noqa: F401 (fixture)
from tests.server.resource_world import step_spec
from tests.store.conftest import World
from tests.store.contract.test_step_cache_batches import completed
from wharf.artifacts.materializers.registry import default_registry
from wharf.artifacts.store import LocalArtifactStore
from wharf.core.enums import ExecutionStatus as S
from wharf.core.enums import StepRuntime
from wharf.core.errors import StoreUnavailableError
from wharf.execution import step_writes
from wharf.execution.heartbeat import liveness_timeout_for
from wharf.execution.services import RunServices
from wharf.sdk.workspace import Workspace
from wharf.store.models import StepRunCreate, StepRunFilter
from wharf.store.sql.repositories.batches import SqlStepRuns

INTERVAL = 5.0
DOWN = StoreUnavailableError("The workspace server's database is unavailable; try again later.")


class Port:
    """A step-resources port that makes requests here (as the embedded adapter does)."""

    makes_requests = True

    def __init__(self) -> None:
        self.requested: list[UUID] = []
        self.released: list[UUID] = []

    def request(self, step_id: UUID, step: StepRunCreate) -> UUID:
        self.requested.append(uuid4())
        return self.requested[-1]

    def release(self, request_id: UUID) -> None:
        self.released.append(request_id)


def services_for(world: World, tmp_path: Path, clock: Clock, port: Port | None = None) -> Any:
    return RunServices(
        store=world.store,
        artifact_store=LocalArtifactStore(tmp_path / "artifacts"),
        materializers=default_registry(),
        project_id=world.project.id,
        clock=clock,
        sleep=clock.sleep,
        heartbeat_interval=INTERVAL,
        resources=port,  # type: ignore[arg-type]
    )


def outage(monkeypatch: pytest.MonkeyPatch, name: str, failures: list[str]) -> list[str]:
    """``SqlStepRuns.<name>`` fails as in an outage once per item of ``failures``: "before"
    writing, or "after" (written, the answer lost); then it answers. The calls, as made."""
    real = getattr(SqlStepRuns, name)
    calls: list[str] = []

    def flaky(self: SqlStepRuns, *args: Any, **kwargs: Any) -> Any:
        how = failures.pop(0) if failures else "ok"
        calls.append(how)
        if how == "before":
            raise DOWN
        answer = real(self, *args, **kwargs)
        if how == "after":
            raise DOWN
        return answer

    monkeypatch.setattr(SqlStepRuns, name, flaky)
    return calls


def step_runs(world: World, run_id: UUID) -> list[Any]:
    return world.store.steps.list(StepRunFilter(run_id=run_id)).items


def test_a_create_whose_answers_were_lost_writes_the_step_once(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    run = world.run(status=S.RUNNING)
    calls = outage(monkeypatch, "create", ["after", "before", "after"])
    create = StepRunCreate(run_id=run.id, name="train", status=S.RUNNING)
    record = step_writes.create(services_for(world, tmp_path, clock), create)
    assert calls == ["after", "before", "after", "ok"]
    assert clock.sleeps == [0.25, 0.5, 1.0]
    assert [s.id for s in step_runs(world, run.id)] == [record.id]
    assert record.status is S.RUNNING


def test_an_outage_longer_than_the_liveness_timeout_raises(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    run = world.run(status=S.RUNNING)
    outage(monkeypatch, "create", ["before"] * 100)
    with pytest.raises(StoreUnavailableError):
        step_writes.create(
            services_for(world, tmp_path, clock),
            StepRunCreate(run_id=run.id, name="train", status=S.RUNNING),
        )
    assert sum(clock.sleeps) == pytest.approx(liveness_timeout_for(INTERVAL))
    assert step_runs(world, run.id) == []


def test_a_batch_of_cache_decisions_whose_answer_was_lost_is_decided_once(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    cached = completed(world, "hit")
    run = world.run(status=S.RUNNING)
    calls = outage(monkeypatch, "find_cached_or_create_many", ["after", "before"])
    steps = [
        StepRunCreate(run_id=run.id, name=name, status=S.RUNNING, cache_key=key)
        for name, key in (("a", "hit"), ("b", "miss"), ("c", "ahead"))
    ]
    hit, miss, ahead = step_writes.find_cached_or_create_many(
        services_for(world, tmp_path, clock),
        steps,
        world.project.id,
        clock.now,
        record_hit=True,
        create=[True, True, False],
    )
    assert calls == ["after", "before", "ok"]
    assert hit is not None and not hit.created and hit.step == cached
    assert miss is not None and miss.created and ahead is None
    written = {s.name: s for s in step_runs(world, run.id)}
    assert set(written) == {"a", "b"}
    assert hit.recorded == written["a"] and miss.step == written["b"]


def test_a_queued_step_makes_its_request_once_through_lost_answers(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock, port = Clock(), Port()
    run = world.run(status=S.RUNNING)
    outage(monkeypatch, "find_cached_or_create", ["after", "after"])
    create = StepRunCreate(
        run_id=run.id,
        name="train",
        status=S.QUEUED,
        cache_key="key",
        spec=step_spec("train"),
        runtime=StepRuntime.ISOLATED,
    )
    found = step_writes.find_cached_or_create(
        services_for(world, tmp_path, clock, port),
        create,
        world.project.id,
        clock.now,
        record_hit=False,
    )
    assert found.created and found.step.resource_request_id == port.requested[0]
    assert len(port.requested) == 1 and port.released == []
    assert [s.id for s in step_runs(world, run.id)] == [found.step.id]


def test_a_queued_step_whose_write_failed_for_good_releases_its_request(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock, port = Clock(), Port()
    run = world.run(status=S.RUNNING)
    outage(monkeypatch, "create", ["before"] * 100)
    create = StepRunCreate(
        run_id=run.id,
        name="train",
        status=S.QUEUED,
        attempt=2,
        spec=step_spec("train"),
        runtime=StepRuntime.ISOLATED,
    )
    with pytest.raises(StoreUnavailableError):
        step_writes.create(services_for(world, tmp_path, clock, port), create)
    assert port.released == port.requested and len(port.requested) == 1


def test_a_static_run_whose_cache_decisions_lost_answers_writes_each_step_once(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real local run (embedded store): every other batch of cache decisions is written but
    its answer lost, first on a run that creates its steps, then on one that finds them all
    cached (the hits recorded in the lost tries)."""
    import cache_steps_mod  # type: ignore[import-not-found]

    workspace.sleep = lambda seconds: None  # the retries' backoff costs no time
    for status in (S.COMPLETED, S.CACHED):
        calls = outage(monkeypatch, "find_cached_or_create_many", ["after", "ok"] * 50)
        run = cache_steps_mod.pairs(12).run_in(workspace)
        assert run.status is S.COMPLETED, run.status_reason
        assert calls.count("after") >= 2
        steps = cached_steps_of(workspace, run)
        assert len(steps) == 24 and len({s.name for s in steps}) == 24  # each step once
        assert {s.status for s in steps} == {status}
        monkeypatch.undo()
