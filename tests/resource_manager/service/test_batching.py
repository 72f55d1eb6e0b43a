"""Batched scheduling transactions and per-process caches kept in sync through the database."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from uuid import UUID

import pytest
import sqlalchemy as sa

from tests.resource_manager.service.helpers import (
    ADMIN,
    ALICE,
    BOB,
    allocation_count,
    gpus,
    klass,
    one_batch,
    request_count,
    request_spec,
    setup_pool,
)
from wharf.core.enums import ResourceRequestStatus as S
from wharf.core.errors import InputError
from wharf.resource_manager.contract.errors import PermissionDeniedError
from wharf.resource_manager.contract.models import PoolUpdate
from wharf.resource_manager.service import ResourceManagerService, leader
from wharf.resource_manager.service.state import SchedulingCache


def test_concurrent_callers_never_over_allocate(rm: ResourceManagerService) -> None:
    setup_pool(rm, gpus_total=5)
    with ThreadPoolExecutor(8) as pool:
        created = list(
            pool.map(
                lambda i: rm.requests.create(ALICE, request_spec(gpus(1), step=f"s{i}")), range(24)
            )
        )
    assert sum(r.status is S.ALLOCATED for r in created) == 5
    assert sum(r.status is S.PENDING for r in created) == 19
    assert request_count(rm) == 24


def test_a_failing_operation_does_not_fail_its_batch(rm: ResourceManagerService) -> None:
    setup_pool(rm, gpus_total=50)
    good = request_spec(gpus(1))
    bad = request_spec({"resource": "GPU", "quantity": 1, "unit": "bogus"})

    def call(i: int) -> object:
        try:
            if i % 3 == 0:
                return rm.requests.create(ALICE, bad)
            if i % 3 == 1:
                return rm.pools.create(
                    ALICE, {"name": f"p{i}", "classes": [{"name": "c", "capacity": {"GPU": 1}}]}
                )
            return rm.requests.create(ALICE, good)
        except (InputError, PermissionDeniedError) as error:
            return error

    with ThreadPoolExecutor(6) as pool:
        results = list(pool.map(call, range(30)))
    assert all(isinstance(r, InputError) for r in results[0::3])
    assert all(isinstance(r, PermissionDeniedError) for r in results[1::3])
    assert all(getattr(r, "status", None) is S.ALLOCATED for r in results[2::3])
    assert request_count(rm) == 10


def test_processes_see_each_others_changes(
    open_rm: Callable[..., ResourceManagerService],
) -> None:
    one, two = open_rm(), open_rm()
    setup_pool(one, gpus_total=2)
    a = one.requests.create(ALICE, request_spec(gpus(2)))
    waiting = two.requests.create(BOB, request_spec(gpus(1)))  # two's cache learns of a
    assert waiting.status is S.PENDING
    one.requests.release(ALICE, a.id)  # one schedules: admits two's request
    assert two.requests.get(waiting.id).status is S.ALLOCATED
    b = two.requests.create(BOB, request_spec(gpus(1)))
    assert b.status is S.ALLOCATED
    c = one.requests.create(ALICE, request_spec(gpus(1)))
    assert c.status is S.PENDING  # one saw two's admissions, no over-allocation

    two.pools.update(ADMIN, "gpus", PoolUpdate(classes=(klass("h100", GPU=3),)))
    assert one.requests.get(c.id).status is S.ALLOCATED
    d = one.requests.create(ALICE, request_spec(gpus(1)))
    assert d.status is S.PENDING  # one reloaded the configuration: 3 GPUs, all held


def _pending_matches(rm: ResourceManagerService) -> bool:
    """The cache's pending and holding requests are exactly its requests in those statuses."""
    view = rm._runner.cache.view
    split = {**view.pending, **view.holding}
    return (
        view.pending.keys() == {k for k, r in view.requests.items() if r.status is S.PENDING}
        and split.keys() == view.requests.keys()
        and all(split[key] is request for key, request in view.requests.items())
    )


