"""What both adapters of the step-resources port share: waiting in the room, marking started.

Owns :class:`RoomedResources`: a requests client (renewals) with the process's
:class:`~wharf.execution.resources.wait_room.WaitRoom`. A waiter polls by renewing its pending
request (:class:`~wharf.execution.allocation.AllocationWaiter`) and sits in the room between
polls, so a release of this process wakes it at once. Invariant: after a step that held
resources ended, the room is checked unless the release was made through this process's own
requests client (which checks, or is told by its in-process Resource Manager, itself).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Protocol
from uuid import UUID

from wharf.config.settings import ResourceSettings
from wharf.core.enums import ResourceRequestRuntimeState
from wharf.execution.allocation import AllocationWaiter
from wharf.execution.resources.holders_first import HoldersFirst
from wharf.execution.resources.wait_room import RequestState, WaitRoom
from wharf.store.models import StepRunCreate

if TYPE_CHECKING:
    from wharf.resource_manager.contract.models import ResourceRequestInfo


class Renews(Protocol):
    def renew(
        self,
        request_id: UUID,
        lease_seconds: int,
        runtime_state: ResourceRequestRuntimeState | None = None,
    ) -> ResourceRequestInfo: ...


class RoomedResources:
    """Waits with ``room`` between renewals through ``requests`` (called when first needed);
    ``releases_seen_here``: the step's releases go through this process's own requests client,
    which wakes the room itself, so only a release elsewhere needs a check."""

    def __init__(
        self,
        requests: Callable[[], Renews],
        room: WaitRoom,
        *,
        releases_seen_here: bool,
    ) -> None:
        self._requests = requests
        self._seen_here = releases_seen_here
        self.room = room

    @property
    def holders(self) -> HoldersFirst:
        return self.room.holders

    def wait(
        self,
        request_id: UUID,
        settings: ResourceSettings,
        *,
        clock: Callable[[], datetime],
        sleep: Callable[[float], object],
        on_pending: Callable[[RequestState], object] | None = None,
    ) -> RequestState:
        waiter = AllocationWaiter(
            self._requests(), clock, sleep, room=self.room, on_pending=on_pending
        )
        return waiter.wait(request_id, settings)

    def mark_started(self, request_id: UUID, settings: ResourceSettings) -> ResourceRequestInfo:
        return self._requests().renew(
            request_id,
            settings.initialization_lease_seconds,
            ResourceRequestRuntimeState.SUBMITTED,
        )

    makes_requests = False

    def request(self, step_id: UUID, step: StepRunCreate) -> UUID | None:
        """None here: a team's server makes its steps' requests (the embedded adapter
        overrides it)."""
        return None

    def renew(self, request_id: UUID, liveness_timeout_seconds: float) -> str | None:
        """None here: a team's server renews its steps' requests (overridden likewise)."""
        return None

    def release(self, request_id: UUID) -> None:
        """Nothing here: the releases of a team's steps are its server's (overridden likewise)."""

    def step_ended(self, *, elsewhere: bool) -> None:
        if elsewhere or not self._seen_here:
            self.room.check()
