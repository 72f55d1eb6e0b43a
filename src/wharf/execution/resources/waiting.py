"""What both adapters of the step-resources port share: waiting in the room, marking started,
releasing what a run left.

Owns :class:`RoomedResources`: a requests link (renew, list, release) with the process's
:class:`~wharf.execution.resources.wait_room.WaitRoom`, in which a waiter
(:class:`~wharf.execution.allocation.AllocationWaiter`) sits between polls. Invariant: after a
step that held resources ended, the room is checked unless the release was made through this
process's own requests client (which wakes the room itself).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Protocol
from uuid import UUID

from wharf.config.settings import ResourceSettings
from wharf.core.enums import ResourceRequestRuntimeState, ResourceRequestStatus
from wharf.core.errors import WharfError
from wharf.execution.allocation import PENDING_LEASE_MARGIN_SECONDS, AllocationWaiter, WaitStop
from wharf.execution.outages import retry_through_outage
from wharf.execution.resources.holders_first import HoldersFirst
from wharf.execution.resources.wait_room import IDS_PER_LIST, RequestState, WaitRoom
from wharf.store.models import StepRunCreate

if TYPE_CHECKING:
    from wharf.resource_manager.contract.models import ResourceRequestInfo
    from wharf.resource_manager.contract.protocol import RequestsLink

logger = logging.getLogger(__name__)

HELD = (
    ResourceRequestStatus.PENDING,
    ResourceRequestStatus.ALLOCATED,
    ResourceRequestStatus.PREEMPTING,
)
"""Statuses of a request that still holds a place in the queue or capacity."""
SETTLE_PATIENCE_SECONDS = 30.0
"""How long the end of a run waits for the Resource Manager to release what its steps left."""


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
        requests: Callable[[], RequestsLink],
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
        stop: WaitStop | None = None,
    ) -> RequestState:
        waiter = AllocationWaiter(
            self._requests(), clock, sleep, room=self.room, on_pending=on_pending, stop=stop
        )
        return waiter.wait(request_id, settings)

    def mark_started(
        self,
        request_id: UUID,
        settings: ResourceSettings,
        *,
        clock: Callable[[], datetime],
        sleep: Callable[[float], object],
    ) -> ResourceRequestInfo:
        """Renewed through an outage (:mod:`wharf.execution.outages`) for as long as the lease
        of the last poll surely lasts."""
        requests = self._requests()
        return retry_through_outage(
            lambda: requests.renew(
                request_id,
                settings.initialization_lease_seconds,
                ResourceRequestRuntimeState.SUBMITTED,
            ),
            what=f"mark resource request {request_id} started",
            patience=PENDING_LEASE_MARGIN_SECONDS,
            clock=clock,
            sleep=sleep,
        )

    def release_left(
        self,
        request_ids: Iterable[UUID],
        *,
        clock: Callable[[], datetime],
        sleep: Callable[[float], object],
    ) -> None:
        """Release those of ``request_ids`` that are still pending or held (their run ended):
        one lookup per :data:`IDS_PER_LIST`, a release for each found, each retried through a
        short outage; a failure is logged (the leases lapse on their own)."""
        ids = list(dict.fromkeys(request_ids))
        if not ids:
            return
        from wharf.resource_manager.contract.models import PageRequest, RequestFilter

        requests = self._requests()
        patience = SETTLE_PATIENCE_SECONDS
        for start in range(0, len(ids), IDS_PER_LIST):
            chunk = tuple(ids[start : start + IDS_PER_LIST])
            query = RequestFilter(ids=chunk, status=HELD)
            try:
                page = retry_through_outage(
                    lambda: requests.list(query, PageRequest(size=len(chunk))),  # noqa: B023
                    what="look up the resource requests left by a run",
                    patience=patience,
                    clock=clock,
                    sleep=sleep,
                )
                for request in page.items:
                    retry_through_outage(
                        lambda: requests.release(request.id),  # noqa: B023 (called at once)
                        what=f"release resource request {request.id}",
                        patience=patience,
                        clock=clock,
                        sleep=sleep,
                    )
            except WharfError as exc:
                logger.warning("Could not release the resource requests of a run: %s", exc)

    makes_requests = False

    def request(self, step_id: UUID, step: StepRunCreate) -> UUID | None:
        """None here: a team's server makes its steps' requests (the embedded adapter
        overrides it)."""
        return None

    def renew(self, request_id: UUID, liveness_timeout_seconds: float) -> str | None:
        """None here: a team's server renews its steps' requests (overridden likewise)."""
        return None

    def release(self, request_id: UUID, *, by: str | None = None) -> None:
        """Nothing here: the releases of a team's steps are its server's (overridden likewise)."""

    def step_ended(self, *, elsewhere: bool) -> None:
        if elsewhere or not self._seen_here:
            self.room.check()
