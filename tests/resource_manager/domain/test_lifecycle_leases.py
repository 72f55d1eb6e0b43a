"""The request status machine, client operations and lease rules (fake clock: ``at``)."""

from __future__ import annotations

from datetime import datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.resource_manager.builders import at, chains, gpu, request, uid
from wharf.core.enums import ResourceRequestRuntimeState as Runtime
from wharf.core.enums import ResourceRequestStatus as S
from wharf.core.errors import IllegalOperationError, IllegalTransitionError, InputError
from wharf.resource_manager.domain import (
    ALLOCATION_WAIT_TIMED_OUT,
    LEASE_EXPIRED,
    LEASE_EXPIRED_WHILE_PENDING,
    REQUEST_TRANSITIONS,
    TERMINAL_STATUSES,
    apply_lapse,
    cancel,
    check_request_transition,
    lapse,
    lease_lapsed,
    new_request,
    release,
    renew,
    transition,
)

ALLOWED = {
    (S.PENDING, S.ALLOCATED),
    (S.PENDING, S.REJECTED),
    (S.PENDING, S.CANCELLED),
    (S.PENDING, S.EXPIRED),
    (S.ALLOCATED, S.PREEMPTING),
    (S.ALLOCATED, S.RELEASED),
    (S.ALLOCATED, S.EXPIRED),
    (S.PREEMPTING, S.PREEMPTED),
    (S.PREEMPTING, S.RELEASED),
    (S.PREEMPTING, S.EXPIRED),
}


@pytest.mark.parametrize("current", list(S))
@pytest.mark.parametrize("new", list(S))
def test_transition_table_is_exactly_the_documented_machine(current, new):
    if current == new or (current, new) in ALLOWED:
        check_request_transition(current, new)
    else:
        with pytest.raises(IllegalTransitionError, match=f"{current.value} -> {new.value}"):
            check_request_transition(current, new)


def test_terminal_statuses():
    assert {S.PREEMPTED, S.REJECTED, S.CANCELLED, S.RELEASED, S.EXPIRED} == TERMINAL_STATUSES
    assert set(REQUEST_TRANSITIONS) == set(S)


def test_new_request_computes_deadlines_from_durations_on_the_server_clock():
    made = new_request(
        request_id=uid("r"),
        subjects=chains("team", "r"),
        demands=[gpu(1)],
        now=at(100),
        lease_seconds=30,
        allocation_wait_timeout_seconds=3600,
    )
    assert made.status is S.PENDING
    assert made.created_at == at(100)
    assert made.lease_expires_at == at(130)
    assert made.allocation_deadline == at(3700)


@pytest.mark.parametrize("seconds", [0, -5, 1.5, True])
def test_new_request_rejects_bad_durations(seconds):
    with pytest.raises(InputError, match="positive whole number of seconds"):
        new_request(
            request_id=uid("r"),
            subjects=chains("t", "r"),
            demands=[gpu(1)],
            now=at(0),
            lease_seconds=seconds,
        )


def test_naive_clock_is_rejected():
    with pytest.raises(InputError, match="timezone-aware"):
        new_request(
            request_id=uid("r"),
            subjects=chains("t", "r"),
            demands=[gpu(1)],
            now=datetime(2026, 1, 1),
        )


def test_transition_stamps_times():
    pending = request("r")
    allocated = transition(pending, S.ALLOCATED, at(5), "ok")
    assert allocated.allocated_at == at(5) and allocated.status_reason == "ok"
    released = transition(allocated, S.RELEASED, at(9), "done")
    assert released.released_at == at(9)
    assert transition(released, S.RELEASED, at(10), "again") is released
    assert pending.status is S.PENDING  # inputs are never mutated


@pytest.mark.parametrize(
    ("status", "released_to"),
    [
        (S.PENDING, S.CANCELLED),
        (S.ALLOCATED, S.RELEASED),
        (S.PREEMPTING, S.PREEMPTED),
    ],
)
def test_release(status, released_to):
    assert release(request("r", status=status), at(1)).status is released_to


@pytest.mark.parametrize("status", sorted(TERMINAL_STATUSES))
def test_release_cancel_and_renew_of_a_terminal_request_return_it_unchanged(status):
    done = request("r", status=status)
    assert release(done, at(1)) is done
    assert cancel(done, at(1)) is done
    assert renew(done, at(1), 60, Runtime.RUNNING) is done


def test_cancel_only_pending():
    assert cancel(request("r"), at(1)).status is S.CANCELLED
    with pytest.raises(IllegalOperationError, match="Release it instead"):
        cancel(request("r", status=S.ALLOCATED), at(1))


@pytest.mark.parametrize(
    ("status", "lease", "wait", "now", "outcome"),
    [
        (S.PENDING, 10, None, 9, None),
        (S.PENDING, 10, None, 10, (S.CANCELLED, LEASE_EXPIRED_WHILE_PENDING)),
        (S.PENDING, None, 60, 59, None),
        (S.PENDING, None, 60, 60, (S.EXPIRED, ALLOCATION_WAIT_TIMED_OUT)),
        (S.PENDING, 60, 60, 61, (S.CANCELLED, LEASE_EXPIRED_WHILE_PENDING)),
        (S.ALLOCATED, 10, None, 10, (S.EXPIRED, LEASE_EXPIRED)),
        (S.ALLOCATED, 10, 1, 5, None),  # the wait timeout only applies while pending
        (S.PREEMPTING, 10, None, 11, (S.EXPIRED, LEASE_EXPIRED)),
        (S.ALLOCATED, None, None, 10**6, None),  # no lease, never lapses
        (S.RELEASED, 10, None, 99, None),
    ],
)
def test_lapse_rules(status, lease, wait, now, outcome):
    subject = request("r", lease=lease, wait_timeout=wait, status=status)
    assert lapse(subject, at(now)) == outcome
    lapsed = apply_lapse(subject, at(now))
    if outcome is None:
        assert lapsed is subject
    else:
        assert (lapsed.status, lapsed.status_reason) == outcome


@given(
    lease=st.integers(min_value=1, max_value=10**6),
    elapsed=st.integers(min_value=0, max_value=2 * 10**6),
    status=st.sampled_from([S.PENDING, S.ALLOCATED, S.PREEMPTING]),
)
def test_no_lease_lapses_before_its_deadline(lease, elapsed, status):
    subject = request("r", lease=lease, status=status)
    now = at(elapsed)
    assert lease_lapsed(subject, now) is (now >= subject.lease_expires_at)
    outcome = lapse(subject, now)
    if now < subject.lease_expires_at:
        assert outcome is None


def test_renew_sets_the_lease_from_now_and_records_runtime_state():
    held = request("r", lease=10, status=S.ALLOCATED)
    renewed = renew(held, at(8), 300, Runtime.RUNNING)
    assert renewed.lease_expires_at == at(308)
    assert renewed.renewed_at == at(8)
    assert renewed.runtime_state is Runtime.RUNNING
    shorter = renew(renewed, at(9), 5)  # the holder may shorten its own lease
    assert shorter.lease_expires_at == at(14)
    assert shorter.runtime_state is Runtime.RUNNING  # unchanged when not given


@pytest.mark.parametrize("seconds", [0, -1, 2.5])
def test_renew_rejects_bad_durations(seconds):
    with pytest.raises(InputError, match="positive whole number"):
        renew(request("r"), at(1), seconds)
