"""A step whose lease expired says "resources lost", and so does its run: never "Stopped on
request." (nobody asked for a stop)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import FakeClock
from tests.execution.resources.test_wait_room_embedded import license_request
from wharf.core.enums import ExecutionStatus
from wharf.execution.dag_runner import DagOutcome
from wharf.execution.dynamic import DynamicOutcome
from wharf.execution.launcher import StepOutcome
from wharf.execution.lost_resources import (
    RESOURCES_LOST,
    RM_UNREACHABLE,
    lease_lost,
    lost_resources,
    reclaimed,
    reclaimed_resources,
    stopped_steps,
)
from wharf.execution.resources.embedded import LazyResourceManager
from wharf.execution.resources.pairing import fixed_account
from wharf.execution.resources.requester import StepRequester
from wharf.resource_manager.embedded.inprocess import InProcessResourceManager
from wharf.resource_manager.service.principal import Principal
from wharf.sdk.pools import ensure_pool

CANCELLED = ExecutionStatus.CANCELLED


def _lost(name: str) -> StepOutcome:
    return StepOutcome(name, CANCELLED, reason=f"Cancelling: {RESOURCES_LOST}.")


def test_a_run_whose_step_lost_its_lease_failed_for_that_reason() -> None:
    steps = {"hold": _lost("hold"), "done": StepOutcome("done", ExecutionStatus.COMPLETED)}
    expected = (ExecutionStatus.FAILED, f"Step(s) hold: {RESOURCES_LOST}.")
    assert DagOutcome(steps=steps).final_status() == expected
    assert DynamicOutcome(steps=steps).final_status() == expected


def test_a_stop_request_still_reads_as_one() -> None:
    steps = {"hold": _lost("hold")}
    assert DagOutcome(steps=steps, stop_requested=True).final_status()[0] is ExecutionStatus.STOPPED
    stopped = {"s": StepOutcome("s", CANCELLED, reason="Stopped on request.")}
    assert DagOutcome(steps=stopped).final_status() == (
        ExecutionStatus.STOPPED,
        "Stopped on request.",
    )
    assert lost_resources([("s", CANCELLED, "Cancelling: preempted.")]) is None


def test_a_run_whose_step_was_preempted_says_so_not_stopped_on_request() -> None:
    """Nobody asked for a stop: the Resource Manager took the step's resources for another."""
    why = reclaimed(uuid.uuid4(), "Preempted to free resources for request r: higher priority.")
    steps = {
        "train": StepOutcome("train", CANCELLED, reason=f"Cancelling: {why}."),
        "done": StepOutcome("done", ExecutionStatus.COMPLETED),
    }
    expected = (
        ExecutionStatus.STOPPED,
        "Step(s) train cancelled: their resources were reclaimed by the Resource Manager.",
    )
    assert DagOutcome(steps=steps).final_status() == expected
    assert DynamicOutcome(steps=steps).final_status() == expected
    # A stop asked for here, or another step stopped from elsewhere, still reads as a stop.
    stopped = StepOutcome("s", ExecutionStatus.STOPPED, reason="Stopped on request.")
    assert DagOutcome(steps=steps, stop_requested=True).final_status() == (
        ExecutionStatus.STOPPED,
        "Stopped on request.",
    )
    assert DagOutcome(steps={**steps, "s": stopped}).final_status()[1] == "Stopped on request."
    assert reclaimed_resources([("done", ExecutionStatus.COMPLETED, None)]) is None


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def rm(tmp_path: Path, clock: FakeClock) -> Iterator[InProcessResourceManager]:
    client = InProcessResourceManager.open(
        f"sqlite:///{tmp_path / 'rm.db'}", Principal(name="alice", admin=True), clock=clock
    )
    ensure_pool(client, "licenses", {"license": 1}, account="alice")
    yield client
    client.close()


def test_a_renewal_that_finds_the_lease_expired_says_resources_lost(
    rm: InProcessResourceManager, clock: FakeClock
) -> None:
    held = rm.requests.create(license_request().model_copy(update={"lease_seconds": 10})).id
    clock.advance(11)  # no renewal reached the Resource Manager in time
    requester = StepRequester(
        None,  # type: ignore[arg-type]  # renewals read no store
        LazyResourceManager(lambda: rm, watch_seconds=None),
        fixed_account(None),
    )
    # no renewal failed to reach the RM: the step's heartbeats did not come, not an RM outage
    assert requester.renew(held, 10) == lease_lost(StepRequester.MISSED_RENEWALS)
    assert "Resource Manager" not in StepRequester.MISSED_RENEWALS


def test_a_run_whose_steps_lost_their_leases_says_what_kept_the_renewals() -> None:
    why = lease_lost(RM_UNREACHABLE)
    steps = [("a", CANCELLED, f"Cancelling: {why}."), ("b", CANCELLED, f"Cancelling: {why}.")]
    assert lost_resources(steps) == f"Step(s) a, b: {why}."
    mixed = [*steps, ("c", CANCELLED, f"Cancelling: {lease_lost('for another reason')}.")]
    assert lost_resources(mixed) == f"Step(s) a, b, c: {RESOURCES_LOST}."


def test_a_run_whose_step_s_request_was_released_by_hand_names_it_not_a_stop() -> None:
    """`wharf request release` of a running step's allocation: the run ended stopped "Stopped
    on request.", though nobody asked it to stop."""
    why = "Cancelling: Released by user 'bob' (its holder).\nmore"
    steps = {
        "train": StepOutcome("train", CANCELLED, reason=why),
        "done": StepOutcome("done", ExecutionStatus.COMPLETED),
    }
    expected = (
        ExecutionStatus.STOPPED,
        "Step 'train' cancelled: Cancelling: Released by user 'bob' (its holder).",
    )
    assert DagOutcome(steps=steps).final_status() == expected
    assert DynamicOutcome(steps=steps).final_status() == expected
    assert stopped_steps([("done", ExecutionStatus.COMPLETED, None)]) is None
