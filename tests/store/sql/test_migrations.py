"""Schema revisions: head constant, upgrades from empty, autogenerate parity, newer schemas."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory

from tests.store.conftest import make_world
from wharf.core.enums import ExecutionStatus as S
from wharf.core.errors import SchemaVersionError
from wharf.store.sql import SqlStore
from wharf.store.sql.schema import HEAD_REVISION, alembic_config
from wharf.store.sql.tables import metadata


def test_head_revision_constant_matches_alembic() -> None:
    assert ScriptDirectory.from_config(alembic_config()).get_current_head() == HEAD_REVISION


def test_migrating_from_empty_matches_tables(
    backend_name: str, empty_database_url: Callable[[str], str]
) -> None:
    url = empty_database_url(backend_name)
    store = SqlStore.open(url)
    try:
        store.projects.create("works")
        with store._db.engine.connect() as conn:
            assert MigrationContext.configure(conn).get_current_revision() == HEAD_REVISION
            context = MigrationContext.configure(conn, opts={"compare_type": True})
            assert compare_metadata(context, metadata) == []
    finally:
        store.close()


def test_concurrent_first_opens_migrate_once(
    backend_name: str, empty_database_url: Callable[[str], str]
) -> None:
    url = empty_database_url(backend_name)
    with ThreadPoolExecutor(3) as pool:
        stores = list(pool.map(lambda _: SqlStore.open(url), range(3)))
    try:
        stores[0].users.create("u")
        assert all(s.users.get_by_name("u").name == "u" for s in stores)
    finally:
        for store in stores:
            store.close()


def test_newer_schema_is_refused(
    backend_name: str, empty_database_url: Callable[[str], str]
) -> None:
    url = empty_database_url(backend_name)
    store = SqlStore.open(url)
    with store._db.engine.begin() as conn:
        conn.execute(sa.text("UPDATE alembic_version SET version_num = 'ffff_future'"))
    store.close()
    with pytest.raises(SchemaVersionError) as info:
        SqlStore.open(url)
    assert str(info.value) == (
        f"The database schema (revision ffff_future) is newer than this Wharf "
        f"(head {HEAD_REVISION}); upgrade Wharf."
    )


def test_migrate_false_refuses_an_empty_database(
    backend_name: str, empty_database_url: Callable[[str], str]
) -> None:
    url = empty_database_url(backend_name)
    with pytest.raises(SchemaVersionError, match=r"no Wharf schema.*migrate=True"):
        SqlStore.open(url, migrate=False)
    SqlStore.open(url).close()
    SqlStore.open(url, migrate=False).close()  # at head: fine


def test_downgrade_and_upgrade_again(empty_database_url: Callable[[str], str]) -> None:
    url = empty_database_url("sqlite")
    store = SqlStore.open(url)
    with store._db.engine.begin() as conn:
        command.downgrade(alembic_config(conn), "base")
    with store._db.engine.connect() as conn:
        assert sa.inspect(conn).get_table_names() == ["alembic_version"]
    store.close()
    SqlStore.open(url).close()  # an older (empty) schema is upgraded to head


def test_0002_downgrades_and_upgrades_with_step_runs_in_place(
    backend_name: str, empty_database_url: Callable[[str], str]
) -> None:
    url = empty_database_url(backend_name)
    store = SqlStore.open(url)
    try:
        world = make_world(store)
        step = world.step(logs_uri="/logs/a.log")
        store.steps.update_heartbeat(step.id, 30)
        with store._db.engine.begin() as conn:
            command.downgrade(alembic_config(conn), "0001")
        with store._db.engine.connect() as conn:
            columns = {c["name"] for c in sa.inspect(conn).get_columns("step_run")}
            indexes = {i["name"] for i in sa.inspect(conn).get_indexes("step_run")}
            assert not columns & {"heartbeat_deadline", "spec", "logs_uri", "pid"}
            assert "ix_step_run_heartbeat_deadline" not in indexes
            kept = conn.execute(sa.text("SELECT name, last_heartbeat FROM step_run")).one()
            assert kept[0] == step.name and kept[1] is not None
    finally:
        store.close()
    store = SqlStore.open(url)  # 0001 -> head again, rows kept, new columns empty
    try:
        again = store.steps.get(step.id)
        assert (again.name, again.status) == (step.name, S.RUNNING)
        assert again.last_heartbeat is not None and again.heartbeat_deadline is None
        assert (again.spec, again.logs_uri, again.pid) == (None, None, None)
        assert store.steps.fail_lost_heartbeats(datetime(9999, 1, 1, tzinfo=UTC)) == []
        with store._db.engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={"compare_type": True})
            assert compare_metadata(context, metadata) == []
    finally:
        store.close()


def test_0003_adds_and_drops_the_account_tables(
    backend_name: str, empty_database_url: Callable[[str], str]
) -> None:
    url = empty_database_url(backend_name)
    store = SqlStore.open(url)
    accounts = ("user_credential", "service_account", "api_key", "project_member")
    try:
        user = store.users.create("kept")
        with store._db.engine.begin() as conn:
            command.downgrade(alembic_config(conn), "0002")
        with store._db.engine.connect() as conn:
            tables = set(sa.inspect(conn).get_table_names())
            assert not tables & set(accounts) and "user_account" in tables
    finally:
        store.close()
    store = SqlStore.open(url)  # 0002 -> head again
    try:
        assert store.users.get(user.id).name == "kept"
        with store._db.engine.connect() as conn:
            assert set(accounts) <= set(sa.inspect(conn).get_table_names())
            context = MigrationContext.configure(conn, opts={"compare_type": True})
            assert compare_metadata(context, metadata) == []
    finally:
        store.close()


def test_0005_the_cache_lookup_reads_its_index(empty_database_url: Callable[[str], str]) -> None:
    """SQLite's plan for the lookup: a search of the covering index, never a scan of every
    step run with the key (cached re-runs included)."""
    from wharf.store.sql.repositories.steps import _FIND_CACHED

    store = SqlStore.open(empty_database_url("sqlite"))
    try:
        with store._db.engine.connect() as conn:
            compiled = _FIND_CACHED._statement.compile(conn)
            params = {"project_id": "00" * 16, "cache_key": "k", "now": "2026-01-01 00:00:00"}
            plan = conn.exec_driver_sql(
                f"EXPLAIN QUERY PLAN {compiled}",
                tuple(params.get(name) for name in compiled.positiontup or ()),
            ).all()
        details = " ".join(str(row[-1]) for row in plan)
        assert "USING INDEX ix_step_run_project_id_cache_key_status_created_id" in details, details
        assert "TEMP B-TREE" not in details, details  # read in the index's order: no sort
    finally:
        store.close()


def test_0006_downgrades_and_upgrades_with_live_runs_in_place(
    backend_name: str, empty_database_url: Callable[[str], str]
) -> None:
    from wharf.store.models import OrchestratorProcess

    url = empty_database_url(backend_name)
    store = SqlStore.open(url)
    process = OrchestratorProcess(host="h", pid=7, start="b:1", liveness_timeout_seconds=30)
    try:
        world = make_world(store)
        run = world.run(status=S.RUNNING, orchestrator=process)
        with store._db.engine.begin() as conn:
            command.downgrade(alembic_config(conn), "0005")
        with store._db.engine.connect() as conn:
            columns = {c["name"] for c in sa.inspect(conn).get_columns("pipeline_run")}
            indexes = {i["name"] for i in sa.inspect(conn).get_indexes("pipeline_run")}
            assert not columns & {"orchestrator_host", "heartbeat_deadline", "stop_forced"}
            assert not {i for i in indexes if i and "heartbeat_deadline" in i}
            step_columns = {c["name"] for c in sa.inspect(conn).get_columns("step_run")}
            assert not step_columns & {"pid_host", "pid_start"}
    finally:
        store.close()
    store = SqlStore.open(url)  # 0005 -> head again: the run kept, with no liveness record
    try:
        again = store.runs.get(run.id)
        assert (again.name, again.status) == (run.name, S.RUNNING)
        assert (again.orchestrator_host, again.heartbeat_deadline, again.stop_forced) == (
            None,
            None,
            False,
        )
        far = datetime(9999, 1, 1, tzinfo=UTC)
        assert store.runs.fail_lost_orchestrators(far) == []  # never swept: nothing to go by
        with store._db.engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={"compare_type": True})
            assert compare_metadata(context, metadata) == []
    finally:
        store.close()


def test_0006_the_lost_run_sweep_reads_its_index(empty_database_url: Callable[[str], str]) -> None:
    """SQLite's plan for the sweep's read: a range of the deadline index (unfinished runs
    only), never a scan of every run."""
    from wharf.store.sql.repositories.run_liveness import _LIVE, _R

    store = SqlStore.open(empty_database_url("sqlite"))
    try:
        stmt = sa.select(_R).where(
            *_LIVE,
            sa.or_(
                _R.c.heartbeat_deadline < datetime(2026, 1, 1, tzinfo=UTC),
                _R.c.orchestrator_host == "h",
            ),
        )
        with store._db.engine.connect() as conn:
            compiled = stmt.compile(conn, compile_kwargs={"literal_binds": True})
            plan = conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {compiled}").all()
        details = " ".join(str(row[-1]) for row in plan)
        assert "SEARCH pipeline_run USING INDEX ix_pipeline_run_heartbeat_deadline" in details
        assert "USING INDEX ix_pipeline_run_orchestrator_host_heartbeat_deadline" in details
        assert "SCAN" not in details, details
    finally:
        store.close()
