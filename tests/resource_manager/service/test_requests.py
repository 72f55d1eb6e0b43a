"""Contract: request lifecycle, lists and filters, queue, allocations, explain, preemption."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest
import sqlalchemy as sa

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
from wharf.core.enums import ResourceRequestStatus as S
from wharf.core.errors import EntityNotFoundError, IllegalOperationError
from wharf.resource_manager.contract.models import CapacityClassSpec, PageRequest, RequestFilter
from wharf.resource_manager.service import ResourceManagerService, queries
from wharf.resource_manager.service import tables as t


def test_create_admits_at_once_when_it_fits(rm: ResourceManagerService) -> None:
    setup_pool(rm)
    created = rm.requests.create(ALICE, request_spec(gpus(2), metadata={"run": "r1"}))
    assert created.status is S.ALLOCATED
    assert created.requester == "alice"
    assert created.status_reason == "Admitted to pool 'gpus' by policy 'team'."
    assert created.allocated_at == created.created_at  # admitted in the creating transaction
    assert created.lease_expires_at is not None
    assert (created.lease_expires_at - created.created_at).total_seconds() == 60
    [allocation] = created.allocations
    assert (allocation.class_name, allocation.resource, allocation.base_quantity) == (
        "h100",
        "GPU",
        2,
    )
    assert allocation.pool_id == rm.pools.get("gpus").id
    assert rm.requests.get(created.id) == created


@pytest.mark.parametrize(
    ("where", "named"),
    [
        ("pool", "the concurrency limit of pool 'gpus' is 0"),
        ("policy", "the concurrency limit of policy 'team' is 0"),
        ("class", "the concurrency limit of class 'h100' is 0"),
    ],
)
def test_a_concurrency_limit_of_0_is_named_in_the_rejection(
    rm: ResourceManagerService, where: str, named: str
) -> None:
    """It said "the demands together exceed what its classes, limits, reserved shares or
    concurrency limits allow", leaving the administrator to find which."""
    zero = {"concurrency_limit": 0}
    h100 = CapacityClassSpec.model_validate(
        {"name": "h100", "capacity": {"GPU": 4}, **(zero if where == "class" else {})}
    )
    rm.pools.create(ADMIN, pool_spec("gpus", h100, **(zero if where == "pool" else {})))
    rm.policies.create(ADMIN, policy_spec("team", **(zero if where == "policy" else {})))
    rejected = rm.requests.create(ALICE, request_spec(gpus(1)))
    assert rejected.status is S.REJECTED
    assert rejected.status_reason == (
        f"No resource policy admitted this request. Policy 'team' in pool 'gpus': {named}."
    )


def test_release_admits_the_next_waiter(rm: ResourceManagerService) -> None:
    setup_pool(rm, gpus_total=2)
    first = rm.requests.create(ALICE, request_spec(gpus(2)))
    second = rm.requests.create(BOB, request_spec(gpus(1)))
    assert second.status is S.PENDING
    assert "Waiting" in (second.status_reason or "")
    released = rm.requests.release(ALICE, first.id)
    assert released.status is S.RELEASED and released.released_at is not None
    assert rm.requests.get(second.id).status is S.ALLOCATED


def test_listeners_hear_which_requests_left_the_queue_right_after_the_commit(
    rm: ResourceManagerService, caplog: pytest.LogCaptureFixture
) -> None:
    setup_pool(rm, gpus_total=2)
    heard: list[list[tuple[object, S]]] = []

    def broken(_requests: object) -> None:
        raise RuntimeError("listener bug")

    rm.requests.on_left_queue(broken)  # logged, never fails the batch
    rm.requests.on_left_queue(lambda left: heard.append([(r.id, r.status) for r in left]))
    first = rm.requests.create(ALICE, request_spec(gpus(2)))
    second = rm.requests.create(BOB, request_spec(gpus(1)))
    third = rm.requests.create(BOB, request_spec(gpus(2)))
    assert heard == []  # created allocated or pending: their creators have the answer
    rm.requests.release(ALICE, first.id)
    assert heard == [[(second.id, S.ALLOCATED)]]  # before the release returned
    rm.requests.cancel(BOB, third.id)
    assert heard[-1] == [(third.id, S.CANCELLED)]
    assert "listener" in caplog.text


def test_release_and_cancel_of_terminal_requests_return_them_unchanged(
    rm: ResourceManagerService,
) -> None:
    setup_pool(rm)
    held = rm.requests.create(ALICE, request_spec(gpus(1)))
    released = rm.requests.release(ALICE, held.id)
    assert rm.requests.release(ALICE, held.id) == released
    assert rm.requests.cancel(ALICE, held.id) == released


