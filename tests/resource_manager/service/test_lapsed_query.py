"""The lapsed-lease query (a bounded range on PostgreSQL, so that it uses the ``lapse_at`` index
before the table is analysed) finds exactly the live rows whose ``lapse_at`` was reached."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

from tests.resource_manager.service.helpers import ALICE, gpus, request_spec, setup_pool
from wharf.resource_manager.service import ResourceManagerService, request_store
from wharf.resource_manager.service import tables as t

NOW = datetime(2031, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)


def test_lapsed_finds_the_rows_due_and_no_others(rm: ResourceManagerService) -> None:
    setup_pool(rm, gpus_total=8)
    ids = [rm.requests.create(ALICE, request_spec(gpus(1), lease=60)).id for _ in range(5)]
    lapse = [
        NOW - timedelta(days=400 * 365),  # long ago
        NOW - timedelta(microseconds=1),
        NOW,  # reached exactly
        NOW + timedelta(microseconds=1),
        None,  # terminal: never lapses
    ]
    with rm._db.engine.begin() as conn:
        for request_id, at in zip(ids, lapse, strict=True):
            conn.execute(
                sa.update(t.requests).where(t.requests.c.id == request_id).values(lapse_at=at)
            )
    with rm._db.engine.begin() as conn:
        locked = {row.id for row in request_store.lapsed(conn, NOW)}
        read = {row.id for row in request_store.lapsed(conn, NOW, lock=False)}
    assert locked == read == set(ids[:3])
