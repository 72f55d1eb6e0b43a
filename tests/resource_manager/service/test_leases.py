"""Leases on the server's (fake) clock: lapses, renewals, never early, restart grace."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta

import pytest

from tests.conftest import FakeClock
from tests.resource_manager.service.helpers import (
    ADMIN,
    ALICE,
    BOB,
    gpus,
    klass,
    policy_spec,
    pool_spec,
    request_spec,
    setup_pool,
)
from wharf.core.enums import ResourceRequestRuntimeState as RS
from wharf.core.enums import ResourceRequestStatus as S
from wharf.resource_manager.domain import (
    ALLOCATION_WAIT_TIMED_OUT,
    LEASE_EXPIRED,
    LEASE_EXPIRED_WHILE_PENDING,
)
from wharf.resource_manager.service import ResourceManagerService


def test_a_pending_lease_lapses_into_cancelled(
    rm: ResourceManagerService, clock: FakeClock
) -> None:
    setup_pool(rm, gpus_total=1)
    rm.requests.create(ALICE, request_spec(gpus(1), lease=600))
    waiting = rm.requests.create(ALICE, request_spec(gpus(1), lease=10))
    clock.advance(11)
    rm.sweep()
    lapsed = rm.requests.get(waiting.id)
    assert (lapsed.status, lapsed.status_reason) == (S.CANCELLED, LEASE_EXPIRED_WHILE_PENDING)


def test_an_allocated_lease_lapses_into_expired_and_frees_capacity(
    rm: ResourceManagerService, clock: FakeClock
) -> None:
    setup_pool(rm, gpus_total=1)
    held = rm.requests.create(ALICE, request_spec(gpus(1), lease=10))
    waiting = rm.requests.create(BOB, request_spec(gpus(1), lease=600))
    clock.advance(11)
    rm.sweep()
    expired = rm.requests.get(held.id)
    assert (expired.status, expired.status_reason) == (S.EXPIRED, LEASE_EXPIRED)
    assert expired.released_at is not None
    assert rm.requests.get(waiting.id).status is S.ALLOCATED  # in the same cycle


def test_a_preempting_lease_lapses_into_expired(
    rm: ResourceManagerService, clock: FakeClock
) -> None:
    rm.pools.create(ADMIN, pool_spec("gpus", klass("h100", GPU=1, reclaimable="coordinated")))
    rm.policies.create(ADMIN, policy_spec("low"))
    rm.policies.create(ADMIN, policy_spec("high", priority=5))
    low = rm.requests.create(
        ALICE, request_spec(gpus(1), project="low", lease=10, reclaim_tolerance="any")
    )
    high = rm.requests.create(
        BOB, request_spec(gpus(1), project="high", lease=600, reclaim_tolerance="any")
    )
    assert rm.requests.get(low.id).status is S.PREEMPTING
    clock.advance(11)
    rm.sweep()
    assert rm.requests.get(low.id).status is S.EXPIRED
    assert rm.requests.get(high.id).status is S.ALLOCATED


def test_a_lease_never_lapses_before_its_deadline(
    rm: ResourceManagerService, clock: FakeClock
) -> None:
    setup_pool(rm)
    held = rm.requests.create(ALICE, request_spec(gpus(1), lease=10))
    deadline = held.lease_expires_at
    assert deadline is not None
    clock.now = deadline - 2 * clock.tick  # the sweep reads deadline - 1 ms
    rm.sweep()
    assert rm.requests.get(held.id).status is S.ALLOCATED
    clock.now = deadline - clock.tick  # the sweep reads exactly the deadline
    rm.sweep()
    assert rm.requests.get(held.id).status is S.EXPIRED


def test_renewal_extends_the_lease_and_records_the_runtime_state(
    rm: ResourceManagerService, clock: FakeClock
) -> None:
    setup_pool(rm)
    held = rm.requests.create(ALICE, request_spec(gpus(1), lease=10))
    clock.advance(5)
    renewed = rm.requests.renew(ALICE, held.id, 30, RS.RUNNING)
    assert renewed.runtime_state is RS.RUNNING
    assert renewed.renewed_at is not None
    assert renewed.lease_expires_at == renewed.renewed_at + timedelta(seconds=30)
    assert rm.requests.get(held.id) == renewed  # the answer is what was stored
    clock.advance(20)  # past the first lease, within the renewed one
    rm.sweep()
    assert rm.requests.get(held.id).status is S.ALLOCATED
    shorter = rm.requests.renew(ALICE, held.id, 1)  # the holder chooses its lease
    assert shorter.runtime_state is RS.RUNNING  # kept when not given
    clock.advance(2)
    rm.sweep()
    assert rm.requests.get(held.id).status is S.EXPIRED


def test_renewing_a_terminal_request_returns_it_unchanged(
    rm: ResourceManagerService, clock: FakeClock
) -> None:
    setup_pool(rm)
    held = rm.requests.create(ALICE, request_spec(gpus(1)))
    released = rm.requests.release(ALICE, held.id)
    clock.advance(1)
    assert rm.requests.renew(ALICE, held.id, 30, RS.RUNNING) == released


def test_a_lapsed_lease_is_not_revived_by_a_late_renewal(
    rm: ResourceManagerService, clock: FakeClock
) -> None:
    setup_pool(rm)
    held = rm.requests.create(ALICE, request_spec(gpus(1), lease=10))
    clock.advance(11)  # lapsed, but no cycle ran yet
    late = rm.requests.renew(ALICE, held.id, 30)
    assert (late.status, late.status_reason) == (S.EXPIRED, LEASE_EXPIRED)
    assert late.lease_expires_at == held.lease_expires_at


def test_a_request_that_ends_keeps_no_runtime_state_and_no_lease_past_its_end(
    rm: ResourceManagerService, clock: FakeClock
) -> None:
    """A released or cancelled request said 'running' with a lease still minutes ahead."""
    setup_pool(rm, gpus_total=2)
    held = rm.requests.create(ALICE, request_spec(gpus(1), lease=600))
    lapsing = rm.requests.create(ALICE, request_spec(gpus(1), lease=10))
    waiting = rm.requests.create(ALICE, request_spec(gpus(1), lease=600))
    for request, lease in ((held, 600), (lapsing, 10), (waiting, 600)):
        assert rm.requests.renew(ALICE, request.id, lease, RS.RUNNING).runtime_state is RS.RUNNING
    start = clock.advance(2)
    cancelled = rm.requests.cancel(ALICE, waiting.id)
    released = rm.requests.release(ALICE, held.id)
    assert (released.status, cancelled.status) == (S.RELEASED, S.CANCELLED)
    assert released.lease_expires_at == released.released_at
    for ended in (released, cancelled):
        assert ended.runtime_state is RS.UNKNOWN
        assert ended.lease_expires_at is not None
        assert start < ended.lease_expires_at <= clock.now  # when it ended
        assert rm.requests.get(ended.id) == ended  # the answer is what was stored
    deadline = rm.requests.get(lapsing.id).lease_expires_at
    clock.advance(20)
    rm.sweep()
    expired = rm.requests.get(lapsing.id)
    assert (expired.status, expired.runtime_state) == (S.EXPIRED, RS.UNKNOWN)
    assert expired.lease_expires_at == deadline  # when it lapsed
    start = clock.now
    too_big = rm.requests.create(ALICE, request_spec(gpus(3), lease=600))
    assert (too_big.status, too_big.runtime_state) == (S.REJECTED, RS.UNKNOWN)
    assert too_big.lease_expires_at is not None
    assert start < too_big.lease_expires_at <= clock.now
    assert rm.requests.get(too_big.id) == too_big


def test_allocation_wait_timeout(rm: ResourceManagerService, clock: FakeClock) -> None:
    setup_pool(rm, gpus_total=1)
    rm.requests.create(ALICE, request_spec(gpus(1), lease=600))
    waiting = rm.requests.create(
        ALICE, request_spec(gpus(1), lease=600, allocation_wait_timeout_seconds=5)
    )
    clock.advance(4)
    rm.sweep()
    assert rm.requests.get(waiting.id).status is S.PENDING
    clock.advance(2)
    rm.sweep()
    timed_out = rm.requests.get(waiting.id)
    assert (timed_out.status, timed_out.status_reason) == (S.EXPIRED, ALLOCATION_WAIT_TIMED_OUT)


def test_renewing_a_pending_request_runs_a_lazy_cycle(
    rm: ResourceManagerService, clock: FakeClock
) -> None:
    setup_pool(rm, gpus_total=1)
    held = rm.requests.create(ALICE, request_spec(gpus(1), lease=10))
    waiting = rm.requests.create(BOB, request_spec(gpus(1), lease=600))
    clock.advance(11)  # the holder died; no timer runs sweeps
    polled = rm.requests.renew(BOB, waiting.id, 600)
    assert polled.status is S.ALLOCATED
    assert rm.requests.get(held.id).status is S.EXPIRED


def test_after_a_restart_leases_get_the_downtime_and_one_sweep_interval_at_least(
    open_rm: Callable[..., ResourceManagerService], clock: FakeClock
) -> None:
    before = open_rm()
    setup_pool(before)
    short = before.requests.create(ALICE, request_spec(gpus(1), lease=10))
    long = before.requests.create(ALICE, request_spec(gpus(1), lease=3600))
    before.close()
    clock.advance(100)  # the RM was down; nobody could renew

    after = open_rm(sweep_interval=timedelta(seconds=30))
    after.sweep()  # a takeover: extend, expire nothing
    kept = after.requests.get(short.id)
    assert kept.status is S.ALLOCATED
    assert kept.lease_expires_at is not None
    assert kept.lease_expires_at - after.now() > timedelta(seconds=29)
    assert long.lease_expires_at is not None  # the downtime on top of every live lease
    extended = after.requests.get(long.id).lease_expires_at
    assert extended is not None
    assert timedelta(seconds=100) <= extended - long.lease_expires_at < timedelta(seconds=101)

    clock.advance(31)
    after.sweep()
    assert after.requests.get(short.id).status is S.EXPIRED
    assert after.requests.get(long.id).status is S.ALLOCATED


def test_a_takeover_is_news_only_when_it_extended_a_lease(
    open_rm: Callable[..., ResourceManagerService],
    clock: FakeClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An embedded RM starts with each script: after idle time with nothing held, its
    takeover is a debug line, not an INFO line the user sees before every run."""
    idle = open_rm()
    setup_pool(idle)
    idle.close()
    clock.advance(900)
    with caplog.at_level(logging.INFO, logger="wharf.resource_manager"):
        open_rm().sweep()
    assert not [r for r in caplog.records if "Taking over" in r.message]

    holding = open_rm()
    holding.requests.create(ALICE, request_spec(gpus(1), lease=3600))
    holding.close()
    clock.advance(900)
    with caplog.at_level(logging.INFO, logger="wharf.resource_manager"):
        open_rm().sweep()
    assert [r.message for r in caplog.records if "Taking over" in r.message] == [
        "Taking over: no Resource Manager served for 900.0 s; 1 live lease(s) extended."
    ]


