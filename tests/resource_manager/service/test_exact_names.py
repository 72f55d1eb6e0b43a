# ruff: noqa: F811  (a fixture imported from the store's contract tests)
"""Contract: the Resource Manager finds a descriptor, pool, policy or request only by exactly
the text it holds, and lists them in code point order, on every backend. MariaDB's collation
pads with spaces, so there pool ``'gpus '`` was pool ``'gpus'`` (read, updated or deleted
through it) and a list of requests by requester, subject or metadata ``'alice '`` listed
alice's; a PostgreSQL database under ``en-US`` listed pools ``alpha``, ``Zeta`` where the others
list ``Zeta``, ``alpha``."""

from __future__ import annotations

import pytest

from tests.resource_manager.service.helpers import (
    ADMIN,
    ALICE,
    gpus,
    klass,
    policy_spec,
    pool_spec,
    request_spec,
    setup_pool,
)
from tests.store.contract.test_code_point_order import linguistic_database_url  # noqa: F401
from wharf.core.errors import EntityNotFoundError, InputError
from wharf.resource_manager.contract.models import DescriptorUpdate, RequestFilter
from wharf.resource_manager.domain import ResourceDescriptor, Unit
from wharf.resource_manager.service import ResourceManagerService
from wharf.resource_manager.service.config_ops import MAX_DESCRIPTION_LENGTH

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


def test_configuration_is_listed_in_code_point_order(linguistic_database_url: str) -> None:
    names = ["alpha", "Zeta", "beta-2", "Beta-1", "x_", "10", "9"]
    rm = ResourceManagerService.open(linguistic_database_url)
    try:
        for name in names:
            rm.descriptors.create(ADMIN, LICENSE.model_copy(update={"name": f"lic{name}"}))
            rm.pools.create(ADMIN, pool_spec(name, klass("c", GPU=1)))
            rm.policies.create(ADMIN, policy_spec(f"p{name}", pool=name))
        assert [p.name for p in rm.pools.list()] == sorted(names)
        assert [p.name for p in rm.policies.list()] == sorted(f"p{n}" for n in names)
        custom = [d.name for d in rm.descriptors.list() if d.name.startswith("lic")]
        assert custom == sorted(f"lic{n}" for n in names)
    finally:
        rm.close()


def test_descriptions_up_to_the_limit_are_kept_on_every_backend(
    rm: ResourceManagerService,
) -> None:
    # MariaDB's TEXT column refused a description over 65,535 bytes that the others stored.
    longest = "\U0001f600" * MAX_DESCRIPTION_LENGTH  # 4 bytes each
    assert rm.descriptors.create(ADMIN, LICENSE.model_copy(update={"description": longest}))
    assert rm.descriptors.get("matlab").description == longest
    over = "x" * (MAX_DESCRIPTION_LENGTH + 1)
    with pytest.raises(InputError, match="description takes at most"):
        rm.descriptors.create(ADMIN, LICENSE.model_copy(update={"name": "m2", "description": over}))
    with pytest.raises(InputError, match="description takes at most"):
        rm.descriptors.update(ADMIN, "matlab", DescriptorUpdate(description=over))
    assert rm.descriptors.get("matlab").description == longest
    assert [d.name for d in rm.descriptors.list()] == ["CPU", "GPU", "matlab", "memory"]