def test_cancel_pending_but_not_allocated(rm: ResourceManagerService) -> None:
    setup_pool(rm, gpus_total=1)
    held = rm.requests.create(ALICE, request_spec(gpus(1)))
    waiting = rm.requests.create(ALICE, request_spec(gpus(1)))
    cancelled = rm.requests.cancel(ALICE, waiting.id)
    assert (cancelled.status, cancelled.status_reason) == (S.CANCELLED, "Cancelled by the client.")
    with pytest.raises(IllegalOperationError, match="Only a pending request can be cancelled"):
        rm.requests.cancel(ALICE, held.id)
    assert rm.requests.get(held.id).status is S.ALLOCATED


def test_release_of_a_pending_request_cancels_it(rm: ResourceManagerService) -> None:
    setup_pool(rm, gpus_total=1)
    rm.requests.create(ALICE, request_spec(gpus(1)))
    waiting = rm.requests.create(ALICE, request_spec(gpus(1)))
    assert rm.requests.release(ALICE, waiting.id).status is S.CANCELLED


def test_unknown_request(rm: ResourceManagerService) -> None:
    import uuid

    missing = uuid.uuid4()
    for call in (
        lambda: rm.requests.get(missing),
        lambda: rm.requests.release(ALICE, missing),
        lambda: rm.requests.cancel(ALICE, missing),
        lambda: rm.requests.renew(ALICE, missing, 30),
        lambda: rm.requests.explain(missing),
    ):
        with pytest.raises(EntityNotFoundError, match=str(missing)):
            call()


def test_list_filters_and_paging(rm: ResourceManagerService) -> None:
    setup_pool(rm, gpus_total=2)
    rm.pools.create(ADMIN, pool_spec("other", klass("c", GPU=1)))
    rm.policies.create(ADMIN, policy_spec("other", pool="other", project="team"))
    a = rm.requests.create(ALICE, request_spec(gpus(2), pool="gpus", metadata={"run": "r1"}))
    b = rm.requests.create(
        ALICE, request_spec(gpus(1), pool="gpus", step="s2", metadata={"run": "r2"})
    )
    c = rm.requests.create(
        BOB, request_spec(gpus(1), pool="other", metadata={"run": "r1", "k": "v"})
    )
    assert (a.status, b.status, c.status) == (S.ALLOCATED, S.PENDING, S.ALLOCATED)

    def ids(**query: object) -> list[object]:
        page = rm.requests.list(RequestFilter.model_validate(query), PageRequest(sort="asc"))
        return [item.id for item in page.items]

    assert ids() == [a.id, b.id, c.id]
    assert ids(status=["pending"]) == [b.id]
    assert ids(status=["allocated", "pending"]) == [a.id, b.id, c.id]
    assert ids(pool="gpus") == [a.id, b.id]
    assert ids(pool=str(rm.pools.get("other").id)) == [c.id]
    assert ids(pool="nope") == []
    assert ids(subject_id="s2") == [b.id]
    assert ids(subject_id="team", subject_type="project") == [a.id, b.id, c.id]
    assert ids(subject_id="team", subject_type="step_run") == []
    assert ids(metadata={"run": "r1"}) == [a.id, c.id]
    assert ids(metadata={"run": "r1", "k": "v"}) == [c.id]
    assert ids(requester="bob") == [c.id]
    assert ids(ids=[a.id, b.id], status=["allocated", "released"]) == [a.id]

    first = rm.requests.list(page=PageRequest(index=1, size=2))
    second = rm.requests.list(page=PageRequest(index=2, size=2))
    assert first.total == second.total == 3
    assert [r.id for r in first.items + second.items] == [c.id, b.id, a.id]


def test_a_lookup_by_ids_reads_those_rows_only(empty_database_url: Callable[[str], str]) -> None:
    """A wait room looks up its waiters by id among every status but pending: on SQLite (no
    planner statistics unless ANALYZE runs) the query must go through the primary key, not
    read the history of those statuses through their index. The servers keep statistics."""
    with ResourceManagerService.open(empty_database_url("sqlite")) as rm:
        setup_pool(rm, gpus_total=1)
        waiting = [rm.requests.create(ALICE, request_spec(gpus(1), step=f"s{i}")) for i in range(3)]
        # As many ids as a busy room holds (the planner's choice depends on the count).
        ids = (*(w.id for w in waiting), *(uuid.uuid4() for _ in range(197)))
        query = RequestFilter(ids=ids, status=tuple(s for s in S if s is not S.PENDING))
        with rm._db.engine.connect() as conn:
            conditions = queries._conditions(conn, query)
            assert conditions is not None
            statement = sa.select(sa.func.count()).select_from(t.requests).where(*conditions)
            sql = statement.compile(conn, compile_kwargs={"literal_binds": True})
            plan = " ".join(
                str(row[-1]) for row in conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {sql}")
            )
    assert "ix_rm_requests_status" not in plan, plan
    assert "sqlite_autoindex_rm_requests_1" in plan, plan