LIVENESS = timedelta(seconds=2)


def test_a_served_rm_restarted_after_a_lease_but_within_its_sweep_interval_keeps_holders(
    open_rm: Callable[..., ResourceManagerService], clock: FakeClock
) -> None:
    """Killed and back 15 s later: a 10 s lease is not expired, it gets the 15 s on top."""
    before = open_rm(liveness_interval=LIVENESS)
    setup_pool(before, gpus_total=1)
    held = before.requests.create(ALICE, request_spec(gpus(1), lease=10))
    waiting = before.requests.create(BOB, request_spec(gpus(1), lease=600))
    before.beat()
    clock.advance(15)  # killed: no beat, nobody renews

    after = open_rm(liveness_interval=LIVENESS)
    after.beat()  # what the API server does before serving
    kept = after.requests.get(held.id)
    assert kept.status is S.ALLOCATED
    assert held.lease_expires_at is not None and kept.lease_expires_at is not None
    assert kept.lease_expires_at - held.lease_expires_at >= timedelta(seconds=15)
    assert after.requests.get(waiting.id).status is S.PENDING
    assert after.requests.renew(ALICE, held.id, 10).status is S.ALLOCATED


def test_a_database_outage_does_not_count_against_holders(
    open_rm: Callable[..., ResourceManagerService], clock: FakeClock
) -> None:
    """The same process, no transaction for over three liveness intervals (the database was
    away): the gap is added to live leases before anything expires."""
    rm = open_rm(liveness_interval=LIVENESS)
    setup_pool(rm, gpus_total=1)
    held = rm.requests.create(ALICE, request_spec(gpus(1), lease=10))
    rm.beat()
    clock.advance(60)
    rm.beat()
    assert rm.requests.get(held.id).status is S.ALLOCATED
    assert rm.requests.renew(ALICE, held.id, 10).status is S.ALLOCATED


