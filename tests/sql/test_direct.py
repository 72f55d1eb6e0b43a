"""Direct statements answer and fail exactly as ``Connection.execute`` does, on every backend."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import (
    Column,
    Integer,
    MetaData,
    String,
    Table,
    bindparam,
    exc,
    func,
    select,
)
from tests.store.conftest import World, make_world

from wharf.core.enums import ExecutionStatus
from wharf.core.errors import EntityExistsError, InputError
from wharf.sql.direct import DirectStatement
from wharf.store.models import StepRunCreate, StepRunRecord, StepRunUpdate
from wharf.store.sql import SqlStore
from wharf.store.sql import tables as t

_S = t.step_run
_BY_ID = select(_S).where(_S.c.id == bindparam("step_id"))
_COMPLETED_OF_RUN = (
    select(_S.c.id, _S.c.name, _S.c.created)
    .where(_S.c.run_id == bindparam("run_id"), _S.c.status == ExecutionStatus.COMPLETED.value)
    .order_by(_S.c.name)
    .limit(2)
)


def _step(backend: SqlStore, **values: object) -> StepRunCreate:
    world = make_world(backend, f"p-{uuid.uuid4().hex[:8]}")
    run = world.run(status=ExecutionStatus.RUNNING)
    return StepRunCreate.model_validate(
        {"run_id": run.id, "name": "s", "status": ExecutionStatus.RUNNING, **values}
    )


def test_a_row_equals_the_row_sqlalchemy_returns(backend: SqlStore) -> None:
    step = backend.steps.create(
        _step(
            backend,
            parameters={"lr": 0.1, "layers": [1, 2], "name": "é"},
            cache_key="k",
            cache_expires_at=datetime(2030, 1, 2, 3, 4, 5, 678901, tzinfo=UTC),
        )
    )
    direct = DirectStatement(_BY_ID)
    with backend._db.engine.connect() as conn, conn.begin():
        expected = conn.execute(_BY_ID, {"step_id": step.id}).one()._asdict()
        assert direct.rows(conn, {"step_id": step.id}) == [expected]
        assert direct.first(conn, {"step_id": uuid.uuid4()}) is None
    assert isinstance(expected["id"], uuid.UUID) and expected["parameters"]["name"] == "é"
    assert expected["cache_expires_at"] == step.cache_expires_at


def _completed_steps(backend: SqlStore, *names: str) -> tuple[World, StepRunRecord]:
    """A running run with a completed step of each name: (its world, the last step)."""
    world = make_world(backend)
    run = world.run(status=ExecutionStatus.RUNNING)
    for name in names:
        step = world.step(run.id, name=name)
        backend.steps.update(step.id, StepRunUpdate(status=ExecutionStatus.COMPLETED))
    return world, step


def test_literals_and_limits_are_sent_with_the_statement(backend: SqlStore) -> None:
    world, step = _completed_steps(backend, "c", "a", "b")
    world.step(step.run_id, name="0")
    direct = DirectStatement(_COMPLETED_OF_RUN)
    with backend._db.engine.connect() as conn, conn.begin():
        expected = [r._asdict() for r in conn.execute(_COMPLETED_OF_RUN, {"run_id": step.run_id})]
        assert [r["name"] for r in expected] == ["a", "b"]
        assert direct.rows(conn, {"run_id": step.run_id}) == expected


def test_inserts_and_updates_write_the_columns_they_are_given(backend: SqlStore) -> None:
    step = backend.steps.create(_step(backend))
    update = DirectStatement(_S.update().where(_S.c.id == bindparam("step_id")))
    later = datetime(2031, 5, 6, tzinfo=UTC)
    with backend._db.engine.connect() as conn, conn.begin():
        update.execute(conn, {"step_id": step.id, "status_reason": "why"})
        update.execute(conn, {"step_id": step.id, "cache_key": "c2", "updated": later})
    stored = backend.steps.get(step.id)
    assert (stored.status_reason, stored.cache_key, stored.updated) == ("why", "c2", later)
    assert stored.status is ExecutionStatus.RUNNING  # not given: left alone


def test_a_write_with_sql_expressions_returns_what_it_wrote(backend: SqlStore) -> None:
    # Values the database computes (here a coalesce) need nothing from SQLAlchemy; RETURNING
    # rows are read like a select's where the database has UPDATE ... RETURNING.
    step = backend.steps.create(_step(backend, cache_key="old"))
    statement = (
        _S.update()
        .where(_S.c.id == bindparam("step_id"))
        .values(cache_key=func.coalesce(bindparam("key", type_=String()), _S.c.cache_key))
    )
    with backend._db.engine.connect() as conn, conn.begin():
        count = DirectStatement(statement).execute(conn, {"step_id": step.id, "key": None})
        assert count == 1  # matched, even where nothing changed (as Connection.execute counts)
        assert DirectStatement(statement).execute(conn, {"step_id": uuid.uuid4(), "key": "x"}) == 0
        if conn.dialect.update_returning:
            returning = DirectStatement(statement, returning=(_S.c.id, _S.c.cache_key))
            rows = returning.rows(conn, {"step_id": step.id, "key": "new"})
            assert rows == [{"id": step.id, "cache_key": "new"}]
        else:
            DirectStatement(statement).execute(conn, {"step_id": step.id, "key": "new"})
    assert backend.steps.get(step.id).cache_key == "new"


def test_driver_errors_are_raised_as_sqlalchemy_raises_them(backend: SqlStore) -> None:
    step = backend.steps.create(_step(backend))
    links = DirectStatement(t.step_run_input.insert())
    version = make_world(backend, "versions").version()
    row = {"step_run_id": step.id, "name": "x", "artifact_version_id": version.id}
    with backend._db.engine.connect() as conn, conn.begin():
        links.execute_many(conn, [row])
        with pytest.raises(exc.IntegrityError):
            links.execute_many(conn, [row])
    # Through the store's boundary: the repository's error, as for any other statement.
    with pytest.raises(EntityExistsError):
        backend.steps.create(_step(backend).model_copy(update={"run_id": step.run_id}))
    with pytest.raises(InputError, match="cannot be stored"):
        backend.steps.create(_step(backend, parameters={"bad": object()}))


def test_statements_it_cannot_run_faithfully_are_refused(backend: SqlStore) -> None:
    table = Table(
        "t", MetaData(), Column("id", Integer, primary_key=True), Column("v", String, default="d")
    )
    with backend._db.engine.connect() as conn:
        with pytest.raises(ValueError, match="column defaults"):
            DirectStatement(table.insert()).execute(conn, {"id": 1})
        twice = select(_S.c.name, t.pipeline_run.c.name).select_from(_S.join(t.pipeline_run))
        with pytest.raises(ValueError, match="distinct column keys"):
            DirectStatement(twice).rows(conn, {})


def test_a_cached_step_reads_back_equal_through_both_paths(backend: SqlStore) -> None:
    created = backend.steps.create(_step(backend, cache_key="ck"))
    backend.steps.update(created.id, StepRunUpdate(status=ExecutionStatus.COMPLETED))
    now = created.created + timedelta(seconds=1)
    found = backend.steps.find_cached(created.project_id, "ck", now)
    assert found == backend.steps.get(created.id)
