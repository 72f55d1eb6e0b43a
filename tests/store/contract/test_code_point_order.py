"""Contract: what the store sorts by text sorts by code point on every database, whatever a
PostgreSQL database's collation. Under ``en-US`` (the usual default of a PostgreSQL cluster, not
the ``C`` of the test servers) metadata keys written together were listed ``alpha``, ``Zeta``,
and ``Zeta``, ``alpha`` on SQLite and MariaDB."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import pytest

from tests.conftest import ServerDatabases, _server
from tests.store.conftest import make_world
from wharf.core.enums import MetadataResourceType
from wharf.store.sql import SqlStore

KEYS = ["alpha", "Zeta", "émile", "Émile", "zulu", "_under", "10", "9"]


@pytest.fixture
def linguistic_database_url(
    request: pytest.FixtureRequest, backend_name: str, empty_database_url: Callable[[str], str]
) -> Iterator[str]:
    """A new, empty database on ``backend_name``; on PostgreSQL one whose collation is ICU's
    ``en-US`` (dropped at the end of the session, as every server database)."""
    if backend_name != "postgresql":
        yield empty_database_url(backend_name)
        return
    server: ServerDatabases = _server(request.getfixturevalue("_servers"), "postgresql")
    name = f"wharf_t_{uuid.uuid4().hex[:12]}"
    engine = server.admin_engine()
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql(
                f'CREATE DATABASE "{name}" TEMPLATE template0 LOCALE_PROVIDER icu '
                "ICU_LOCALE 'en-US' LOCALE 'C.UTF-8'"
            )
            server.created.append(name)
            english = conn.exec_driver_sql("SELECT 'Zeta' < 'alpha' COLLATE \"en-x-icu\"")
            assert english.scalar() is False  # the collation this test is about
    finally:
        engine.dispose()
    yield server.admin_url.set(database=name).render_as_string(hide_password=False)


def test_metadata_keys_written_together_are_listed_in_code_point_order(
    linguistic_database_url: str,
) -> None:
    store = SqlStore.open(linguistic_database_url)
    try:
        world = make_world(store)
        run = world.run()
        store.run_metadata.add(MetadataResourceType.PIPELINE_RUN, run.id, dict.fromkeys(KEYS, 1))
        listed = [m.key for m in store.run_metadata.list(MetadataResourceType.PIPELINE_RUN, run.id)]
        assert listed == sorted(KEYS)
    finally:
        store.close()
