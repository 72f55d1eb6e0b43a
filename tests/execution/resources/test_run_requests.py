"""What a run leaves at its end (:mod:`wharf.execution.resources.run_requests`) and how the
port releases it (:meth:`RoomedResources.release_left`), against the real in-process Resource
Manager."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.execution.clocks import Clock
from tests.execution.resources.test_wait_room_embedded import (  # noqa: F401 (fixture)
    embedded_rm,
    license_request,
)
from wharf.core.enums import ExecutionStatus
from wharf.core.enums import ResourceRequestStatus as S
from wharf.core.errors import StoreUnavailableError
from wharf.execution.resources.embedded import EmbeddedStepResources, LazyResourceManager
from wharf.execution.resources.pairing import fixed_account
from wharf.execution.resources.requester import StepRequester
from wharf.execution.resources.run_requests import RunRequests
from wharf.resource_manager.embedded.inprocess import InProcessResourceManager
from wharf.store.models import StepRunRecord


def record(status: ExecutionStatus, request_id: uuid.UUID | None) -> StepRunRecord:
    """A step run with only what the run's requests read of it."""
    return StepRunRecord.model_construct(
        id=uuid.uuid4(), status=status, resource_request_id=request_id
    )


def test_a_run_remembers_its_requests_and_which_steps_are_still_queued() -> None:
    requests = RunRequests()
    first, second = uuid.uuid4(), uuid.uuid4()
    a, b = record(ExecutionStatus.QUEUED, first), record(ExecutionStatus.QUEUED, second)
    requests.created(a)
    requests.created(b)
    requests.created(record(ExecutionStatus.RUNNING, None))  # not queued: nothing to settle
    requests.moved_on(a)
    assert requests.request_ids == [first, second]  # a started step's request is settled too
    assert requests.queued == [b.id]


@pytest.fixture
def port(embedded_rm: InProcessResourceManager) -> Iterator[EmbeddedStepResources]:  # noqa: F811
    requests = LazyResourceManager(lambda: embedded_rm, watch_seconds=None)
    yield EmbeddedStepResources(
        requests,
        requester=StepRequester(None, requests, fixed_account(None)),  # type: ignore[arg-type]
    )


def test_releasing_what_a_run_left_frees_held_and_pending_requests_only(
    embedded_rm: InProcessResourceManager,  # noqa: F811
    port: EmbeddedStepResources,
) -> None:
    rm = embedded_rm.requests
    held = rm.create(license_request()).id
    pending = rm.create(license_request()).id
    done = rm.create(license_request()).id  # pending until ``held`` is released
    rm.cancel(done)
    assert [rm.get(i).status for i in (held, pending, done)] == [
        S.ALLOCATED,
        S.PENDING,
        S.CANCELLED,
    ]
    clock = Clock()
    port.release_left([held, pending, done, held], clock=clock, sleep=clock.sleep)
    assert rm.get(held).status is S.RELEASED
    assert rm.get(pending).status is S.CANCELLED  # never allocated to the ended run
    assert rm.get(done).status is S.CANCELLED
    assert clock.sleeps == []


def test_releasing_what_a_run_left_waits_out_a_short_outage(
    embedded_rm: InProcessResourceManager,  # noqa: F811
    port: EmbeddedStepResources,
) -> None:
    rm = embedded_rm.requests
    held = rm.create(license_request()).id
    real_list = rm.list
    outage = [StoreUnavailableError("restarting"), StoreUnavailableError("restarting")]

    def flaky_list(query=None, page=None):  # type: ignore[no-untyped-def]
        if outage:
            raise outage.pop()
        return real_list(query, page)

    rm.list = flaky_list  # type: ignore[method-assign]
    clock = Clock()
    port.release_left([held], clock=clock, sleep=clock.sleep)
    assert rm.get(held).status is S.RELEASED
    assert len(clock.sleeps) == 2


def test_releasing_what_a_run_left_gives_up_quietly_after_a_long_outage(
    embedded_rm: InProcessResourceManager,  # noqa: F811
    port: EmbeddedStepResources,
) -> None:
    rm = embedded_rm.requests
    held = rm.create(license_request()).id

    def down(query=None, page=None):  # type: ignore[no-untyped-def]
        raise StoreUnavailableError("down")

    real_list = rm.list
    rm.list = down  # type: ignore[method-assign]
    clock = Clock()
    port.release_left([held], clock=clock, sleep=clock.sleep)  # logged, not raised
    rm.list = real_list  # type: ignore[method-assign]
    assert rm.get(held).status is S.ALLOCATED  # its lease lapses on its own
    assert 25 <= sum(clock.sleeps) <= 31
