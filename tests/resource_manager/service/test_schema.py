"""The RM's own migration history: head, parity with tables.py, coexistence with the store."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory

from tests.resource_manager.service.helpers import (
    ADMIN,
    ALICE,
    gpus,
    pool_spec,
    request_spec,
    setup_pool,
)
from wharf.core.errors import SchemaVersionError
from wharf.resource_manager.domain import STOCK_DESCRIPTORS
from wharf.resource_manager.service import HEAD_REVISION, ResourceManagerService
from wharf.resource_manager.service.schema import VERSION_TABLE, alembic_config
from wharf.resource_manager.service.tables import metadata
from wharf.store.sql import SqlStore
from wharf.store.sql.schema import HEAD_REVISION as STORE_HEAD
from wharf.store.sql.tables import metadata as store_metadata


def _rm_only(name: str | None, type_: str, _parents: Any) -> bool:
    return type_ != "table" or ((name or "").startswith("rm_") and name != VERSION_TABLE)


def _store_only(name: str | None, type_: str, _parents: Any) -> bool:
    return type_ != "table" or not (name or "").startswith("rm_")


def _diff(conn: sa.Connection, target: sa.MetaData, include: Any) -> list[Any]:
    context = MigrationContext.configure(conn, opts={"compare_type": True, "include_name": include})
    return list(compare_metadata(context, target))


def test_head_revision_constant_matches_alembic() -> None:
    assert ScriptDirectory.from_config(alembic_config()).get_current_head() == HEAD_REVISION


def test_migrating_from_empty_matches_tables_and_seeds_stock_descriptors(
    backend_name: str, empty_database_url: Callable[[str], str]
) -> None:
    url = empty_database_url(backend_name)
    with ResourceManagerService.open(url) as rm:
        assert [d.name for d in rm.descriptors.list()] == ["CPU", "GPU", "memory"]
        assert {d.name: d for d in rm.descriptors.list()} == {d.name: d for d in STOCK_DESCRIPTORS}
        rm.pools.create(ADMIN, pool_spec())
        with rm._db.engine.connect() as conn:
            version = conn.execute(sa.text(f"SELECT version_num FROM {VERSION_TABLE}")).scalar()
            assert version == HEAD_REVISION
            assert _diff(conn, metadata, _rm_only) == []


def test_rm_and_store_share_one_sqlite_file_without_touching(
    empty_database_url: Callable[[str], str],
) -> None:
    url = empty_database_url("sqlite")
    store = SqlStore.open(url)
    with ResourceManagerService.open(url) as rm:
        rm.pools.create(ADMIN, pool_spec())
        store.projects.create("p")
        with rm._db.engine.connect() as conn:
            assert conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalar() == (
                STORE_HEAD
            )
            assert _diff(conn, metadata, _rm_only) == []
            assert _diff(conn, store_metadata, _store_only) == []
    store.close()
    ResourceManagerService.open(url, migrate=False).close()  # both at head
    SqlStore.open(url, migrate=False).close()


def test_concurrent_first_opens_migrate_once(
    backend_name: str, empty_database_url: Callable[[str], str]
) -> None:
    url = empty_database_url(backend_name)
    with ThreadPoolExecutor(3) as pool:
        services = list(pool.map(lambda _: ResourceManagerService.open(url), range(3)))
    try:
        services[0].pools.create(ADMIN, pool_spec())
        assert all(s.pools.get("gpus").name == "gpus" for s in services)
        assert len(services[1].descriptors.list()) == 3
    finally:
        for service in services:
            service.close()


def test_newer_schema_is_refused(
    backend_name: str, empty_database_url: Callable[[str], str]
) -> None:
    url = empty_database_url(backend_name)
    rm = ResourceManagerService.open(url)
    with rm._db.engine.begin() as conn:
        conn.execute(sa.text(f"UPDATE {VERSION_TABLE} SET version_num = 'ffff_future'"))
    rm.close()
    with pytest.raises(SchemaVersionError) as info:
        ResourceManagerService.open(url)
    assert str(info.value) == (
        "The Resource Manager schema (revision ffff_future) is newer than this Wharf "
        f"(head {HEAD_REVISION}); upgrade Wharf."
    )


def test_migrate_false_refuses_an_empty_database(empty_database_url: Callable[[str], str]) -> None:
    url = empty_database_url("sqlite")
    with pytest.raises(SchemaVersionError, match=r"no Resource Manager schema.*migrate=True"):
        ResourceManagerService.open(url, migrate=False)
    ResourceManagerService.open(url).close()
    ResourceManagerService.open(url, migrate=False).close()


def test_downgrade_and_upgrade_again(empty_database_url: Callable[[str], str]) -> None:
    from alembic import command

    url = empty_database_url("sqlite")
    rm = ResourceManagerService.open(url)
    with rm._db.engine.begin() as conn:
        command.downgrade(alembic_config(conn), "base")
    with rm._db.engine.connect() as conn:
        assert sa.inspect(conn).get_table_names() == [VERSION_TABLE]
    rm.close()
    with ResourceManagerService.open(url) as again:
        assert len(again.descriptors.list()) == 3


def test_demands_and_allocations_survive_a_downgrade_to_child_rows_and_back(
    backend_name: str, empty_database_url: Callable[[str], str]
) -> None:
    """Migration 0002 moves demand and allocation rows into JSON columns; its downgrade moves
    them back: a request reads the same after the round trip, on every backend."""
    from alembic import command

    url = empty_database_url(backend_name)
    with ResourceManagerService.open(url) as rm:
        setup_pool(rm, gpus_total=2, target_settings={"node": {"zone": "a"}})
        held = rm.requests.create(
            ALICE,
            request_spec(gpus(1), {"kind": "gpu", "quantity": 1, "class": "h100"}),
        )
        waiting = rm.requests.create(ALICE, request_spec(gpus(1), step="s2"))
        assert (held.status.value, waiting.status.value) == ("allocated", "pending")
        with rm._db.engine.begin() as conn:
            command.downgrade(alembic_config(conn), "0001")
        with rm._db.engine.connect() as conn:
            demands = conn.execute(sa.text("SELECT COUNT(*) FROM rm_request_demands")).scalar()
            allocations = conn.execute(sa.text("SELECT COUNT(*) FROM rm_allocations")).scalar()
            assert (demands, allocations) == (3, 2)
            assert "demands" not in {c["name"] for c in sa.inspect(conn).get_columns("rm_requests")}
    with ResourceManagerService.open(url) as again:  # upgrades to head
        assert again.requests.get(held.id) == held
        assert again.requests.get(waiting.id) == waiting
        with again._db.engine.connect() as conn:
            assert _diff(conn, metadata, _rm_only) == []
