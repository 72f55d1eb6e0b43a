"""The driver-level many-row INSERT stores exactly what SQLAlchemy's own ``executemany`` stores,
on every backend: the same request read back, field by field (JSON, instants with microseconds,
NULLs, UUIDs), also when the rows need several multi-row statements."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
import sqlalchemy as sa

from tests.resource_manager.service.helpers import ALICE, gpus, request_spec, setup_pool
from wharf.resource_manager.domain import Allocation
from wharf.resource_manager.service import ResourceManagerService, bulk_insert, codec, request_store
from wharf.resource_manager.service import tables as t
from wharf.resource_manager.service.bulk_insert import insert_many, insert_tables
from wharf.sql import direct, errors
from wharf.sql.direct import commit_with


def _rows(request_id: uuid.UUID, model: object) -> tuple[dict[str, object], request_store.Children]:
    copy = model.model_copy(update={"id": request_id})  # type: ignore[attr-defined]
    allocations = [
        Allocation.model_validate(
            {**a.model_dump(), "id": uuid.uuid5(request_id, str(i)), "request_id": request_id}
        )
        for i, a in enumerate(copy.allocations)
    ]
    copy = copy.model_copy(update={"allocations": tuple(allocations)})
    row = codec.request_row(copy, requester="alice", pool_id=copy.allocations[0].pool_id, seq=7)
    children = request_store.Children.empty()
    children.add(copy)
    return row, children


@pytest.fixture(params=["statements", "copy"])
def copy_from(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """PostgreSQL: few rows go as a multi-row INSERT, many through COPY; test both."""
    if request.param == "copy":
        monkeypatch.setattr(bulk_insert, "COPY_FROM_ROWS", 0)


@pytest.mark.usefixtures("copy_from")
def test_the_same_rows_either_way(rm: ResourceManagerService) -> None:
    # Backslashes, tabs and newlines must survive COPY's text format (PostgreSQL) unchanged.
    zone = "é-1\\ \t|\n\\N"
    setup_pool(rm, gpus_total=4, target_settings={"node": {"zone": zone}})
    spec = request_spec(
        gpus(1), gpus(1, **{"class": "h100"}), metadata={"run": zone, "k": "v"}, lease=60
    )
    model = rm.requests.create(ALICE, spec)
    stamped = model.model_copy(
        update={"renewed_at": datetime(2030, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)}
    )
    by_sqlalchemy, by_driver = uuid.uuid4(), uuid.uuid4()
    with rm._db.engine.begin() as conn:
        row, children = _rows(by_sqlalchemy, stamped)
        conn.execute(t.requests.insert(), [row])
        conn.execute(t.subjects.insert(), children.subjects)
        conn.execute(t.request_metadata.insert(), children.metadata)
        row, children = _rows(by_driver, stamped)
        # One statement for all three tables on PostgreSQL (COPY per table with "copy").
        insert_tables(
            conn,
            [
                (t.requests, [row]),
                (t.subjects, children.subjects),
                (t.request_metadata, children.metadata),
            ],
        )
    with rm._db.engine.connect() as conn:
        loaded = request_store.load(conn, [by_sqlalchemy, by_driver])
        raw = {
            r.id: {k: v for k, v in r._mapping.items() if k != "id"}
            for r in conn.execute(sa.select(t.requests).where(t.requests.c.seq == 7))
        }
    one, other = loaded[by_sqlalchemy].request, loaded[by_driver].request
    assert other.renewed_at == stamped.renewed_at  # microseconds and UTC kept
    assert other.metadata["run"] == zone
    assert other.allocations[0].target_settings == {"node": {"zone": zone}}
    assert one.model_dump(exclude={"id", "allocations"}) == other.model_dump(
        exclude={"id", "allocations"}
    )
    assert [a.model_dump(exclude={"id", "request_id"}) for a in one.allocations] == [
        a.model_dump(exclude={"id", "request_id"}) for a in other.allocations
    ]
    # Column for column, as stored (allocation ids differ by design).
    for stored in raw.values():
        stored["allocations"] = [{**a, "id": None} for a in stored["allocations"]]
    assert raw[by_sqlalchemy] == raw[by_driver]


def test_rows_beyond_one_statement_are_split_into_chunks(
    rm: ResourceManagerService, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 7 parameters per subject row: 20 per statement at most, so 45 rows take 3 statements.
    monkeypatch.setattr(bulk_insert, "MAX_PARAMETERS", 140)
    setup_pool(rm, gpus_total=4)
    model = rm.requests.create(ALICE, request_spec(gpus(1), lease=60))
    rows = [
        {**codec.subject_rows(model)[0], "chain": chain, "position": 0} for chain in range(1, 46)
    ]
    with rm._db.engine.begin() as conn:
        insert_many(conn, t.subjects, rows)
    with rm._db.engine.connect() as conn:
        chains = conn.execute(
            sa.select(t.subjects.c.chain).where(
                t.subjects.c.request_id == model.id, t.subjects.c.chain > 0
            )
        ).scalars()
        assert sorted(chains) == list(range(1, 46))


def _held_and_orphan(rm: ResourceManagerService) -> tuple[Any, dict[str, object]]:
    """An allocated request, and a subject row of it that points at no request."""
    setup_pool(rm, gpus_total=4)
    model = rm.requests.create(ALICE, request_spec(gpus(1), lease=60))
    return model, {**codec.subject_rows(model)[0], "request_id": uuid.uuid4()}


@pytest.mark.usefixtures("copy_from")
def test_a_rejected_bulk_insert_maps_to_the_same_error_everywhere(
    rm: ResourceManagerService,
) -> None:
    # On PostgreSQL the rows go through COPY, outside SQLAlchemy's execute: its driver errors
    # must still reach callers as the store's errors, as any statement's would.
    model, orphan = _held_and_orphan(rm)
    duplicate = codec.subject_rows(model)[0]
    with pytest.raises(errors.ForeignKeyViolationError):
        rm._db.write(lambda conn: insert_many(conn, t.subjects, [orphan]))
    with pytest.raises(errors.UniqueViolationError):
        rm._db.write(lambda conn: insert_many(conn, t.subjects, [duplicate]))
    # Several tables at once (one statement on PostgreSQL): a bad row fails all of them.
    fresh = uuid.uuid4()
    row, children = _rows(fresh, model)
    groups = [(t.requests, [row]), (t.request_metadata, children.metadata), (t.subjects, [orphan])]
    with pytest.raises(errors.ForeignKeyViolationError):
        rm._db.write(lambda conn: insert_tables(conn, groups))
    assert rm.requests.get(model.id).status.value == "allocated"  # nothing half-applied
    with rm._db.engine.connect() as conn:
        assert request_store.load(conn, [fresh]) == {}


@pytest.mark.usefixtures("copy_from")
def test_rows_inserted_later_are_inserted_with_the_commit_or_not_at_all(
    rm: ResourceManagerService,
) -> None:
    # ``later``: on PostgreSQL the one statement for all tables is handed back, to go with the
    # commit (``commit_with``); everywhere else, and through COPY, the rows are inserted at once.
    model, orphan = _held_and_orphan(rm)

    def insert(request_id: uuid.UUID, *extra: dict[str, object]) -> None:
        row, children = _rows(request_id, model)
        groups = [
            (t.requests, [row]),
            (t.subjects, [*children.subjects, *extra]),
            (t.request_metadata, children.metadata),
        ]

        def run(conn: sa.Connection) -> None:
            later = insert_tables(conn, groups, later=True)
            one_statement = direct.pipelines(conn) and bulk_insert.COPY_FROM_ROWS > 1
            assert len(later) == (1 if one_statement else 0)
            commit_with(conn, later)

        rm._db.write(run)

    kept, failed = uuid.uuid4(), uuid.uuid4()
    insert(kept)
    with pytest.raises(errors.ForeignKeyViolationError):
        insert(failed, orphan)
    with rm._db.engine.connect() as conn:
        assert set(request_store.load(conn, [kept, failed])) == {kept}
        assert request_store.load(conn, [kept])[kept].request.subjects == model.subjects
