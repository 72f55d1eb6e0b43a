"""The public names of the RM client and service packages do not change by accident."""

from __future__ import annotations

import wharf.resource_manager.client as client
import wharf.resource_manager.client.models as models
import wharf.resource_manager.service as service


def test_client_api() -> None:
    assert sorted(client.__all__) == [
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
    assert all(hasattr(client, name) for name in client.__all__)
    assert all(hasattr(models, name) for name in models.__all__)


def test_service_api() -> None:
    assert sorted(service.__all__) == [
        "HEAD_REVISION",
        "Principal",
        "ResourceManagerService",
        "ServiceOptions",
    ]
