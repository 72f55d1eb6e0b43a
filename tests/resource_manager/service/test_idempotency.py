"""Idempotency keys: a retried call returns the first result and never applies twice."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.resource_manager.service.helpers import (
    ADMIN,
    ALICE,
    BOB,
    gpus,
    pool_spec,
    request_count,
    request_spec,
    setup_pool,
)
from wharf.core.enums import ResourceRequestRuntimeState as RS
from wharf.core.enums import ResourceRequestStatus as S
from wharf.core.errors import IllegalOperationError, InputError
from wharf.resource_manager.service import ResourceManagerService


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
