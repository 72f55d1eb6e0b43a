"""What every side of the Resource Manager shares: the client interface, wire models, errors.

Public API: :class:`ResourceManagerClient` (with :class:`DescriptorsClient`,
:class:`PoolsClient`, :class:`PoliciesClient`, :class:`RequestsClient`, and
:class:`RequestsLink`, the part of the requests client a workspace offers of its steps'
requests); :mod:`.models` (the wire models); :mod:`.values` (the domain's value types the other
sides name); :class:`PermissionDeniedError` (403), :class:`AuthenticationError` (401) and
:mod:`.http_errors` (how errors travel by name on the HTTP wire).

Invariant: the contract depends only on :mod:`wharf.core`, pydantic and the pure RM domain,
never on the service, API, scheduler, clients or the embedded mode (import-linter), so any side
can import it without pulling in another.
"""

from wharf.resource_manager.contract.errors import AuthenticationError, PermissionDeniedError
from wharf.resource_manager.contract.protocol import (
    DescriptorsClient,
    PoliciesClient,
    PoolsClient,
    RequestsClient,
    RequestsLink,
    ResourceManagerClient,
)

__all__ = [
    "AuthenticationError",
    "DescriptorsClient",
    "PermissionDeniedError",
    "PoliciesClient",
    "PoolsClient",
    "RequestsClient",
    "RequestsLink",
    "ResourceManagerClient",
]
