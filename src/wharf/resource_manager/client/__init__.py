"""The Resource Manager's client side: the interface, its wire models and errors, and helpers.

Public API:

- :class:`ResourceManagerClient` (with :class:`DescriptorsClient`, :class:`PoolsClient`,
  :class:`PoliciesClient`, :class:`RequestsClient`) — what the workspace server and the engine
  use; implemented in-process
  (:class:`wharf.resource_manager.client.inprocess.InProcessResourceManager`, embedded mode)
  and over HTTP;
- :mod:`.models` — wire models shared with the HTTP API;
- :class:`PermissionDeniedError`, :class:`AuthenticationError` (the HTTP client's 401);
- :func:`ensure_local_pool` and :func:`detect_machine` — the embedded ``local`` pool.

The implementations are deliberately not imported here: the in-process one
(:mod:`.inprocess`) depends on the service, which code importing this package (the workspace
server, the engine) must not reach; the HTTP one
(:class:`wharf.resource_manager.client.http.HttpResourceManager`) needs ``httpx``, which only
the ``server`` extra installs.
"""

from wharf.resource_manager.client.errors import PermissionDeniedError
from wharf.resource_manager.client.http_errors import AuthenticationError
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
    "AuthenticationError",
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
