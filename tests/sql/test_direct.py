"""Direct statements answer and fail exactly as ``Connection.execute`` does, on every backend."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import (
    Column,
    Connection,
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
from wharf.sql import direct
from wharf.sql.direct import DirectStatement, commit_with, rows_together
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


@pytest.fixture(params=["pipelined", "one by one"])
def pipelines(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """On PostgreSQL, statements run together go in one round trip, unless psycopg's libpq has
    no pipeline mode: then they run one by one, like everywhere else. Test both."""
    if request.param == "one by one":
        monkeypatch.setattr(direct, "_psycopg_pipelines", lambda: False)


@pytest.mark.usefixtures("pipelines")
def test_statements_run_together_answer_as_they_do_one_by_one(backend: SqlStore) -> None:
    _, step = _completed_steps(backend, "b", "a", "c")
    by_id, completed = DirectStatement(_BY_ID), DirectStatement(_COMPLETED_OF_RUN)
    queries = [
        (completed, {"run_id": step.run_id}),
        (by_id, {"step_id": uuid.uuid4()}),  # no rows
        (by_id, {"step_id": step.id}),
    ]
    with backend._db.engine.connect() as conn, conn.begin():
        together = rows_together(conn, queries)
        assert together == [query.rows(conn, values) for query, values in queries]
    assert [row["name"] for row in together[0]] == ["a", "b"] and together[1] == []
    assert together[2][0]["id"] == step.id
    with backend._db.engine.connect() as conn, conn.begin():
        assert rows_together(conn, []) == []


@pytest.mark.usefixtures("pipelines")
def test_a_failure_among_statements_run_together_is_raised_as_sqlalchemy_raises_it(
    backend: SqlStore,
) -> None:
    step = backend.steps.create(_step(backend))
    links = DirectStatement(t.step_run_input.insert())
    version = make_world(backend, "versions").version()
    row = {"step_run_id": step.id, "name": "x", "artifact_version_id": version.id}
    by_id = DirectStatement(_BY_ID)
    with backend._db.engine.connect() as conn:
        with conn.begin():
            links.execute(conn, row)
        with pytest.raises(exc.IntegrityError), conn.begin():
            rows_together(conn, [(by_id, {"step_id": step.id}), (links, row)])
        # The connection is usable again, and the failed transaction left nothing behind.
        with conn.begin():
            assert rows_together(conn, [(by_id, {"step_id": step.id})])[0][0]["id"] == step.id


@pytest.mark.usefixtures("pipelines")
def test_last_writes_commit_with_the_transaction_or_not_at_all(backend: SqlStore) -> None:
    first, second = backend.steps.create(_step(backend)), backend.steps.create(_step(backend))
    version = make_world(backend, "versions").version()
    links = DirectStatement(t.step_run_input.insert())
    rename = DirectStatement(
        _S.update().where(_S.c.id == bindparam("step_id")).values(name=bindparam("new_name"))
    )
    Write = tuple[DirectStatement, dict[str, object]]

    def link(step_id: uuid.UUID, name: str) -> Write:
        return links, {"step_run_id": step_id, "name": name, "artifact_version_id": version.id}

    def transaction(new_name: str, writes: list[Write]) -> None:
        def run(conn: Connection) -> None:
            rename.execute(conn, {"step_id": first.id, "new_name": new_name})
            commit_with(conn, writes)

        backend._db.write(run)

    def state() -> tuple[str, list[str]]:
        query = select(t.step_run_input.c.name).order_by(t.step_run_input.c.name)
        names = backend._db.read(lambda conn: list(conn.execute(query).scalars()))
        return backend.steps.get(first.id).name, names

    transaction("renamed", [link(first.id, "a"), link(first.id, "b"), link(second.id, "c")])
    assert state() == ("renamed", ["a", "b", "c"])
    # A failing write (a duplicate input) commits nothing: neither the writes before it nor
    # what the transaction did before them.
    with pytest.raises(EntityExistsError):
        transaction("lost", [link(second.id, "d"), link(second.id, "c")])
    assert state() == ("renamed", ["a", "b", "c"])
    # The pool's connections work afterwards; without last writes the transaction commits too.
    transaction("again", [])
    assert state() == ("again", ["a", "b", "c"])
