"""The wait room of :mod:`wharf.execution.resources.wait_room`: a release wakes exactly the waiters whose
request left the queue, with one ``list`` per check, and no wake-up is ever lost.

No test sleeps: tickets are read with ``wait(0)`` once their fate is decided, and threads are
sequenced with events and barriers.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from uuid import UUID

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    invariant,
    precondition,
    rule,
)

from wharf.core.enums import ResourceRequestStatus as S
from wharf.execution.resources.wait_room import IDS_PER_LIST, REMEMBERED, WaitRoom

SAFETY_TIMEOUT = 30.0
"""Only bounds a broken test; every wait that should return has been made to return."""


@dataclass(frozen=True)
class Info:
    id: UUID
    status: S
    status_reason: str | None = None


@dataclass
class FakeRM:
    """Request statuses by id; ``lookup`` answers like ``list(ids=…, status=LEFT_QUEUE)``."""

    statuses: dict[UUID, S] = field(default_factory=dict)
    lookups: list[tuple[UUID, ...]] = field(default_factory=list)
    fail: bool = False

    def lookup(self, ids: Sequence[UUID]) -> list[Info]:
        self.lookups.append(tuple(ids))
        if self.fail:
            raise ConnectionError("RM unreachable")
        return [Info(i, self.statuses[i]) for i in ids if self.statuses[i] is not S.PENDING]


def room_for(rm: FakeRM) -> WaitRoom:
    """A room without its watch thread: only explicit checks look anything up."""
    return WaitRoom(rm.lookup, watch_seconds=None)  # type: ignore[arg-type]


def test_a_check_wakes_exactly_the_waiters_whose_request_left_the_queue() -> None:
    a, b, c = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    rm = FakeRM({a: S.PENDING, b: S.PENDING, c: S.PENDING})
    room = room_for(rm)
    with room.enter(a) as ta, room.enter(b) as tb, room.enter(c) as tc:
        rm.statuses[b] = S.ALLOCATED
        rm.statuses[c] = S.REJECTED
        room.check()
        assert len(rm.lookups) == 1 and set(rm.lookups[0]) == {a, b, c}
        assert ta.wait(0) is None
        woken_b, woken_c = tb.wait(0), tc.wait(0)
        assert woken_b is not None and woken_b.status is S.ALLOCATED
        assert woken_c is not None and woken_c.status is S.REJECTED


def test_a_release_before_the_wait_is_not_lost() -> None:
    """Enter, read the status (pending), a release allocates, *then* wait: it returns at once."""
    a = uuid.uuid4()
    rm = FakeRM({a: S.PENDING})
    room = room_for(rm)
    with room.enter(a) as ticket:
        assert rm.statuses[a] is S.PENDING  # the waiter's "check"
        rm.statuses[a] = S.ALLOCATED
        room.check()  # the release, between the check and the wait
        woken = ticket.wait(SAFETY_TIMEOUT)
    assert woken is not None and woken.status is S.ALLOCATED


def test_an_empty_room_costs_nothing_and_leaving_unregisters() -> None:
    a, b = uuid.uuid4(), uuid.uuid4()
    rm = FakeRM({a: S.PENDING, b: S.PENDING})
    room = room_for(rm)
    room.check()
    assert rm.lookups == []
    with room.enter(a):
        pass
    with room.enter(b):
        room.check()
    assert rm.lookups == [(b,)]
    assert room.waiting == 0


def test_a_request_known_to_have_left_before_anyone_waited_wakes_its_waiter_on_entry() -> None:
    created, announced, pending = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    room = room_for(FakeRM())
    room.left_before_waiting(Info(created, S.ALLOCATED))  # created allocated
    room.left_before_waiting(Info(pending, S.PENDING))  # still queued: nothing to remember
    room.wake_left([Info(announced, S.CANCELLED)])  # announced before its waiter entered
    with room.enter(created) as a, room.enter(announced) as b, room.enter(pending) as c:
        woken_a, woken_b = a.wait(0), b.wait(0)
        assert woken_a is not None and woken_a.status is S.ALLOCATED
        assert woken_b is not None and woken_b.status is S.CANCELLED
        assert c.wait(0) is None
    with room.enter(created) as again:  # remembered for one entry only
        assert again.wait(0) is None


def test_the_room_remembers_a_bounded_number_of_early_departures() -> None:
    room = room_for(FakeRM())
    ids = [uuid.uuid4() for _ in range(REMEMBERED + 1)]
    room.wake_left([Info(i, S.ALLOCATED) for i in ids])
    with room.enter(ids[0]) as oldest, room.enter(ids[-1]) as newest:
        assert oldest.wait(0) is None
        assert newest.wait(0) is not None


def test_many_waiters_are_looked_up_in_chunks() -> None:
    ids = [uuid.uuid4() for _ in range(IDS_PER_LIST + 1)]
    rm = FakeRM(dict.fromkeys(ids, S.PENDING))
    room = room_for(rm)
    tickets = [room.enter(i) for i in ids]
    for ticket in tickets:
        ticket.__enter__()
    room.check()
    assert [len(chunk) for chunk in rm.lookups] == [IDS_PER_LIST, 1]
    for ticket in tickets:
        ticket.__exit__(None, None, None)


def test_a_failing_lookup_never_fails_the_caller_and_the_next_check_runs() -> None:
    a = uuid.uuid4()
    rm = FakeRM({a: S.ALLOCATED}, fail=True)
    room = room_for(rm)
    with room.enter(a) as ticket:
        room.check()  # logged, not raised
        assert ticket.wait(0) is None
        rm.fail = False
        room.check()
        assert ticket.wait(0) is not None


def test_a_check_racing_with_a_running_check_looks_up_after_it() -> None:
    """Checks run one at a time: a check that finds another looking up waits for it, then
    looks up itself and sees what the racing release did."""
    a, b = uuid.uuid4(), uuid.uuid4()
    rm = FakeRM({a: S.PENDING, b: S.PENDING})
    inside, go_on = threading.Event(), threading.Event()

    def slow_lookup(ids: Sequence[UUID]) -> list[Info]:
        found = rm.lookup(ids)
        if len(rm.lookups) == 1:  # the first lookup has read the RM; hold it there
            inside.set()
            assert go_on.wait(SAFETY_TIMEOUT)
        return found

    room = WaitRoom(slow_lookup, watch_seconds=None)  # type: ignore[arg-type]
    with room.enter(a) as ta, room.enter(b) as tb:
        first = threading.Thread(target=room.check)
        first.start()
        assert inside.wait(SAFETY_TIMEOUT)
        rm.statuses[b] = S.ALLOCATED  # a release committed after the first lookup read ...
        second = threading.Thread(target=room.check)  # ... and its check
        second.start()
        assert len(rm.lookups) == 1  # the second waits for the first
        go_on.set()
        first.join(SAFETY_TIMEOUT)
        second.join(SAFETY_TIMEOUT)
        assert len(rm.lookups) == 2
        woken = tb.wait(0)
        assert woken is not None and woken.status is S.ALLOCATED
        assert ta.wait(0) is None


def test_concurrent_waiters_are_all_woken_by_releases() -> None:
    """Real threads: each waiter enters, reads its status, waits; releases allocate them one
    by one and every waiter gets its own request, never another one's."""
    n = 16
    ids = [uuid.uuid4() for _ in range(n)]
    rm = FakeRM(dict.fromkeys(ids, S.PENDING))
    lock = threading.Lock()

    def lookup(chunk: Sequence[UUID]) -> list[Info]:
        with lock:
            return rm.lookup(chunk)

    room = WaitRoom(lookup, watch_seconds=None)  # type: ignore[arg-type]
    ready = threading.Barrier(n + 1)
    got: dict[UUID, object] = {}

    def waiter(request_id: UUID) -> None:
        with room.enter(request_id) as ticket:
            ready.wait(SAFETY_TIMEOUT)
            got[request_id] = ticket.wait(SAFETY_TIMEOUT)

    threads = [threading.Thread(target=waiter, args=(i,)) for i in ids]
    for thread in threads:
        thread.start()
    ready.wait(SAFETY_TIMEOUT)
    releasers = []
    for request_id in ids:
        with lock:
            rm.statuses[request_id] = S.ALLOCATED
        releaser = threading.Thread(target=room.check)
        releaser.start()
        releasers.append(releaser)
    for thread in [*releasers, *threads]:
        thread.join(SAFETY_TIMEOUT)
    assert {i: getattr(got[i], "id", None) for i in ids} == {i: i for i in ids}
    assert len(rm.lookups) <= n


