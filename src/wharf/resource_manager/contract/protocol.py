"""``ResourceManagerClient``: the interface the workspace server and the engine use to reach the
Resource Manager, whichever way it runs (in process, or over HTTP); one small client per
resource: ``descriptors``, ``pools``, ``policies``, ``requests``.

Invariants (every implementation): the caller's identity is bound to the client, never passed
per call, and it owns the requests it creates; every mutating method takes an optional
``idempotency_key`` (a retried call with the same key returns the first result and never
applies the change twice); clients send durations, never timestamps, and every instant returned
is the server's; errors are Wharf's (``EntityNotFoundError``, ``EntityExistsError``,
``IllegalOperationError`` with :class:`~.errors.PermissionDeniedError`, ``InputError``,
``StoreError``/``StoreUnavailableError``), no library exception escapes; pools and policies are
addressed by id or name, descriptors by name, requests by id.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol
from uuid import UUID

from wharf.core.enums import ResourceRequestRuntimeState
from wharf.core.errors import WharfError
from wharf.resource_manager.contract.models import (
    DescriptorUpdate,
    ExplanationInfo,
    Page,
    PageRequest,
    PolicyCreate,
    PolicyUpdate,
    PoolAllocation,
    PoolCreate,
    PoolUpdate,
    QueueEntry,
    RenewalItem,
    RequestFilter,
    ResourceRequestCreate,
    ResourceRequestInfo,
)
from wharf.resource_manager.domain import Policy, Pool, ResourceDescriptor


class DescriptorsClient(Protocol):
    def get(self, name: str) -> ResourceDescriptor: ...

    def create(
        self, descriptor: ResourceDescriptor, *, idempotency_key: str | None = None
    ) -> ResourceDescriptor: ...

    def update(
        self, name: str, update: DescriptorUpdate, *, idempotency_key: str | None = None
    ) -> ResourceDescriptor: ...

    def delete(self, name: str, *, idempotency_key: str | None = None) -> None: ...

    def list(self) -> list[ResourceDescriptor]: ...


class PoolsClient(Protocol):
    def get(self, pool: str | UUID) -> Pool: ...

    def create(self, spec: PoolCreate, *, idempotency_key: str | None = None) -> Pool: ...

    def update(
        self, pool: str | UUID, update: PoolUpdate, *, idempotency_key: str | None = None
    ) -> Pool: ...

    def delete(self, pool: str | UUID, *, idempotency_key: str | None = None) -> None:
        """Refused (IllegalOperationError) while the pool has live requests."""

    def queue(self, pool: str | UUID) -> list[QueueEntry]:
        """Pending requests queued in the pool, in queue order."""

    def allocations(self, pool: str | UUID) -> list[PoolAllocation]:
        """Allocations held (allocated or preempting) in the pool."""

    def list(self) -> list[Pool]: ...


class PoliciesClient(Protocol):
    def get(self, policy: str | UUID) -> Policy: ...

    def create(self, spec: PolicyCreate, *, idempotency_key: str | None = None) -> Policy:
        """Refused (InputError) when Σ reserved would exceed a class's capacity."""

    def update(
        self, policy: str | UUID, update: PolicyUpdate, *, idempotency_key: str | None = None
    ) -> Policy: ...

    def delete(self, policy: str | UUID, *, idempotency_key: str | None = None) -> None: ...

    def list(self, pool: str | UUID | None = None) -> list[Policy]: ...


class RequestsLink(Protocol):
    """What a workspace offers of its steps' requests: get, list, renew, release. The RM's own
    :class:`RequestsClient` (embedded mode) and a workspace server's request routes (team mode,
    :class:`wharf.execution.resources.team.WorkspaceRequests`) both do."""

    def get(self, request_id: UUID) -> ResourceRequestInfo: ...

    def list(
        self, query: RequestFilter | None = None, page: PageRequest | None = None
    ) -> Page[ResourceRequestInfo]: ...

    def renew(
        self,
        request_id: UUID,
        lease_seconds: int,
        runtime_state: ResourceRequestRuntimeState | None = None,
        *,
        idempotency_key: str | None = None,
    ) -> ResourceRequestInfo:
        """Extend the lease to ``lease_seconds`` from now (server time) and record the runtime
        state. A terminal request comes back unchanged; so does an already lapsed one, which is
        then expired (or cancelled, if it was pending) instead of renewed."""

    def release(
        self, request_id: UUID, *, idempotency_key: str | None = None
    ) -> ResourceRequestInfo:
        """Give the allocation back (pending requests are cancelled)."""


class RequestsClient(RequestsLink, Protocol):
    def create(
        self, spec: ResourceRequestCreate, *, idempotency_key: str | None = None
    ) -> ResourceRequestInfo:
        """Create a request; it comes back allocated when it fit at once, else pending."""

    def renew_many(self, renewals: Sequence[RenewalItem]) -> list[ResourceRequestInfo | WharfError]:
        """Renew each item as :meth:`renew` would, in as few round trips and transactions as
        the implementation can; one answer per item, in order: the request, or the error
        :meth:`renew` would have raised for that item alone (one bad id never fails the
        others). Errors of the whole call (the RM unreachable, bad credentials) are raised."""

    def release(
        self,
        request_id: UUID,
        *,
        idempotency_key: str | None = None,
        by: str | None = None,
        manual: bool = False,
    ) -> ResourceRequestInfo:
        """Give the allocation back (pending requests are cancelled). ``by``: who, when not
        its holder (``user 'alice' (project admin)``), for its status reason (an RM
        administrator releasing another principal's request is named anyway); ``manual``: an
        operator's command, whose caller is named even on a request it made itself."""

    def cancel(
        self,
        request_id: UUID,
        *,
        idempotency_key: str | None = None,
        by: str | None = None,
        manual: bool = False,
    ) -> ResourceRequestInfo:
        """Withdraw a pending request (``by``, ``manual``: as for :meth:`release`)."""

    def explain(self, request_id: UUID) -> ExplanationInfo: ...


class ResourceManagerClient(Protocol):
    """Implemented by :class:`~wharf.resource_manager.embedded.inprocess.InProcessResourceManager`
    (embedded mode, over the service in this process) and
    :class:`~wharf.resource_manager.client.http.HttpResourceManager` (team and production)."""

    @property
    def descriptors(self) -> DescriptorsClient: ...

    @property
    def pools(self) -> PoolsClient: ...

    @property
    def policies(self) -> PoliciesClient: ...

    @property
    def requests(self) -> RequestsClient: ...

    def close(self) -> None:
        """Release connections; the client must not be used afterwards."""
