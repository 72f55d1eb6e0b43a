"""Contract: texts that make a record unique cannot differ from another only by edge whitespace,
on every database. MariaDB's unique keys pad with spaces (``'k8s-1'`` equals ``'k8s-1 '``), so
there a second step ``'train '`` of a run, an input ``'x '`` beside ``'x'``, a run under
orchestrator run id ``'k8s-1 '`` or a user linked to external id ``'sub '`` was refused as a
duplicate (or retried until a store error) while SQLite and PostgreSQL stored both."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from tests.store.conftest import World
from wharf.core.enums import ExecutionStatus as S
from wharf.core.errors import InputError
from wharf.store.models import RunFilter, RunStart, RunUpdate, StepRunFilter, StepRunUpdate
from wharf.store.sql.server_stores import SqlAccountStore

PADDED = ("{} ", " {}", "{}\t")


def test_step_names_and_link_names_refuse_edge_whitespace(world: World) -> None:
    run = world.run(status=S.RUNNING)
    version = world.version()
    step = world.step(run.id, name="train", inputs={"x": version.id}, outputs={"y": version.id})
    for pad in PADDED:
        with pytest.raises(InputError, match="step name must not start or end with whitespace"):
            world.step(run.id, name=pad.format("train"))
        with pytest.raises(InputError, match="step input name"):
            world.step(run.id, name="other", inputs={"x": version.id, pad.format("x"): version.id})
        with pytest.raises(InputError, match="step output name"):
            world.step(run.id, name="other", outputs={pad.format("y"): version.id})
        with pytest.raises(InputError, match="step output name"):
            world.store.steps.update(step.id, StepRunUpdate(outputs={pad.format("y"): version.id}))
    assert [s.id for s in world.store.steps.list(StepRunFilter(run_id=run.id)).items] == [step.id]
    assert world.store.steps.get(step.id).outputs == {"y": version.id}


def test_orchestrator_run_ids_refuse_edge_whitespace(world: World) -> None:
    runs = world.store.runs
    first, created = runs.get_or_create(world.run_create(orchestrator_run_id="k8s-1"))
    assert created
    for pad in PADDED:
        with pytest.raises(ValidationError, match="orchestrator_run_id"):
            runs.get_or_create(world.run_create(orchestrator_run_id=pad.format("k8s-1")))
        with pytest.raises(ValidationError, match="orchestrator_run_id"):
            RunStart(name="r", orchestrator_run_id=pad.format("k8s-1"))
        with pytest.raises(ValidationError, match="orchestrator_run_id"):
            RunUpdate(orchestrator_run_id=pad.format("k8s-2"))
    assert [r.id for r in runs.list(RunFilter(orchestrator_run_id="k8s-1")).items] == [first.id]


def test_external_ids_refuse_edge_whitespace(world: World) -> None:
    credentials = SqlAccountStore(world.store._db).credentials
    alice = world.store.users.create("alice")
    bob = world.store.users.create("bob")
    credentials.link_external(alice.id, "sub")
    for pad in PADDED:
        with pytest.raises(InputError, match="external id must not start or end with whitespace"):
            credentials.link_external(bob.id, pad.format("sub"))
    assert credentials.get_by_external_id("sub").user_id == alice.id
