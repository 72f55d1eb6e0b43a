"""The team adapter of the step-resources port: a workspace server's request routes.

Owns :class:`TeamStepResources`. The server makes a queued step's request when the step run is
created, renews it on the step's heartbeats and releases it with the step's final status (see
:mod:`wharf.server.resource_manager`); this process polls and marks started through the
server's ``/api/v1/resource_requests/{id}/renew`` route (the REST store's requests repository)
and keeps its own wait room, checked with one list call whenever a step of this process that
held resources ended, since the release happened on the server.
"""

from __future__ import annotations

from wharf.execution.resources.port import StepResources
from wharf.execution.resources.wait_room import WaitRoom, left_queue_of
from wharf.execution.resources.waiting import RoomedResources
from wharf.store.ports import ResourceRequestRepository


class TeamStepResources(RoomedResources):
    """The port over a workspace server's ``requests`` (see the module docstring)."""

    def __init__(self, requests: ResourceRequestRepository) -> None:
        super().__init__(
            lambda: requests, WaitRoom(left_queue_of(requests.list)), releases_seen_here=False
        )


def _conforms(resources: TeamStepResources) -> StepResources:
    return resources  # mypy proves that the team adapter implements the port
