"""Continuing the last cycle's walk for requests appended behind every queue decides exactly as
a full cycle over all the requests: the same admissions, preemptions and rejections, the same
waits for the appended requests, and unchanged waits for the ones already queued. When it
cannot tell, it says so (None) and leaves the walk as it was."""

from __future__ import annotations

from hypothesis import event, given
from hypothesis import strategies as st

from tests.resource_manager.builders import (
    at,
    gpu,
    grant,
    holding,
    klass,
    policy,
    pool,
    request,
    res,
)
from tests.resource_manager.scheduler.worlds import PROFILE, World, new_requests, worlds
from wharf.resource_manager.domain import ResourceRequest
from wharf.resource_manager.scheduler import (
    CycleDecisions,
    Prepared,
    SchedulerOptions,
    Snapshot,
    apply_decisions,
    continue_cycle,
    schedule,
)
from wharf.resource_manager.scheduler.cycle import CycleRun, run_cycle

BUDGET = SchedulerOptions().route_search_budget


def _lease_free(requests: list[ResourceRequest]) -> list[ResourceRequest]:
    """As the service schedules them: a continuation is only ever asked for lease-free ones."""
    return [
        r.model_copy(update={"lease_expires_at": None, "allocation_deadline": None})
        for r in requests
    ]


def _first_come(world: World, grants: bool) -> World:
    """The same world without fair sharing (the queues continuations serve), and without
    grants unless ``grants``."""
    pools = tuple(p.model_copy(update={"fair_sharing": False}) for p in world.pools)
    policies = (
        world.policies
        if grants
        else tuple(p.model_copy(update={"grants": ()}) for p in world.policies)
    )
    return World(pools, policies)


def _assert_continues(
    continued: CycleDecisions,
    full: CycleDecisions,
    appended: list[ResourceRequest],
    queued: dict[object, tuple[object, ...]],
) -> None:
    new = {r.id for r in appended}
    assert continued.admissions == full.admissions
    assert continued.preemptions == full.preemptions
    assert continued.rejections == full.rejections
    assert not full.expiries
    assert continued.waits == tuple(w for w in full.waits if w.request_id in new)
    for wait in full.waits:
        if wait.request_id not in new:
            assert queued[wait.request_id] == wait, "a queued request's wait changed"


@PROFILE
@given(
    world=st.one_of(worlds(), worlds(contended=True)),
    first_come=st.sampled_from(["no", "with grants", "without grants"]),
    data=st.data(),
)
def test_a_continued_cycle_decides_as_a_full_cycle(world, first_come, data):
    if first_come != "no":
        world = _first_come(world, grants=first_come == "with grants")
    requests = _lease_free(data.draw(new_requests("a", 0.0)))
    state = Snapshot.of(pools=world.pools, policies=world.policies, requests=requests)
    prepared = Prepared(state, BUDGET)
    run: CycleRun | None = None
    for round_ in range(1, 5):
        if run is None or not run.continuable:
            run = run_cycle(state, at(round_), prepared=prepared)
            state = apply_decisions(state, run.decisions)
        # what the walk says of every request still queued, before it walks on
        queued = {w.request_id: w for w in run.admitter.waits(run.candidates)}
        appended = _lease_free(data.draw(new_requests(f"r{round_}", float(round_))))
        if not appended:
            continue
        later = Snapshot(
            state.descriptors, state.pools, state.policies, (*state.requests, *appended)
        )
        full = schedule(later, at(round_ + 0.5))  # the oracle: a fresh cycle, nothing kept
        was_continuable = run.continuable
        continued = continue_cycle(run, appended, at(round_ + 0.5))
        if continued is None:
            event("refused" if was_continuable else "not continuable")
            state, run = later, None  # the caller runs a full cycle instead
            continue
        event("continued")
        if continued.preemptions:
            event("continued with preemptions")
        if continued.admissions:
            event("continued with admissions")
        if continued.waits:
            event("continued with waits")
        _assert_continues(continued, full, appended, queued)
        state = apply_decisions(later, continued)
        assert run.continuable == (not continued.admissions and not continued.preemptions)


def _deep_queue() -> tuple[Snapshot, CycleRun]:
    """One GPU held; a head and three more waiting for it behind a claim."""
    cluster = pool("cluster", klass("a100", GPU=1))
    team = policy("team", cluster)
    held = holding("held", cluster, team, {("a100", "GPU"): 1})
    waiting = [request(f"w{i}", gpu(1), created=i) for i in range(4)]
    state = Snapshot.of(pools=[cluster], policies=[team], requests=[held, *waiting])
    run = run_cycle(state, at(10), prepared=Prepared(state, BUDGET))
    return apply_decisions(state, run.decisions), run


