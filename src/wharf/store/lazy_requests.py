"""The workspace's handle on the Resource Manager's requests: connected on first use, and the
place where waiters of this process learn that resources were freed.

Invariant: :meth:`LazyRequests.release` always wakes the waiters of this process after the
release committed, so a waiter can take a freed slot at once rather than at its next poll.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING
from uuid import UUID

from wharf.core.enums import ResourceRequestRuntimeState

if TYPE_CHECKING:  # the RM's models load only when a step actually asks for resources
    from wharf.resource_manager.client.models import (
        Page as RMPage,
    )
    from wharf.resource_manager.client.models import (
        PageRequest as RMPageRequest,
    )
    from wharf.resource_manager.client.models import (
        RequestFilter,
        ResourceRequestCreate,
        ResourceRequestInfo,
    )
    from wharf.resource_manager.client.protocol import RequestsClient


class LazyRequests:
    """The RM's requests client, connected on first use (most runs never need it)."""

    def __init__(self, connect: Callable[[], RequestsClient]) -> None:
        self._connect = connect
        self._client: RequestsClient | None = None
        self._changed = threading.Condition()

    def wait_for_release(self, timeout: float) -> bool:
        """Sleep up to ``timeout`` seconds, waking early (True) when a step of this process
        releases its resources, so a waiter takes a freed slot at once, not at its next poll."""
        with self._changed:
            return self._changed.wait(timeout)

    def notify_released(self) -> None:
        with self._changed:
            self._changed.notify_all()

    @property
    def client(self) -> RequestsClient:
        if self._client is None:
            self._client = self._connect()
        return self._client

    def get(self, request_id: UUID) -> ResourceRequestInfo:
        return self.client.get(request_id)

    def list(
        self, query: RequestFilter | None = None, page: RMPageRequest | None = None
    ) -> RMPage[ResourceRequestInfo]:
        return self.client.list(query, page)

    def create(
        self, spec: ResourceRequestCreate, *, idempotency_key: str | None = None
    ) -> ResourceRequestInfo:
        return self.client.create(spec, idempotency_key=idempotency_key)

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
        self, request_id: UUID, *, idempotency_key: str | None = None
    ) -> ResourceRequestInfo:
        released = self.client.release(request_id, idempotency_key=idempotency_key)
        self.notify_released()
        return released