def test_a_lease_that_lapsed_while_an_rm_served_is_not_revived(
    open_rm: Callable[..., ResourceManagerService], clock: FakeClock
) -> None:
    rm = open_rm(liveness_interval=LIVENESS)
    setup_pool(rm, gpus_total=1)
    held = rm.requests.create(ALICE, request_spec(gpus(1), lease=3))
    for _ in range(3):  # served (beating) past the lease without a sweep
        clock.advance(1.5)
        rm.beat()
    clock.advance(60)  # then down
    after = open_rm(liveness_interval=LIVENESS)
    after.beat()
    expired = after.requests.get(held.id)
    assert (expired.status, expired.status_reason) == (S.EXPIRED, LEASE_EXPIRED)


def test_a_served_rm_beating_alone_is_never_taken_for_down(
    open_rm: Callable[..., ResourceManagerService], clock: FakeClock
) -> None:
    """A live instance beating every interval: a dead holder's lease lapses on time, replicas
    starting meanwhile (one restarted in a loop) giving it nothing."""
    rm = open_rm(liveness_interval=LIVENESS)
    setup_pool(rm, gpus_total=1)
    held = rm.requests.create(ALICE, request_spec(gpus(1), lease=10))
    beats = 0
    while rm.requests.get(held.id).status is S.ALLOCATED:
        clock.advance(2)
        rm.beat()
        open_rm(liveness_interval=LIVENESS).beat()  # a replica starts, without downtime
        beats += 1
    assert beats == 5  # the lease's 10 s
    assert rm.requests.get(held.id).status is S.EXPIRED


def test_a_handover_between_live_processes_is_not_a_restart(
    open_rm: Callable[..., ResourceManagerService], clock: FakeClock
) -> None:
    first = open_rm()
    setup_pool(first)
    held = first.requests.create(ALICE, request_spec(gpus(1), lease=10))
    second = open_rm()
    clock.advance(11)  # first ran a cycle 11 s ago: the RM was alive all along
    second.sweep()
    assert second.requests.get(held.id).status is S.EXPIRED
