"""Waiting for an allocation: renew-polling with backoff, fail-fast, timeout, and waking up in
the wait room when a release allocated the request (fake clock and fake room, no sleeps)."""

from __future__ import annotations

import itertools
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.execution.clocks import Clock
from wharf.config.settings import ResourceSettings
from wharf.core.enums import ResourceRequestRuntimeState as RS
from wharf.core.enums import ResourceRequestStatus as S
from wharf.core.errors import EntityNotFoundError, InputError, StoreUnavailableError
from wharf.execution.allocation import (
    MAX_POLL_SECONDS,
    AllocationFailedError,
    AllocationWaiter,
    WaitStop,
)
from wharf.execution.interrupt import StepInterrupted
from wharf.execution.resources.wait_room import WaitRoom

REQUEST = uuid.uuid4()


@dataclass
class Reply:
    id: uuid.UUID
    status: S
    status_reason: str | None = None


@dataclass
class FakeRM:
    statuses: list[S]
    reason: str | None = None
    calls: list[tuple[int, RS | None]] = field(default_factory=list)

    def renew(self, request_id, lease_seconds, runtime_state=None):
        self.calls.append((lease_seconds, runtime_state))
        status = self.statuses.pop(0) if len(self.statuses) > 1 else self.statuses[0]
        if status is None:
            raise EntityNotFoundError("gone")
        if isinstance(status, Exception):
            raise status
        return Reply(request_id, status, self.reason)


def waiter(rm, clock, jitter=0.999999):
    return AllocationWaiter(rm, clock, clock.sleep, jitter=lambda: jitter)


def test_polls_by_renewing_with_pending_state_until_allocated():
    rm, clock = FakeRM([S.PENDING, S.PENDING, S.PENDING, S.ALLOCATED]), Clock()
    result = waiter(rm, clock).wait(REQUEST, ResourceSettings())
    assert result.status is S.ALLOCATED
    assert all(state is RS.PENDING for _, state in rm.calls)
    assert [round(s, 3) for s in clock.sleeps] == [1.0, 2.0, 4.0]


def test_backoff_is_capped_and_jittered():
    rm, clock = FakeRM([S.PENDING] * 12 + [S.ALLOCATED]), Clock()
    waiter(rm, clock).wait(REQUEST, ResourceSettings())
    assert max(clock.sleeps) <= MAX_POLL_SECONDS
    assert round(clock.sleeps[-1], 3) == MAX_POLL_SECONDS
    low = Clock()
    waiter(FakeRM([S.PENDING, S.ALLOCATED]), low, jitter=0.0).wait(REQUEST, ResourceSettings())
    assert low.sleeps == [0.5]


def test_pending_lease_outlives_the_next_poll():
    rm, clock = FakeRM([S.PENDING] * 5 + [S.ALLOCATED]), Clock()
    waiter(rm, clock).wait(REQUEST, ResourceSettings())
    for (lease, _), slept in zip(rm.calls[1:], clock.sleeps, strict=False):
        assert lease > slept


@pytest.mark.parametrize(
    ("status", "words"),
    [
        (S.REJECTED, "was rejected"),
        (S.CANCELLED, "was cancelled"),
        (S.EXPIRED, "expired"),
        (S.PREEMPTING, "is being reclaimed"),
        (S.PREEMPTED, "was reclaimed"),
        (S.RELEASED, "was released"),
    ],
)
def test_fails_fast_naming_request_and_reason(status, words):
    rm = FakeRM(
        [S.PENDING, status], reason="No resource policy matches any of the request subjects."
    )
    with pytest.raises(AllocationFailedError) as info:
        waiter(rm, Clock()).wait(REQUEST, ResourceSettings())
    assert str(REQUEST) in str(info.value) and words in str(info.value)
    assert "No resource policy matches" in str(info.value)