def test_the_watch_wakes_a_waiter_no_release_of_this_process_announced() -> None:
    """Another process released: nobody calls ``check``, the room's watch finds it."""
    a, b = uuid.uuid4(), uuid.uuid4()
    rm = FakeRM({a: S.PENDING, b: S.PENDING})
    room = WaitRoom(rm.lookup, watch_seconds=0.001)  # type: ignore[arg-type]
    with room.enter(a) as ta, room.enter(b):
        watcher = room.watcher
        assert watcher is not None and watcher.daemon
        rm.statuses[a] = S.ALLOCATED
        woken = ta.wait(SAFETY_TIMEOUT)
        assert woken is not None and woken.status is S.ALLOCATED
        assert room.watcher is watcher  # one watch thread per room
    watcher.join(SAFETY_TIMEOUT)
    assert not watcher.is_alive() and room.watcher is None  # an empty room keeps no thread
    assert all(set(ids) <= {a, b} for ids in rm.lookups)


def test_a_waiter_that_will_not_wait_starts_no_watch() -> None:
    """Found allocated on entry (free capacity): no thread; the first real waiter starts one."""
    allocated, pending = uuid.uuid4(), uuid.uuid4()
    rm = FakeRM({allocated: S.ALLOCATED, pending: S.PENDING})
    room = WaitRoom(rm.lookup, watch_seconds=SAFETY_TIMEOUT)  # type: ignore[arg-type]
    room.left_before_waiting(Info(allocated, S.ALLOCATED))
    with room.enter(allocated) as ticket:
        assert ticket.wait(0) is not None and room.watcher is None
        with room.enter(pending):
            watcher = room.watcher
            assert watcher is not None
    watcher.join(SAFETY_TIMEOUT)  # the room emptied: the watch ends at once
    assert not watcher.is_alive() and room.watcher is None