def test_queue_allocations_and_explain(rm: ResourceManagerService) -> None:
    setup_pool(rm, gpus_total=2)
    held = rm.requests.create(ALICE, request_spec(gpus(2)))
    w1 = rm.requests.create(ALICE, request_spec(gpus(2), step="w1"))
    w2 = rm.requests.create(BOB, request_spec(gpus(1), step="w2"))
    queue = rm.pools.queue("gpus")
    assert [(e.position, e.request.id) for e in queue] == [(1, w1.id), (2, w2.id)]
    assert all(e.request.status is S.PENDING for e in queue)

    [allocation] = rm.pools.allocations("gpus")
    assert (allocation.request_id, allocation.request_status, allocation.requester) == (
        held.id,
        S.ALLOCATED,
        "alice",
    )
    explained = rm.requests.explain(w1.id)
    assert explained.outcome == "waiting"
    assert explained.would_have_to_end == (held.id,)
    assert [p.position for p in explained.positions] == [1]
    assert rm.requests.explain(held.id).outcome == "not_pending"
    rm.requests.release(ALICE, held.id)
    assert rm.requests.explain(held.id).reason == "Released by the holder."
    # who ended it, when not its holder: an administrator, or whom a trusted caller names
    rm.requests.release(ADMIN, w1.id)  # allocated once ``held`` was released
    assert rm.requests.get(w1.id).status_reason == (
        "Released by Resource Manager administrator 'admin'."
    )
    rm.requests.release(BOB, w2.id, by="user 'carol' (project admin)")
    assert rm.requests.get(w2.id).status_reason == "Released by user 'carol' (project admin)."
    with pytest.raises(EntityNotFoundError):
        rm.pools.queue("nope")


def test_preemption_frees_capacity_only_when_the_victim_releases(
    rm: ResourceManagerService,
) -> None:
    rm.pools.create(ADMIN, pool_spec("gpus", klass("h100", GPU=2, reclaimable="coordinated")))
    rm.policies.create(ADMIN, policy_spec("low", priority=0))
    rm.policies.create(ADMIN, policy_spec("high", priority=10))
    low = rm.requests.create(
        ALICE, request_spec(gpus(2), project="low", reclaim_tolerance="coordinated")
    )
    assert low.status is S.ALLOCATED
    high = rm.requests.create(
        BOB, request_spec(gpus(1), project="high", reclaim_tolerance="coordinated")
    )
    assert high.status is S.PENDING
    victim = rm.requests.get(low.id)
    assert victim.status is S.PREEMPTING
    assert victim.preemption_initiated_by_id == high.id
    assert victim.status_reason and victim.status_reason.startswith("Preempted to free resources")
    assert rm.pools.allocations("gpus")[0].request_status is S.PREEMPTING

    done = rm.requests.release(ALICE, low.id)
    assert done.status is S.PREEMPTED
    assert rm.requests.get(high.id).status is S.ALLOCATED


def test_someone_elses_request_is_not_ours_to_change(rm: ResourceManagerService) -> None:
    from wharf.resource_manager.contract.errors import PermissionDeniedError

    setup_pool(rm, gpus_total=1)
    held = rm.requests.create(ALICE, request_spec(gpus(1)))
    waiting = rm.requests.create(ALICE, request_spec(gpus(1)))
    for call in (
        lambda: rm.requests.renew(BOB, held.id, 30),
        lambda: rm.requests.release(BOB, held.id),
        lambda: rm.requests.cancel(BOB, waiting.id),
    ):
        with pytest.raises(PermissionDeniedError, match="belongs to another requester"):
            call()
    assert rm.requests.get(held.id) == held
    assert rm.requests.get(waiting.id).status is S.PENDING
    assert rm.requests.release(ADMIN, held.id).status is S.RELEASED  # admins may


def test_a_manual_end_names_its_caller_even_on_its_own_request(
    rm: ResourceManagerService,
) -> None:
    """``manual``: an operator's ``wharf request release`` / ``cancel``, told from its holder's
    own end of a request the same principal made (a workspace server sharing the RM
    administrator's key)."""
    setup_pool(rm, gpus_total=2)
    mine = rm.requests.create(ADMIN, request_spec(gpus(1), step="a"))
    alices = rm.requests.create(ALICE, request_spec(gpus(1), step="b"))
    waiting = rm.requests.create(ALICE, request_spec(gpus(1), step="c"))
    assert waiting.status is S.PENDING
    admin = "Resource Manager administrator 'admin'"
    assert rm.requests.cancel(ALICE, waiting.id, manual=True).status_reason == (
        "Cancelled by its requester 'alice'."
    )
    assert rm.requests.release(ADMIN, mine.id, manual=True).status_reason == (
        f"Released by {admin}."
    )
    assert rm.requests.release(ALICE, alices.id, manual=True).status_reason == (
        "Released by its requester 'alice'."
    )
