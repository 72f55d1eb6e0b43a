"""The Resource Manager's client side: the interface, its wire models and errors, and helpers.

Public API:

- :class:`ResourceManagerClient` (with :class:`DescriptorsClient`, :class:`PoolsClient`,
  :class:`PoliciesClient`, :class:`RequestsClient`) — what the workspace server and the engine
  use; implemented in-process
  (:class:`wharf.resource_manager.client.inprocess.InProcessResourceManager`, embedded mode)
  and over HTTP;
- :mod:`.models` — wire models shared with the HTTP API;
- :class:`PermissionDeniedError`;
- :func:`ensure_local_pool` and :func:`detect_machine` — the embedded ``local`` pool.

The in-process implementation is deliberately not imported here: it depends on the service,
which code importing this package (the workspace server, the engine) must not reach.
"""

from wharf.resource_manager.client.errors import PermissionDeniedError
from wharf.resource_manager.client.local_pool import ensure_local_pool, local_pool_spec
from wharf.resource_manager.client.machine import Gpu, Machine, detect_machine
from wharf.resource_manager.client.protocol import (
    DescriptorsClient,
    PoliciesClient,
    PoolsClient,
    RequestsClient,
    ResourceManagerClient,
)

__all__ = [
    "DescriptorsClient",
    "Gpu",
    "Machine",
    "PermissionDeniedError",
    "PoliciesClient",
    "PoolsClient",
    "RequestsClient",
    "ResourceManagerClient",
    "detect_machine",
    "ensure_local_pool",
    "local_pool_spec",
]