def test_the_cache_knows_which_requests_wait(
    open_rm: Callable[..., ResourceManagerService],
) -> None:
    """The cache keeps its requests split into pending and holding (a scan of every live
    request cost most of a transaction with thousands live): the split follows creations,
    admissions, releases and cancellations, in this process and from another."""
    one, two = open_rm(), open_rm()
    setup_pool(one, gpus_total=2)
    held = one.requests.create(ALICE, request_spec(gpus(2)))
    waiting = [two.requests.create(BOB, request_spec(gpus(1))) for _ in range(3)]
    assert one.requests.get(waiting[0].id).status is S.PENDING
    assert _pending_matches(one) and _pending_matches(two)
    assert len(two._runner.cache.view.pending) == 3
    two.requests.cancel(BOB, waiting[2].id)
    one.requests.release(ALICE, held.id)  # one learns of the waiters, then admits two of them
    assert _pending_matches(one) and not one._runner.cache.view.pending
    two.requests.create(BOB, request_spec(gpus(1)))  # two catches up with one's admissions
    assert _pending_matches(two) and len(two._runner.cache.view.pending) == 1


def test_a_stale_cache_is_detected_and_reloaded(rm: ResourceManagerService) -> None:
    setup_pool(rm, gpus_total=1)
    held = rm.requests.create(ALICE, request_spec(gpus(1)))
    # Corrupt this process's cache behind its back: it believes the request is pending.
    runner = rm._runner
    view = runner.cache.view
    corrupt = view.requests[held.id].model_copy(update={"status": S.PENDING, "allocations": ()})
    runner.cache.view = dataclasses.replace(view, requests={**view.requests, held.id: corrupt})
    other = rm.requests.create(BOB, request_spec(gpus(1)))
    assert other.status is S.PENDING  # the compare-and-set failed, the batch reran on fresh state
    assert rm.requests.get(held.id).status is S.ALLOCATED
    assert allocation_count(rm) == 1  # held was not admitted a second time


def _believes_still_held(
    rm: ResourceManagerService, released: UUID, holder: UUID, monkeypatch: pytest.MonkeyPatch
) -> list[bool]:
    """Corrupt the scheduling cache: it believes ``released`` still holds what ``holder``
    holds. Returns the list that records every invalidation of the cache from now on."""
    runner = rm._runner
    view = runner.cache.view
    stale = view.requests[holder].model_copy(update={"id": released})
    runner.cache.view = dataclasses.replace(
        view,
        requests={**view.requests, released: stale},
        requesters={**view.requesters, released: ALICE.name},
    )
    invalidated: list[bool] = []
    invalidate = SchedulingCache.invalidate
    monkeypatch.setattr(
        SchedulingCache, "invalidate", lambda cache: (invalidated.append(True), invalidate(cache))
    )
    return invalidated


