"""The step-resources port's shared behaviour (:mod:`wharf.execution.resources.waiting`): when a
step that held resources ended, the room is checked exactly when the release was not made
through this process's own requests client (team mode, or a step's own process)."""

from __future__ import annotations

import uuid
from typing import Any

from tests.execution.resources.test_wait_room import FakeRM, room_for
from wharf.core.enums import ResourceRequestStatus as S
from wharf.execution.resources.waiting import RoomedResources


def no_requests() -> Any:
    raise AssertionError("ending a step never renews")


def test_a_step_ended_on_the_server_wakes_this_process_waiters() -> None:
    waiting = uuid.uuid4()
    rm = FakeRM({waiting: S.PENDING})
    resources = RoomedResources(no_requests, room_for(rm), releases_seen_here=False)
    with resources.room.enter(waiting) as ticket:
        rm.statuses[waiting] = S.ALLOCATED
        resources.step_ended(elsewhere=False)
        woken = ticket.wait(0)
    assert woken is not None and woken.status is S.ALLOCATED


def test_a_release_seen_here_costs_no_lookup_but_one_elsewhere_does() -> None:
    waiting = uuid.uuid4()
    rm = FakeRM({waiting: S.PENDING})
    resources = RoomedResources(no_requests, room_for(rm), releases_seen_here=True)
    with resources.room.enter(waiting) as ticket:
        rm.statuses[waiting] = S.ALLOCATED
        resources.step_ended(elsewhere=False)  # its own client woke the room already
        assert rm.lookups == [] and ticket.wait(0) is None
        resources.step_ended(elsewhere=True)  # the step's own process released
        assert len(rm.lookups) == 1
        woken = ticket.wait(0)
    assert woken is not None and woken.status is S.ALLOCATED
