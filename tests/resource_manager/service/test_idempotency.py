"""Idempotency keys: a retried call returns the first result and never applies twice."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.resource_manager.service.helpers import (
    ADMIN,
    ALICE,
    BOB,
    gpus,
    one_batch,
    pool_spec,
    request_count,
    request_spec,
    setup_pool,
)
from wharf.core.enums import ResourceRequestRuntimeState as RS
from wharf.core.enums import ResourceRequestStatus as S
from wharf.core.errors import IllegalOperationError, InputError
from wharf.resource_manager.service import ResourceManagerService, idempotency
from wharf.resource_manager.service.idempotency import IdempotencyKey


def test_a_retried_create_returns_the_first_request(rm: ResourceManagerService) -> None:
    setup_pool(rm)
    first = rm.requests.create(ALICE, request_spec(gpus(1)), idempotency_key="k1")
    again = rm.requests.create(ALICE, request_spec(gpus(1)), idempotency_key="k1")
    assert again == first
    assert request_count(rm) == 1
    other = rm.requests.create(ALICE, request_spec(gpus(1)), idempotency_key="k2")
    assert other.id != first.id and request_count(rm) == 2


def test_keys_are_scoped_by_caller_and_operation(rm: ResourceManagerService) -> None:
    setup_pool(rm)
    mine = rm.requests.create(ALICE, request_spec(gpus(1)), idempotency_key="same")
    theirs = rm.requests.create(BOB, request_spec(gpus(1)), idempotency_key="same")
    assert mine.id != theirs.id
    released = rm.requests.release(ALICE, mine.id, idempotency_key="same")
    assert released.status is S.RELEASED


def test_a_key_reused_with_other_arguments_is_refused(rm: ResourceManagerService) -> None:
    setup_pool(rm)
    rm.requests.create(ALICE, request_spec(gpus(1)), idempotency_key="k")
    with pytest.raises(IllegalOperationError, match="Idempotency key 'k' was already used"):
        rm.requests.create(ALICE, request_spec(gpus(2)), idempotency_key="k")
    assert request_count(rm) == 1


def test_concurrent_retries_create_one_request(rm: ResourceManagerService) -> None:
    setup_pool(rm)
    with ThreadPoolExecutor(8) as pool:
        results = list(
            pool.map(
                lambda _: rm.requests.create(ALICE, request_spec(gpus(1)), idempotency_key="burst"),
                range(16),
            )
        )
    assert len({r.id for r in results}) == 1
    assert request_count(rm) == 1


def test_renew_release_and_configuration_replays(rm: ResourceManagerService) -> None:
    setup_pool(rm)
    held = rm.requests.create(ALICE, request_spec(gpus(1)))
    renewed = rm.requests.renew(ALICE, held.id, 30, RS.RUNNING, idempotency_key="r")
    assert rm.requests.renew(ALICE, held.id, 30, RS.RUNNING, idempotency_key="r") == renewed
    released = rm.requests.release(ALICE, held.id, idempotency_key="rel")
    assert rm.requests.release(ALICE, held.id, idempotency_key="rel") == released

    pool = rm.pools.create(ADMIN, pool_spec("extra"), idempotency_key="p")
    assert rm.pools.create(ADMIN, pool_spec("extra"), idempotency_key="p") == pool
    rm.pools.delete(ADMIN, "extra", idempotency_key="d")
    rm.pools.delete(ADMIN, "extra", idempotency_key="d")  # a replay, not "not found"


def test_a_failed_call_stores_nothing(rm: ResourceManagerService) -> None:
    setup_pool(rm)
    with pytest.raises(InputError):
        rm.requests.create(
            ALICE,
            request_spec({"resource": "GPU", "quantity": 1, "unit": "kg"}),
            idempotency_key="x",
        )
    created = rm.requests.create(
        ALICE,
        request_spec({"resource": "GPU", "quantity": 1, "unit": "kg"}).model_copy(
            update={"demands": request_spec(gpus(1)).demands}
        ),
        idempotency_key="y",
    )
    assert created.status is S.ALLOCATED


def test_key_length_is_checked(rm: ResourceManagerService) -> None:
    with pytest.raises(InputError, match="idempotency key"):
        rm.requests.create(ALICE, request_spec(gpus(1)), idempotency_key="")
    with pytest.raises(InputError, match="idempotency key"):
        rm.requests.create(ALICE, request_spec(gpus(1)), idempotency_key="k" * 256)


def test_one_batch_replays_runs_and_refuses_by_key(rm: ResourceManagerService) -> None:
    # The keys of a batch are looked up with one query: each operation must still get its own
    # outcome (replayed, run, or refused) and a refusal must not affect its neighbours.
    setup_pool(rm)
    first = rm.requests.create(ALICE, request_spec(gpus(1)), idempotency_key="old")
    service = rm.requests
    operations = [
        service._creation(ALICE, request_spec(gpus(1)), "old"),  # replay
        service._creation(ALICE, request_spec(gpus(1)), "new"),  # runs
        service._creation(ALICE, request_spec(gpus(2)), "old"),  # other arguments: refused
        service._creation(BOB, request_spec(gpus(1)), "old"),  # another caller's scope: runs
        service._creation(ALICE, request_spec(gpus(1)), "new"),  # same batch: shares "new"
    ]
    slots = one_batch(service._runner, operations)
    assert slots[0].result() == first
    created = slots[1].result()
    assert created.id != first.id and created.status is S.ALLOCATED
    with pytest.raises(IllegalOperationError, match="Idempotency key 'old' was already used"):
        slots[2].result()
    assert slots[3].result().requester == BOB.name
    assert slots[4].result() == created
    assert request_count(rm) == 3
    again = rm.requests.create(ALICE, request_spec(gpus(1)), idempotency_key="new")
    assert again == created


def test_the_batched_lookup_searches_the_primary_key(rm: ResourceManagerService) -> None:
    # A row-value IN made SQLite scan the whole key table on every batch. (PostgreSQL's choice
    # depends on statistics; the OR of whole-key equalities keeps it on the index, see
    # idempotency._lookup_statement, but a plan assertion there would be fragile.)
    setup_pool(rm)
    for index in range(40):
        rm.requests.create(ALICE, request_spec(gpus(1)), idempotency_key=f"k{index}")
    keys = [
        key
        for index in (3, 5, 99)
        if (key := IdempotencyKey.of(ALICE.name, "requests.create", f"k{index}", {})) is not None
    ]
    with rm._db.engine.connect() as conn:
        found = idempotency.lookup_many(conn, keys)
        assert {scope[2] for scope in found} == {"k3", "k5"}
        if conn.dialect.name != "sqlite":
            return
        compiled = idempotency._lookup_statement(len(keys)).compile(conn)
        values = {}
        for index, key in enumerate(keys):
            values[f"i_p{index}"], values[f"i_o{index}"] = key.principal, key.operation
            values[f"i_k{index}"] = key.key
        params = tuple(values[name] for name in compiled.positiontup or ())
        rows = conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {compiled}", params).all()
        plan = " ".join(str(row[-1]) for row in rows)
        assert "SEARCH rm_idempotency_keys" in plan
        assert "SCAN rm_idempotency_keys" not in plan
