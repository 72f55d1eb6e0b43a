"""The embedded adapter of the step-resources port: a Resource Manager this process reaches
itself (in-process by default, or whatever ``WharfConfig.resource_manager`` names).

Owns :class:`LazyResourceManager` (the RM client, connected on first use),
:class:`EmbeddedStepResources` (the port over it) and :func:`connect_configured`. The store is
never involved: the workspace keeps the link for ``wharf request`` and ``Client``. Invariant:
a release through :class:`LazyResourceManager` wakes the room after it committed, so a step of
this process that ends needs no extra check.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING
from uuid import UUID

from wharf.config.flavors import resource_manager_connector
from wharf.config.global_config import WharfConfig
from wharf.core.enums import ResourceRequestRuntimeState
from wharf.execution.resources.pairing import fixed_account
from wharf.execution.resources.port import StepResources
from wharf.execution.resources.requester import StepRequester
from wharf.execution.resources.wait_room import (
    WATCH_SECONDS,
    AnnouncesLeftQueue,
    MarksUnannounced,
    WaitRoom,
    left_queue_of,
)
from wharf.execution.resources.waiting import RoomedResources
from wharf.store.models import StepRunCreate, UserRecord
from wharf.store.ports import Store

if TYPE_CHECKING:  # the RM's models load only when a step actually asks for resources
    from wharf.core.paging import Page, PageRequest
    from wharf.resource_manager.contract.models import (
        RequestFilter,
        ResourceRequestCreate,
        ResourceRequestInfo,
    )
    from wharf.resource_manager.contract.protocol import (
        RequestsClient,
        RequestsLink,
        ResourceManagerClient,
    )


class LazyResourceManager:
    """The Resource Manager, connected on first use (most runs never need it), and its requests
    client as the workspace's requests link, telling the process's
    :class:`~wharf.execution.resources.wait_room.WaitRoom` what it learns: requests created,
    released (checked, or announced by an in-process RM), or announced as having left the
    queue."""

    def __init__(
        self,
        connect: Callable[[], ResourceManagerClient],
        *,
        watch_seconds: float | None = WATCH_SECONDS,
    ) -> None:
        self._connect = connect
        self._client: ResourceManagerClient | None = None
        self._announced = False
        """The client tells the wait room of allocations itself (no check after a release)."""
        self.wait_room = WaitRoom(
            left_queue_of(self.list),
            watch_seconds=watch_seconds,
            unannounced=self._unannounced_marker,
        )

    def _unannounced_marker(self) -> Hashable | None:
        client = self._client
        if client is not None and self._announced and isinstance(client.requests, MarksUnannounced):
            return client.requests.unannounced_marker()
        return None

    def notify_released(self) -> None:
        """Resources were freed (in this process or, if the caller knows, elsewhere): wake the
        waiters of this process whose request was allocated or ended meanwhile."""
        self.wait_room.check()

    @property
    def resource_manager(self) -> ResourceManagerClient:
        if self._client is None:
            client = self._connect()
            requests = client.requests
            if isinstance(requests, AnnouncesLeftQueue):
                requests.on_left_queue(self.wait_room.wake_left)
                self._announced = True
            self._client = client
        return self._client

    @property
    def client(self) -> RequestsClient:
        return self.resource_manager.requests

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
            self._announced = False

    def get(self, request_id: UUID) -> ResourceRequestInfo:
        return self.client.get(request_id)

    def list(
        self, query: RequestFilter | None = None, page: PageRequest | None = None
    ) -> Page[ResourceRequestInfo]:
        return self.client.list(query, page)

    def create(
        self, spec: ResourceRequestCreate, *, idempotency_key: str | None = None
    ) -> ResourceRequestInfo:
        sent = time.monotonic()
        created = self.client.create(spec, idempotency_key=idempotency_key)
        # The lease counts from the RM's clock, at the latest when its answer left: take off
        # the time the call took, so the room never believes in more lease than there is.
        lease = math.inf if spec.lease_seconds is None else float(spec.lease_seconds)
        self.wait_room.created(created, lease - (time.monotonic() - sent))
        return created

    def renew(
        self,
        request_id: UUID,
        lease_seconds: int,
        runtime_state: ResourceRequestRuntimeState | None = None,
        *,
        idempotency_key: str | None = None,
    ) -> ResourceRequestInfo:
        return self.client.renew(
            request_id, lease_seconds, runtime_state, idempotency_key=idempotency_key
        )

    def release(
        self, request_id: UUID, *, idempotency_key: str | None = None, by: str | None = None
    ) -> ResourceRequestInfo:
        released = self.client.release(request_id, idempotency_key=idempotency_key, by=by)
        if not self._announced:
            self.notify_released()
        return released


class EmbeddedStepResources(RoomedResources):
    """The port over a Resource Manager this process reaches itself; its ``request``,
    ``renew`` and ``release`` are the engine's explicit calls, made through
    :mod:`.requester`; it owns ``requests`` and closes it."""

    def __init__(self, requests: LazyResourceManager, *, requester: StepRequester) -> None:
        super().__init__(lambda: requests, requests.wait_room, releases_seen_here=True)
        self.requests = requests
        self._requester = requester

    makes_requests = True

    def request(self, step_id: UUID, step: StepRunCreate) -> UUID | None:
        return self._requester.request(step_id, step)

    def renew(self, request_id: UUID, liveness_timeout_seconds: float) -> str | None:
        return self._requester.renew(request_id, liveness_timeout_seconds)

    def release(self, request_id: UUID, *, by: str | None = None) -> None:
        self._requester.release(request_id, by=by)  # through ``requests``: wakes the room

    def close(self) -> None:
        self.requests.close()


def connect_configured(
    store: Store, config: WharfConfig, user: UserRecord | None, account: str
) -> EmbeddedStepResources | None:
    """Pair a SQL ``store`` with the Resource Manager ``config`` names (embedded by default) and
    give the port over it. A store reached over REST is paired by its server instead (None), as
    is a workspace whose config says ``none``."""
    if config.resource_manager == "none" or config.server_url:
        return None
    resource_manager_connector(config.resource_manager, load=False)  # fail early on a typo

    def connect() -> ResourceManagerClient:
        connector = resource_manager_connector(config.resource_manager)
        client: ResourceManagerClient = connector(
            config.store_url, account, config.local_step_slots
        )
        return client

    requests = LazyResourceManager(connect)
    requester = StepRequester(store, requests, fixed_account(user))
    return EmbeddedStepResources(requests, requester=requester)


def _links(requests: LazyResourceManager) -> RequestsLink:
    return requests  # mypy proves that it is a requests link (the workspace's, embedded)


def _conforms(resources: EmbeddedStepResources) -> StepResources:
    return resources  # mypy proves that the embedded adapter implements the port