def test_timeout_message():
    rm, clock = FakeRM([S.PENDING], reason="waiting for capacity"), Clock()
    with pytest.raises(AllocationFailedError) as info:
        waiter(rm, clock).wait(REQUEST, ResourceSettings(allocation_wait_timeout_seconds=60))
    message = str(info.value)
    assert message.startswith(f"Timed out after 60 seconds waiting for resource request {REQUEST}")
    assert "Increase `ResourceSettings.allocation_wait_timeout_seconds`" in message
    assert sum(clock.sleeps) <= 60 + 1e-6


def test_missing_request():
    with pytest.raises(AllocationFailedError, match="not found"):
        waiter(FakeRM([None]), Clock()).wait(REQUEST, ResourceSettings())


OUTAGE = StoreUnavailableError("The Resource Manager at http://rm is unreachable: refused")


def test_an_outage_is_waited_out_on_the_same_schedule():
    """Polls that cannot reach the RM (or the server in between) are no answer: the waiter
    keeps its backoff and takes the allocation once the RM answers again."""
    rm, clock = FakeRM([S.PENDING, OUTAGE, OUTAGE, S.PENDING, S.ALLOCATED]), Clock()
    result = waiter(rm, clock).wait(REQUEST, ResourceSettings())
    assert result.status is S.ALLOCATED
    assert [round(s, 3) for s in clock.sleeps] == [1.0, 2.0, 4.0, 8.0]
    assert len(rm.calls) == 5


def test_an_outage_at_the_first_poll_is_waited_out_too():
    rm, clock = FakeRM([OUTAGE, S.ALLOCATED]), Clock()
    assert waiter(rm, clock).wait(REQUEST, ResourceSettings()).status is S.ALLOCATED


def test_an_outage_longer_than_the_timeout_ends_the_wait_at_the_timeout():
    rm, clock = FakeRM([S.PENDING, OUTAGE]), Clock()
    with pytest.raises(AllocationFailedError) as info:
        waiter(rm, clock).wait(REQUEST, ResourceSettings(allocation_wait_timeout_seconds=60))
    message = str(info.value)
    assert message.startswith(f"Timed out after 60 seconds waiting for resource request {REQUEST}")
    assert "could not reach it" in message and "unreachable" in message
    assert sum(clock.sleeps) == pytest.approx(60)


def test_an_error_that_is_no_outage_still_ends_the_wait():
    rm, clock = FakeRM([InputError("bad lease")]), Clock()
    with pytest.raises(InputError):
        waiter(rm, clock).wait(REQUEST, ResourceSettings())


# ------------------------------------------------------------------ with a wait room


@dataclass
class TimedRM:
    """The request is pending until ``allocated_at`` (seconds of fake time), then allocated."""

    clock: Clock
    allocated_at: float
    status: S = S.ALLOCATED
    renewals: list[tuple[float, int]] = field(default_factory=list)
    """(fake seconds, lease) of every renewal."""

    def elapsed(self) -> float:
        return (self.clock.now - START).total_seconds()

    def state(self) -> S:
        return self.status if self.elapsed() >= self.allocated_at else S.PENDING

    def renew(self, request_id, lease_seconds, runtime_state=None):
        assert runtime_state is RS.PENDING
        self.renewals.append((self.elapsed(), lease_seconds))
        return Reply(request_id, self.state(), "the reason")


START = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass
class FakeRoom:
    """A wait room on fake time: if ``wakes`` (a release of this process changed the request
    at ``rm.allocated_at``), a wait spanning that instant returns the request then."""

    rm: TimedRM
    wakes: bool = True
    entered: list[int] = field(default_factory=list)
    """How many renewals had happened when the waiter entered."""
    inside: bool = False
    lease: float | None = None
    """What :meth:`lease_left` says (a request this process just created pending)."""

    def lease_left(self):
        return self.lease

    @contextmanager
    def enter(self, request_id):
        self.entered.append(len(self.rm.renewals))
        self.inside = True
        try:
            yield self
        finally:
            self.inside = False

    def wait(self, timeout):
        assert self.inside
        now, at = self.rm.elapsed(), self.rm.allocated_at
        if self.wakes and at <= now + timeout:
            self.rm.clock.now = START + timedelta(seconds=max(now, at))
            assert self.rm.state() is not S.PENDING, "a room only wakes requests that left"
            return Reply(REQUEST, self.rm.state(), "the reason")
        self.rm.clock.sleep(timeout)
        return None


