"""``InProcessResourceManager``: the client interface over a service in this process (embedded
mode).

It binds one :class:`~wharf.resource_manager.service.Principal` (in embedded mode, the local
user) and forwards every call to the service, which already speaks the wire models and raises
Wharf's errors. Build it at an entry point (CLI, embedded client) and pass it down: the engine
and the workspace server only know :class:`~wharf.resource_manager.contract.ResourceManagerClient`
and must not import this module, which pulls in the service (import-linter).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from datetime import datetime
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
from wharf.resource_manager.contract.protocol import ResourceManagerClient
from wharf.resource_manager.domain import Policy, Pool, ResourceDescriptor
from wharf.resource_manager.service import Principal, ResourceManagerService, ServiceOptions
from wharf.resource_manager.service.batch import LeftQueueListener
from wharf.resource_manager.service.config_service import (
    DescriptorService,
    PolicyService,
    PoolService,
)
from wharf.resource_manager.service.request_service import RequestService


class _Descriptors:
    def __init__(self, service: DescriptorService, principal: Principal) -> None:
        self._service, self._principal = service, principal

    def get(self, name: str) -> ResourceDescriptor:
        return self._service.get(name)

    def create(
        self, descriptor: ResourceDescriptor, *, idempotency_key: str | None = None
    ) -> ResourceDescriptor:
        return self._service.create(self._principal, descriptor, idempotency_key=idempotency_key)

    def update(
        self, name: str, update: DescriptorUpdate, *, idempotency_key: str | None = None
    ) -> ResourceDescriptor:
        return self._service.update(self._principal, name, update, idempotency_key=idempotency_key)

    def delete(self, name: str, *, idempotency_key: str | None = None) -> None:
        self._service.delete(self._principal, name, idempotency_key=idempotency_key)

    def list(self) -> list[ResourceDescriptor]:
        return self._service.list()


class _Pools:
    def __init__(self, service: PoolService, principal: Principal) -> None:
        self._service, self._principal = service, principal

    def get(self, pool: str | UUID) -> Pool:
        return self._service.get(pool)

    def create(self, spec: PoolCreate, *, idempotency_key: str | None = None) -> Pool:
        return self._service.create(self._principal, spec, idempotency_key=idempotency_key)

    def update(
        self, pool: str | UUID, update: PoolUpdate, *, idempotency_key: str | None = None
    ) -> Pool:
        return self._service.update(self._principal, pool, update, idempotency_key=idempotency_key)

    def delete(self, pool: str | UUID, *, idempotency_key: str | None = None) -> None:
        self._service.delete(self._principal, pool, idempotency_key=idempotency_key)

    def queue(self, pool: str | UUID) -> list[QueueEntry]:
        return self._service.queue(pool)

    def allocations(self, pool: str | UUID) -> list[PoolAllocation]:
        return self._service.allocations(pool)

    def list(self) -> list[Pool]:
        return self._service.list()


class _Policies:
    def __init__(self, service: PolicyService, principal: Principal) -> None:
        self._service, self._principal = service, principal

    def get(self, policy: str | UUID) -> Policy:
        return self._service.get(policy)

    def create(self, spec: PolicyCreate, *, idempotency_key: str | None = None) -> Policy:
        return self._service.create(self._principal, spec, idempotency_key=idempotency_key)

    def update(
        self, policy: str | UUID, update: PolicyUpdate, *, idempotency_key: str | None = None
    ) -> Policy:
        return self._service.update(
            self._principal, policy, update, idempotency_key=idempotency_key
        )

    def delete(self, policy: str | UUID, *, idempotency_key: str | None = None) -> None:
        self._service.delete(self._principal, policy, idempotency_key=idempotency_key)

    def list(self, pool: str | UUID | None = None) -> list[Policy]:
        return self._service.list(pool)


class _Requests:
    def __init__(self, service: RequestService, principal: Principal) -> None:
        self._service, self._principal = service, principal

    def on_left_queue(self, listener: LeftQueueListener) -> None:
        """In-process only: ``listener`` hears of every request this process's commits move
        out of the queue, right after the commit (see ``BatchRunner.on_left_queue``)."""
        self._service.on_left_queue(listener)

    def unannounced_marker(self) -> Hashable:
        """In-process only: changes whenever requests may have left the queue without
        :meth:`on_left_queue` listeners hearing of it (see ``RequestService``)."""
        return self._service.unannounced_marker()

    def create(
        self, spec: ResourceRequestCreate, *, idempotency_key: str | None = None
    ) -> ResourceRequestInfo:
        return self._service.create(self._principal, spec, idempotency_key=idempotency_key)

    def get(self, request_id: UUID) -> ResourceRequestInfo:
        return self._service.get(request_id)

    def renew(
        self,
        request_id: UUID,
        lease_seconds: int,
        runtime_state: ResourceRequestRuntimeState | None = None,
        *,
        idempotency_key: str | None = None,
    ) -> ResourceRequestInfo:
        return self._service.renew(
            self._principal,
            request_id,
            lease_seconds,
            runtime_state,
            idempotency_key=idempotency_key,
        )

    def renew_many(self, renewals: Sequence[RenewalItem]) -> list[ResourceRequestInfo | WharfError]:
        return self._service.renew_many(self._principal, renewals)

    def release(
        self,
        request_id: UUID,
        *,
        idempotency_key: str | None = None,
        by: str | None = None,
        manual: bool = False,
    ) -> ResourceRequestInfo:
        return self._service.release(
            self._principal, request_id, idempotency_key=idempotency_key, by=by, manual=manual
        )

    def cancel(
        self,
        request_id: UUID,
        *,
        idempotency_key: str | None = None,
        by: str | None = None,
        manual: bool = False,
    ) -> ResourceRequestInfo:
        return self._service.cancel(
            self._principal, request_id, idempotency_key=idempotency_key, by=by, manual=manual
        )

    def explain(self, request_id: UUID) -> ExplanationInfo:
        return self._service.explain(request_id)

    def list(
        self, query: RequestFilter | None = None, page: PageRequest | None = None
    ) -> Page[ResourceRequestInfo]:
        return self._service.list(query, page)


class InProcessResourceManager:
    """A :class:`ResourceManagerClient` over ``service``, acting as ``principal``."""

    def __init__(
        self,
        service: ResourceManagerService,
        principal: Principal,
        *,
        owns_service: bool = False,
    ) -> None:
        self._service = service
        self._owns_service = owns_service
        self.principal = principal
        self._descriptors = _Descriptors(service.descriptors, principal)
        self._pools = _Pools(service.pools, principal)
        self._policies = _Policies(service.policies, principal)
        self._requests = _Requests(service.requests, principal)

    @classmethod
    def open(
        cls,
        url: str,
        principal: Principal,
        *,
        clock: Callable[[], datetime] | None = None,
        options: ServiceOptions | None = None,
    ) -> InProcessResourceManager:
        """Open (and migrate) the RM tables at ``url``; :meth:`close` closes the service too."""
        service = ResourceManagerService.open(url, clock=clock, options=options)
        return cls(service, principal, owns_service=True)

    @property
    def service(self) -> ResourceManagerService:
        return self._service

    @property
    def descriptors(self) -> _Descriptors:
        return self._descriptors

    @property
    def pools(self) -> _Pools:
        return self._pools

    @property
    def policies(self) -> _Policies:
        return self._policies

    @property
    def requests(self) -> _Requests:
        return self._requests

    def as_principal(self, principal: Principal) -> InProcessResourceManager:
        """Another client over the same service, acting as ``principal``."""
        return InProcessResourceManager(self._service, principal)

    def close(self) -> None:
        if self._owns_service:
            self._service.close()


def _conforms(client: InProcessResourceManager) -> ResourceManagerClient:
    return client  # mypy proves that InProcessResourceManager implements the protocol