def test_the_watch_backs_off_while_the_rm_fails_and_recovers() -> None:
    a = uuid.uuid4()
    rm = FakeRM({a: S.ALLOCATED}, fail=True)
    failures = threading.Event()

    def lookup(ids: Sequence[UUID]) -> list[Info]:
        if len(rm.lookups) >= 3:
            rm.fail = False
            failures.set()
        return rm.lookup(ids)

    room = WaitRoom(lookup, watch_seconds=0.001)  # type: ignore[arg-type]
    with room.enter(a) as ticket:
        woken = ticket.wait(SAFETY_TIMEOUT)
    assert failures.is_set() and woken is not None and woken.status is S.ALLOCATED


def test_the_watch_looks_up_only_when_something_may_have_left_the_queue_unannounced() -> None:
    """With a marker from the client (the in-process RM's), the watch skips its lookup while
    the marker stays the same, and looks again once it changes."""
    a = uuid.uuid4()
    rm = FakeRM({a: S.PENDING})
    marker = [0]
    reads = threading.Semaphore(0)

    def unannounced() -> int:
        reads.release()
        return marker[0]

    room = WaitRoom(rm.lookup, watch_seconds=0.001, unannounced=unannounced)  # type: ignore[arg-type]
    with room.enter(a) as ticket:
        for _ in range(20):  # twenty ticks of the watch
            assert reads.acquire(timeout=SAFETY_TIMEOUT)
        assert len(rm.lookups) == 1, "one lookup for the first marker, none while it holds"
        rm.statuses[a] = S.ALLOCATED  # left the queue, and nobody announced it ...
        assert ticket.wait(0) is None
        marker[0] = 1  # ... but the marker says something may have
        woken = ticket.wait(SAFETY_TIMEOUT)
        assert woken is not None and woken.status is S.ALLOCATED
    assert len(rm.lookups) == 2


class WaitRoomMachine(RuleBasedStateMachine):
    """Model: a registered waiter is woken by the first check after its request left the
    queue, and keeps that first answer; a check with nobody registered looks nothing up."""

    def __init__(self) -> None:
        super().__init__()
        self.rm = FakeRM()
        self.room = room_for(self.rm)
        self.open: dict[UUID, tuple[object, object]] = {}  # id -> (context, ticket)
        self.expected: dict[UUID, S | None] = {}
        self.expected_lookups = 0

    waiters = Bundle("waiters")

    @rule(target=waiters)
    def enter(self) -> UUID:
        request_id = uuid.uuid4()
        self.rm.statuses[request_id] = S.PENDING
        context = self.room.enter(request_id)
        self.open[request_id] = (context, context.__enter__())
        self.expected[request_id] = None
        return request_id

    @rule(request_id=consumes(waiters))
    def leave(self, request_id: UUID) -> None:
        context, _ = self.open.pop(request_id)
        context.__exit__(None, None, None)  # type: ignore[attr-defined]
        del self.expected[request_id]

    @rule(request_id=waiters, status=st.sampled_from([s for s in S if s is not S.PENDING]))
    def request_changes(self, request_id: UUID, status: S) -> None:
        if self.rm.statuses[request_id] is S.PENDING:
            self.rm.statuses[request_id] = status

    @rule()
    def check(self) -> None:
        self.room.check()
        if self.open:
            self.expected_lookups += 1
        for request_id in self.open:
            status = self.rm.statuses[request_id]
            if self.expected[request_id] is None and status is not S.PENDING:
                self.expected[request_id] = status

    @precondition(lambda self: bool(self.open))
    @rule(data=st.data())
    def wait_without_blocking(self, data: st.DataObject) -> None:
        request_id = data.draw(st.sampled_from(sorted(self.open)))
        _, ticket = self.open[request_id]
        woken = ticket.wait(0)  # type: ignore[attr-defined]
        expected = self.expected[request_id]
        assert (None if woken is None else woken.status) is expected

    @invariant()
    def one_lookup_per_occupied_check(self) -> None:
        assert len(self.rm.lookups) == self.expected_lookups
        assert self.room.waiting == len(self.open)

    def teardown(self) -> None:
        for context, _ in self.open.values():
            context.__exit__(None, None, None)  # type: ignore[attr-defined]


TestWaitRoomMachine = WaitRoomMachine.TestCase
TestWaitRoomMachine.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
