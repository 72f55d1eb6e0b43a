"""Waiting for an allocation: renew-polling with backoff, fail-fast, timeout (fake clock)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest

from wharf.config.settings import ResourceSettings
from wharf.core.enums import ResourceRequestRuntimeState as RS
from wharf.core.enums import ResourceRequestStatus as S
from wharf.core.errors import EntityNotFoundError
from wharf.execution.allocation import (
    MAX_POLL_SECONDS,
    AllocationFailedError,
    AllocationWaiter,
)

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
        return Reply(request_id, status, self.reason)


class Clock:
    def __init__(self):
        self.now = datetime(2026, 1, 1, tzinfo=UTC)
        self.sleeps: list[float] = []

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += timedelta(seconds=seconds)


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