def test_requests_created_into_a_deep_queue_wait_behind_its_head():
    state, run = _deep_queue()
    assert run.continuable
    appended = [request("late0", gpu(1), created=20), request("late1", gpu(1), created=21)]
    continued = continue_cycle(run, appended, at(22))
    assert continued is not None
    later = Snapshot(state.descriptors, state.pools, state.policies, (*state.requests, *appended))
    full = schedule(later, at(22))
    assert continued.waits == tuple(
        w for w in full.waits if w.request_id in {r.id for r in appended}
    )
    positions = {w.request_id: w.position for w in continued.waits}
    assert positions == {appended[0].id: 5, appended[1].id: 6}
    assert continued.stats["continued"] == 1


def test_a_request_that_would_sort_ahead_of_the_queue_needs_a_full_cycle():
    cluster = pool("cluster", klass("a100", GPU=1))
    team = policy("team", cluster)
    urgent = policy("urgent", cluster, priority=5)
    held = holding("held", cluster, team, {("a100", "GPU"): 1})
    waiting = [request(f"w{i}", gpu(1), created=i) for i in range(3)]
    state = Snapshot.of(pools=[cluster], policies=[team, urgent], requests=[held, *waiting])
    run = run_cycle(state, at(10), prepared=Prepared(state, BUDGET))
    before = run.admitter.queue_lengths.copy()
    assert (
        continue_cycle(run, [request("vip", gpu(1), project="urgent", created=20)], at(21)) is None
    )
    assert run.admitter.queue_lengths == before, "a refusal walks nothing"
    # the same request of the queue's own policy continues
    assert continue_cycle(run, [request("next", gpu(1), created=20)], at(21)) is not None


def test_fair_sharing_pools_need_a_full_cycle():
    fair = pool("fair", klass("a100", GPU=1), fair_sharing=True)
    team = policy("team", fair)
    held = holding("held", fair, team, {("a100", "GPU"): 1})
    state = Snapshot.of(pools=[fair], policies=[team], requests=[held, request("w", created=1)])
    run = run_cycle(state, at(10), prepared=Prepared(state, BUDGET))
    assert continue_cycle(run, [request("late", gpu(1), created=20)], at(21)) is None


def test_a_cycle_that_admitted_cannot_be_continued():
    cluster = pool("cluster", klass("a100", GPU=2))
    team = policy("team", cluster)
    state = Snapshot.of(pools=[cluster], policies=[team], requests=[request("first", created=0)])
    run = run_cycle(state, at(10), prepared=Prepared(state, BUDGET))
    assert run.decisions.admissions and not run.continuable
    assert continue_cycle(run, [request("second", created=20)], at(21)) is None


def test_an_admission_by_a_continuation_ends_the_walk():
    # the queue waits for class b (full); an appended request for class a fits at once
    cluster = pool("cluster", klass("a", GPU=1), klass("b", GPU=1))
    team = policy("team", cluster)
    held = holding("held", cluster, team, {("b", "GPU"): 1})
    state = Snapshot.of(
        pools=[cluster], policies=[team], requests=[held, request("wants-b", gpu(1, "b"))]
    )
    run = run_cycle(state, at(10), prepared=Prepared(state, BUDGET))
    assert run.continuable
    continued = continue_cycle(run, [request("wants-a", gpu(1, "a"), created=20)], at(21))
    assert continued is not None and len(continued.admissions) == 1
    assert not run.continuable


def test_a_queue_under_a_reserved_share_continues_too():
    # The order's "fits its unused reserved share" part is read from the walk's ledger: exact,
    # as the walk admitted nothing (a policy's usage changes only by admissions).
    cluster = pool("cluster", klass("a100", GPU=2))
    team = policy("team", cluster, grant("a100", GPU=res(1)))
    held = holding("held", cluster, team, {("a100", "GPU"): 2})
    state = Snapshot.of(
        pools=[cluster], policies=[team], requests=[held, request("w", gpu(1), created=1)]
    )
    run = run_cycle(state, at(10), prepared=Prepared(state, BUDGET))
    appended = [request("late", gpu(1), created=20)]
    continued = continue_cycle(run, appended, at(21))
    assert continued is not None
    later = Snapshot(state.descriptors, state.pools, state.policies, (*state.requests, *appended))
    full = schedule(later, at(21))
    assert continued.waits == tuple(w for w in full.waits if w.request_id == appended[0].id)
