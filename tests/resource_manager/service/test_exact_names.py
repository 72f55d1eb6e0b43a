"""Contract: the Resource Manager finds a descriptor, pool, policy or request only by exactly
the text it holds, on every backend. MariaDB's collation pads with spaces, so there pool
``'gpus '`` was pool ``'gpus'`` (read, updated or deleted through it) and a list of requests
by requester, subject or metadata ``'alice '`` listed alice's."""

from __future__ import annotations

import pytest

from tests.resource_manager.service.helpers import ADMIN, ALICE, gpus, request_spec, setup_pool
from wharf.core.errors import EntityNotFoundError
from wharf.resource_manager.contract.models import DescriptorUpdate, RequestFilter
from wharf.resource_manager.domain import ResourceDescriptor, Unit
from wharf.resource_manager.service import ResourceManagerService

PADS = (" ", "  ")
LICENSE = ResourceDescriptor(
    name="matlab", kind="license", units=(Unit(name="seat", multiplier=1),), default_unit="seat"
)


def test_configuration_is_found_by_its_exact_name(rm: ResourceManagerService) -> None:
    rm.descriptors.create(ADMIN, LICENSE)
    setup_pool(rm)
    for pad in PADS:
        with pytest.raises(EntityNotFoundError):
            rm.descriptors.get("matlab" + pad)
        with pytest.raises(EntityNotFoundError):
            rm.descriptors.update(ADMIN, "matlab" + pad, DescriptorUpdate(description="x"))
        with pytest.raises(EntityNotFoundError):
            rm.descriptors.delete(ADMIN, "matlab" + pad)
        with pytest.raises(EntityNotFoundError):
            rm.pools.get("gpus" + pad)
        with pytest.raises(EntityNotFoundError):
            rm.pools.delete(ADMIN, "gpus" + pad)
        with pytest.raises(EntityNotFoundError):
            rm.policies.get("team" + pad)
        with pytest.raises(EntityNotFoundError):
            rm.policies.delete(ADMIN, "team" + pad)
    assert rm.descriptors.get("matlab") == LICENSE
    assert rm.pools.get("gpus").name == "gpus"
    assert rm.policies.get("team").name == "team"


def test_requests_are_listed_by_exact_texts(rm: ResourceManagerService) -> None:
    setup_pool(rm)
    held = rm.requests.create(ALICE, request_spec(gpus(1), metadata={"user": "bob"}))
    mine = [
        RequestFilter(requester="alice"),
        RequestFilter(subject_id="team"),
        RequestFilter(metadata={"user": "bob"}),
        RequestFilter(pool="gpus"),
    ]
    for query in mine:
        assert [r.id for r in rm.requests.list(query).items] == [held.id], query
    for pad in PADS:
        others = [
            RequestFilter(requester="alice" + pad),
            RequestFilter(subject_id="team" + pad),
            RequestFilter(metadata={"user": "bob" + pad}),
            RequestFilter(metadata={"user" + pad: "bob"}),
            RequestFilter(pool="gpus" + pad),
        ]
        for query in others:
            assert rm.requests.list(query).total == 0, query