def test_releases_of_one_batch_are_compare_and_set_together(
    rm: ResourceManagerService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Releases that end alike are one write by id list: when the cache is wrong about one of
    them, the batch is detected stale, rerun on fresh state, and every release still lands."""
    setup_pool(rm, gpus_total=3)
    held = [rm.requests.create(ALICE, request_spec(gpus(1), step=f"s{i}")) for i in range(3)]
    assert all(info.status is S.ALLOCATED for info in held)
    rm.requests.release(ALICE, held[0].id)
    invalidated = _believes_still_held(rm, held[0].id, held[1].id, monkeypatch)
    slots = one_batch(
        rm._runner, [rm.requests._release(ALICE, info.id, None, None, False) for info in held]
    )
    assert invalidated == [True]  # the write by id list matched 2 rows of 3: stale
    assert [slot.result().status for slot in slots] == [S.RELEASED] * 3
    assert allocation_count(rm) == 3  # history kept; nothing admitted twice
    assert rm.requests.create(BOB, request_spec(gpus(3))).status is S.ALLOCATED


def test_a_lone_release_is_compare_and_set_too(
    rm: ResourceManagerService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A release alone in its batch is written by its id (not an id list): a cache that is
    wrong about it is detected all the same, and the release lands on fresh state."""
    setup_pool(rm, gpus_total=2)
    held = [rm.requests.create(ALICE, request_spec(gpus(1), step=f"s{i}")) for i in range(2)]
    rm.requests.release(ALICE, held[0].id)
    invalidated = _believes_still_held(rm, held[0].id, held[1].id, monkeypatch)
    (slot,) = one_batch(rm._runner, [rm.requests._release(ALICE, held[0].id, None, None, False)])
    assert invalidated == [True]  # the write by id matched no row: stale
    assert slot.result().status is S.RELEASED  # released before: returned unchanged
    assert rm.requests.release(ALICE, held[1].id).status is S.RELEASED
    assert rm.requests.create(BOB, request_spec(gpus(2))).status is S.ALLOCATED


@pytest.mark.parametrize("max_batch", [1, 3])
def test_small_batches_still_serve_every_caller(
    open_rm: Callable[..., ResourceManagerService], max_batch: int
) -> None:
    rm = open_rm(max_batch=max_batch)
    setup_pool(rm, gpus_total=100)
    with ThreadPoolExecutor(6) as pool:
        created = list(
            pool.map(lambda _: rm.requests.create(ALICE, request_spec(gpus(1))), range(20))
        )
    assert all(r.status is S.ALLOCATED for r in created)


def test_creations_into_a_deep_queue_walk_on_from_the_last_cycle(
    open_rm: Callable[..., ResourceManagerService],
) -> None:
    """A creation behind every waiting request continues the last cycle's walk (no walk of the
    whole queue); every request ends as a full cycle would have it, and anything else since
    that cycle (another process's creation, a release) makes the next cycle full again."""
    one, two = open_rm(), open_rm()
    setup_pool(one, gpus_total=1)
    held = one.requests.create(ALICE, request_spec(gpus(1)))
    head = one.requests.create(ALICE, request_spec(gpus(1)))
    walk = one._runner.cache.walk
    assert walk is not None, "a cycle that admitted nothing can be walked on"
    behind = [one.requests.create(ALICE, request_spec(gpus(1))) for _ in range(3)]
    assert one._runner.cache.walk is walk, "the same walk, continued"
    assert [r.status for r in behind] == [S.PENDING] * 3
    queue = one.pools.queue("gpus")  # a fresh, read-only cycle over the committed state
    assert [entry.request.id for entry in queue] == [head.id, *(r.id for r in behind)]
    for entry in queue:
        assert one.requests.get(entry.request.id).status_reason == entry.reason
    other = two.requests.create(BOB, request_spec(gpus(1)))
    last = one.requests.create(ALICE, request_spec(gpus(1)))  # catches up: a full cycle
    assert one._runner.cache.walk is not walk
    queue = one.pools.queue("gpus")
    assert [entry.request.id for entry in queue][-2:] == [other.id, last.id]
    assert one.requests.get(last.id).status_reason == queue[-1].reason
    one.requests.release(ALICE, held.id)
    assert one._runner.cache.walk is None, "that cycle admitted the head"
    assert one.requests.get(head.id).status is S.ALLOCATED
    assert [one.requests.get(r.id).status for r in behind] == [S.PENDING] * 3


def _stored_version(rm: ResourceManagerService) -> int:
    return rm._db.read(lambda conn: leader.read(conn).state_version)


def test_a_process_knows_the_state_versions_it_wrote(
    open_rm: Callable[..., ResourceManagerService],
) -> None:
    """What the wait room's marker relies on: a version this process wrote reads as its own,
    another process's does not, and the marker changes only with the other's commits."""
    one, two = open_rm(), open_rm()
    setup_pool(one, gpus_total=4)
    one.requests.create(ALICE, request_spec(gpus(1)))
    mine = _stored_version(one)
    assert one._runner.produced(mine) and not two._runner.produced(mine)
    marker = one.requests.unannounced_marker()
    one.requests.create(ALICE, request_spec(gpus(1)))
    assert one.requests.unannounced_marker() == marker  # its own commit: announced
    two.requests.create(BOB, request_spec(gpus(1)))
    theirs = _stored_version(one)
    assert two._runner.produced(theirs) and not one._runner.produced(theirs)
    assert one.requests.unannounced_marker() != marker


def test_a_version_that_never_committed_is_not_kept(rm: ResourceManagerService) -> None:
    setup_pool(rm, gpus_total=4)
    rm.requests.create(ALICE, request_spec(gpus(1)))
    before = _stored_version(rm)

    def failing_commit(_conn: object) -> None:
        raise InputError("the commit failed")

    sa.event.listen(rm._db.engine, "commit", failing_commit)
    try:
        with pytest.raises(InputError, match="the commit failed"):
            rm.requests.create(ALICE, request_spec(gpus(1)))
    finally:
        sa.event.remove(rm._db.engine, "commit", failing_commit)
    assert _stored_version(rm) == before
    # Another writer could commit that number next: it must not read as this process's.
    assert not rm._runner.produced(before + 1)
    rm.requests.create(ALICE, request_spec(gpus(1)))
    assert _stored_version(rm) == before + 1 and rm._runner.produced(before + 1)
