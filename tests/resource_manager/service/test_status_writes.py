"""Status writes on every backend: requests that end alike are one compare-and-set statement by
id list, which answers with each row as written where the database has ``RETURNING``, and
refuses the whole batch when one row changed under the scheduling lock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from tests.resource_manager.service.helpers import ALICE, request_spec, setup_pool
from wharf.core.enums import ResourceRequestStatus as S
from wharf.resource_manager.domain import ENDED_RUNTIME_STATE, ResourceRequest
from wharf.resource_manager.domain.lifecycle import release
from wharf.resource_manager.service import ResourceManagerService, request_store
from wharf.resource_manager.service import tables as t
from wharf.resource_manager.service.request_store import StaleStateError
from wharf.resource_manager.service.status_writes import write_transitions

LATER = datetime.now(UTC) + timedelta(seconds=1)


def _held(rm: ResourceManagerService, count: int) -> list[ResourceRequest]:
    setup_pool(rm, gpus_total=count)
    ids = [rm.requests.create(ALICE, request_spec(step=f"s{i}")).id for i in range(count)]
    with rm._db.engine.connect() as conn:
        loaded = request_store.load(conn, ids)
    held = [loaded[i].request for i in ids]
    assert {r.status for r in held} == {S.ALLOCATED}
    return held


def _statuses(rm: ResourceManagerService) -> dict[object, str]:
    with rm._db.engine.connect() as conn:
        return dict(conn.execute(sa.select(t.requests.c.id, t.requests.c.status)).all())


def test_requests_that_end_alike_are_written_and_returned(rm: ResourceManagerService) -> None:
    held = _held(rm, 3)
    assert held[0].lease_expires_at is not None
    ended = held[0].lease_expires_at - timedelta(seconds=30)  # before the leases end
    with rm._db.engine.begin() as conn:
        written = write_transitions(conn, [(r, release(r, LATER)) for r in held], 99, ended)
    assert set(_statuses(rm).values()) == {S.RELEASED.value}
    if not rm._db.engine.dialect.update_returning:  # MariaDB: written, nothing returned
        assert written == {}
        return
    assert set(written) == {r.id for r in held}
    assert {requester for requester, _ in written.values()} == {"alice"}
    for request in held:
        assert written[request.id][1]["lease_expires_at"] == ended  # the lease ended with it
        assert written[request.id][1]["runtime_state"] is ENDED_RUNTIME_STATE


def test_one_row_changed_under_the_lock_refuses_the_batch(rm: ResourceManagerService) -> None:
    held = _held(rm, 3)
    rm.requests.release(ALICE, held[1].id)  # the stored row is no longer allocated
    with (
        pytest.raises(StaleStateError, match="1 of 3 requests changed"),
        rm._db.engine.begin() as conn,
    ):
        write_transitions(conn, [(r, release(r, LATER)) for r in held], 99, LATER)
    statuses = _statuses(rm)
    assert [statuses[r.id] for r in held] == ["allocated", "released", "allocated"]
