"""The public names of the RM contract and service packages do not change by accident, and the
contract (with machine discovery) loads neither the service nor an HTTP library."""

from __future__ import annotations

import wharf.resource_manager.contract as contract
import wharf.resource_manager.contract.models as models
import wharf.resource_manager.service as service
from tests.import_probe import loaded_after


def test_contract_api() -> None:
    assert sorted(contract.__all__) == [
        "AuthenticationError",
        "DescriptorsClient",
        "PermissionDeniedError",
        "PoliciesClient",
        "PoolsClient",
        "RequestsClient",
        "RequestsLink",
        "ResourceManagerClient",
    ]
    assert all(hasattr(contract, name) for name in contract.__all__)
    assert all(hasattr(models, name) for name in models.__all__)


def test_service_api() -> None:
    assert sorted(service.__all__) == [
        "HEAD_REVISION",
        "Principal",
        "ResourceManagerService",
        "ServiceOptions",
    ]


def test_the_contract_and_machine_discovery_pull_in_no_service_and_no_http() -> None:
    code = (
        "import wharf.resource_manager.contract.models\n"
        "import wharf.resource_manager.contract.http_errors\n"
        "import wharf.resource_manager.embedded.machine\n"
    )
    heavy = [
        "wharf.resource_manager.service",
        "wharf.resource_manager.client",
        "wharf.resource_manager.embedded.inprocess",
        "httpx",
        "httpcore",
        "sqlalchemy",
    ]
    assert loaded_after(code, heavy) == []
