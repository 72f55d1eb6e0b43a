"""The Resource Manager service: SQL persistence, scheduling transactions, leases.

Public API: :class:`ResourceManagerService` (``open(url, clock=..., options=...)``; sub-APIs
``descriptors``, ``pools``, ``policies``, ``requests``; ``sweep()``), :class:`Principal` (the
caller every mutating call is checked against), :class:`ServiceOptions` and
:data:`HEAD_REVISION` (the RM schema revision this code needs).

Clients (the workspace server, the engine) use :mod:`wharf.resource_manager.contract` instead;
:mod:`wharf.resource_manager.embedded` wraps this service for embedded mode. Invariant: the
service speaks the contract's models and errors and never imports the HTTP client or the
embedded mode (import-linter).
"""

from wharf.resource_manager.service.options import ServiceOptions
from wharf.resource_manager.service.principal import Principal
from wharf.resource_manager.service.schema import HEAD_REVISION
from wharf.resource_manager.service.service import ResourceManagerService

__all__ = ["HEAD_REVISION", "Principal", "ResourceManagerService", "ServiceOptions"]