def room_waiter(rm: TimedRM, room: FakeRoom, jitter: float = 0.999999) -> AllocationWaiter:
    def no_sleep(seconds: float) -> None:
        raise AssertionError("with a wait room the waiter waits in the room")

    return AllocationWaiter(rm, rm.clock, no_sleep, jitter=lambda: jitter, room=room)


def test_woken_by_the_room_it_takes_the_allocation_without_asking_again():
    clock = Clock()
    clock.now = START
    rm = TimedRM(clock, allocated_at=0.3)
    room = FakeRoom(rm)
    result = room_waiter(rm, room).wait(REQUEST, ResourceSettings())
    assert result.status is S.ALLOCATED
    assert rm.elapsed() == pytest.approx(0.3)
    assert len(rm.renewals) == 1  # the first poll only
    assert room.entered == [0]  # entered before the first renewal read the status
    assert not room.inside


@pytest.mark.parametrize(
    ("status", "words"),
    [(S.REJECTED, "was rejected"), (S.CANCELLED, "was cancelled"), (S.EXPIRED, "expired")],
)
def test_woken_by_the_room_for_an_ended_request_it_fails_fast(status, words):
    clock = Clock()
    clock.now = START
    rm = TimedRM(clock, allocated_at=2.5, status=status)
    with pytest.raises(AllocationFailedError) as info:
        room_waiter(rm, FakeRoom(rm)).wait(REQUEST, ResourceSettings())
    assert str(REQUEST) in str(info.value) and words in str(info.value)
    assert "the reason" in str(info.value)
    assert rm.elapsed() == pytest.approx(2.5)


def test_in_the_room_it_still_times_out_with_the_usual_message():
    clock = Clock()
    clock.now = START
    rm = TimedRM(clock, allocated_at=1e9)
    with pytest.raises(AllocationFailedError, match=r"^Timed out after 60 seconds"):
        room_waiter(rm, FakeRoom(rm)).wait(
            REQUEST, ResourceSettings(allocation_wait_timeout_seconds=60)
        )
    assert rm.elapsed() == pytest.approx(60)


@settings(max_examples=200, deadline=None)
@given(
    allocated_at=st.floats(min_value=0.0, max_value=120.0),
    wakes=st.booleans(),
    jitter=st.floats(min_value=0.0, max_value=0.999999),
)
def test_waiting_in_the_room_renews_on_schedule_and_takes_the_slot_at_once(
    allocated_at: float, wakes: bool, jitter: float
) -> None:
    """Whatever the timing: the pending lease never lapses between renewals, the backoff
    schedule is kept, and the waiter returns the moment its request is allocated when a
    release of this process allocated it (otherwise at its first poll after that)."""
    clock = Clock()
    clock.now = START
    allocated_at = round(allocated_at, 6)  # the clock counts microseconds
    rm = TimedRM(clock, allocated_at=allocated_at)
    result = room_waiter(rm, FakeRoom(rm, wakes=wakes), jitter).wait(REQUEST, ResourceSettings())
    assert result.status is S.ALLOCATED
    times = [t for t, _ in rm.renewals]
    if not times:  # the room knew before the first poll (allocated at creation): no poll
        assert wakes and allocated_at <= 0 and rm.elapsed() == 0
        return
    for (at, lease), later in zip(rm.renewals, [*times[1:], rm.elapsed()], strict=True):
        assert later < at + lease, "the pending lease lapsed between two renewals"
    schedule = [min(MAX_POLL_SECONDS, 2.0**k) * (0.5 + 0.5 * jitter) for k in range(len(times))]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert gaps == pytest.approx(schedule[: len(gaps)])
    if wakes:
        assert rm.elapsed() == pytest.approx(max(allocated_at, 0.0))
    else:
        assert rm.elapsed() == pytest.approx(times[-1])
        assert times[-1] >= allocated_at
        assert len(times) == 1 or times[-2] < allocated_at


