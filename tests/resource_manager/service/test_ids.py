"""New request ids are time-ordered (RFC 9562 version 7) from the service's clock; allocation
ids share their request's timestamp prefix, and stay pure and distinct."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from wharf.resource_manager.scheduler.phase6_admit import allocation_id
from wharf.resource_manager.service.ids import request_id

NOW = datetime(2030, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)


def test_request_ids_carry_the_clock_and_sort_by_it() -> None:
    first = request_id(NOW)
    assert first.version == 7
    assert first.variant == uuid.RFC_4122
    assert first.int >> 80 == int(NOW.timestamp() * 1000)
    later = [request_id(NOW + timedelta(milliseconds=step)) for step in range(1, 50)]
    assert sorted(later, key=lambda u: u.bytes) == later
    assert all(first.bytes < other.bytes for other in later)
    assert first.hex < later[0].hex  # CHAR(32) hex columns sort the same way


def test_request_ids_of_one_millisecond_are_distinct() -> None:
    ids = {request_id(NOW) for _ in range(10_000)}
    assert len(ids) == 10_000


def test_allocation_ids_are_pure_distinct_and_next_to_their_request() -> None:
    request = request_id(NOW)
    picks = ["0", "1", "2", "default:gpu:CPU"]
    ids = [allocation_id(request, key) for key in picks]
    assert ids == [allocation_id(request, key) for key in picks]  # stable across retries
    assert len(set(ids)) == len(picks)
    for item in ids:
        assert item.version == 8
        assert item.variant == uuid.RFC_4122
        assert item.int >> 80 == request.int >> 80
    other = request_id(NOW)
    assert allocation_id(other, "0") not in ids