def test_a_request_just_created_pending_is_not_polled_at_once():
    """Its first lease (60 s) outlives the first wait by more than a poll would give it."""
    clock = Clock()
    clock.now = START
    rm = TimedRM(clock, allocated_at=30.0)
    room = FakeRoom(rm, wakes=False, lease=60.0)
    result = room_waiter(rm, room).wait(REQUEST, ResourceSettings())
    assert result.status is S.ALLOCATED
    first_poll = rm.renewals[0][0]
    assert first_poll > 0.9  # after the first (jittered) delay, not at once
    assert all(lease > 40 for _, lease in rm.renewals)


def test_a_short_or_unknown_first_lease_is_renewed_at_once():
    for lease in (None, 30.0):
        clock = Clock()
        clock.now = START
        rm = TimedRM(clock, allocated_at=5.0)
        room = FakeRoom(rm, wakes=False, lease=lease)
        room_waiter(rm, room).wait(REQUEST, ResourceSettings())
        assert rm.renewals[0][0] == 0.0


def test_a_waiter_tells_once_that_its_request_is_still_queued():
    rm = FakeRM([S.PENDING, S.PENDING, S.ALLOCATED], reason="Waiting for capacity in pool 'x'.")
    clock, told = Clock(), []
    w = waiter(rm, clock)
    w.on_pending = told.append
    w.wait(REQUEST, ResourceSettings())
    assert [r.status_reason for r in told] == ["Waiting for capacity in pool 'x'."]


def test_a_waiter_allocated_at_its_first_poll_tells_nothing():
    rm, clock, told = FakeRM([S.ALLOCATED]), Clock(), []
    w = waiter(rm, clock)
    w.on_pending = told.append
    w.wait(REQUEST, ResourceSettings())
    assert told == []


def test_a_wait_stopped_before_it_began_ends_without_a_poll():
    rm, clock = FakeRM([S.PENDING]), Clock()
    stop = WaitStop()
    assert stop.interrupt("Stopped on request.")
    assert not stop.interrupt("again")  # the first reason stands
    room = WaitRoom(lambda ids: [], watch_seconds=None)
    waiting = AllocationWaiter(rm, clock, clock.sleep, room=room, stop=stop)
    with pytest.raises(StepInterrupted, match="Stopped on request"):
        waiting.wait(REQUEST, ResourceSettings())
    assert rm.calls == [] and room.waiting == 0


def test_a_stop_wakes_a_waiter_in_the_room_at_once():
    """The waiter sits in a real room between polls (an hour's timeout): the stop, from another
    thread, ends its wait at once rather than at its next poll or its timeout."""
    import threading
    import time

    rm = FakeRM([S.PENDING])
    room = WaitRoom(lambda ids: [], watch_seconds=None)
    stop = WaitStop()
    waiting = AllocationWaiter(rm, lambda: datetime.now(UTC), lambda _: None, room=room, stop=stop)
    raised: list[BaseException] = []

    def wait() -> None:
        try:
            waiting.wait(REQUEST, ResourceSettings(allocation_wait_timeout_seconds=3600))
        except BaseException as exc:
            raised.append(exc)

    thread = threading.Thread(target=wait, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not rm.calls:  # it polled once: now it waits in the room
        assert time.monotonic() < deadline, "the waiter never polled"
        time.sleep(0.01)
    stop.interrupt("Stopped on request.")
    thread.join(5)
    assert not thread.is_alive(), "the stop did not end the wait"
    assert len(raised) == 1 and isinstance(raised[0], StepInterrupted)
    assert str(raised[0]) == "Stopped on request."
    assert room.waiting == 0 and len(rm.calls) == 1
