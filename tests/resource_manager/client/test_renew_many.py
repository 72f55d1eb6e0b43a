# ruff: noqa: F811  (fixtures imported from the API conftest)
"""``renew_many`` on every client: HTTP, in-process and embedded answer each item as ``renew``
would — the request, or the very error ``renew`` raises for that item alone."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import FakeClock
from tests.resource_manager.api.conftest import (  # noqa: F401 (fixtures)
    _rm_sqlite_template,
    admin,
    alice,
    bob,
    make_client,
    server,
    sqlite_rm_url,
)
from wharf.core.enums import ResourceRequestRuntimeState as RS
from wharf.core.enums import ResourceRequestStatus as S
from wharf.core.errors import EntityNotFoundError, WharfError
from wharf.resource_manager.client import http as http_client
from wharf.resource_manager.client.http import HttpResourceManager
from wharf.resource_manager.contract import PermissionDeniedError, ResourceManagerClient
from wharf.resource_manager.contract.models import (
    PolicyCreate,
    PoolCreate,
    RenewalItem,
    ResourceRequestCreate,
    ResourceRequestInfo,
)
from wharf.resource_manager.embedded.connect import connect_embedded
from wharf.resource_manager.embedded.inprocess import InProcessResourceManager
from wharf.resource_manager.service import Principal

MISSING = uuid.UUID(int=7)


def _setup(rm: ResourceManagerClient) -> None:
    rm.pools.create(
        PoolCreate.model_validate(
            {"name": "gpus", "classes": [{"name": "a100", "capacity": {"GPU": 1}}]}
        )
    )
    rm.policies.create(
        PolicyCreate.model_validate(
            {"name": "users", "pool": "gpus", "subject_selector": {"subject_type": "account"}}
        )
    )


def _request(user: str) -> ResourceRequestCreate:
    return ResourceRequestCreate.model_validate(
        {
            "subjects": [{"nodes": [{"subject_type": "account", "subject_id": user}]}],
            "demands": [{"resource": "GPU", "quantity": 1}],
            "lease_seconds": 30,
        }
    )


def _item(request_id: uuid.UUID, lease: int = 60) -> RenewalItem:
    return RenewalItem(id=request_id, lease_seconds=lease, runtime_state=RS.RUNNING)


def _check(alice: ResourceManagerClient, bob: ResourceManagerClient, clock: FakeClock) -> None:
    held = alice.requests.create(_request("alice"))
    waiting = alice.requests.create(_request("alice"))
    bobs = bob.requests.create(_request("bob"))
    assert (held.status, waiting.status, bobs.status) == (S.ALLOCATED, S.PENDING, S.PENDING)
    clock.advance(5)
    items = [_item(held.id), _item(MISSING), _item(bobs.id), _item(waiting.id), _item(held.id)]
    answers = alice.requests.renew_many(items)
    assert len(answers) == len(items)
    first, missing, foreign, pending, again = answers
    assert isinstance(first, ResourceRequestInfo) and first.runtime_state is RS.RUNNING
    assert first.lease_expires_at is not None and held.lease_expires_at is not None
    assert first.lease_expires_at > held.lease_expires_at
    assert isinstance(missing, EntityNotFoundError) and str(MISSING) in str(missing)
    assert isinstance(foreign, PermissionDeniedError)
    assert isinstance(pending, ResourceRequestInfo) and pending.status is S.PENDING
    assert isinstance(again, ResourceRequestInfo) and again.id == held.id  # twice is fine
    # Each error is the one a single renewal raises.
    with pytest.raises(PermissionDeniedError) as single:
        alice.requests.renew(bobs.id, 60, RS.RUNNING)
    assert str(single.value) == str(foreign)
    assert bob.requests.get(bobs.id).runtime_state is not RS.RUNNING  # refused: unchanged
    assert alice.requests.renew_many([]) == []


def test_http(alice: HttpResourceManager, bob: HttpResourceManager, admin: HttpResourceManager,
              clock: FakeClock) -> None:  # fmt: skip
    _setup(admin)
    _check(alice, bob, clock)


def test_http_splits_what_exceeds_one_call(
    alice: HttpResourceManager,
    admin: HttpResourceManager,
    clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _setup(admin)
    held = alice.requests.create(_request("alice"))
    monkeypatch.setattr(http_client, "MAX_RENEWALS", 2)
    sent: list[int] = []
    call = alice.requests._call

    def counting(method: str, path: str, **kwargs: object) -> bytes | None:
        sent.append(1)
        return call(method, path, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(alice.requests, "_call", counting)
    answers = alice.requests.renew_many([_item(held.id), _item(MISSING), _item(held.id)])
    assert len(sent) == 2  # 2 + 1
    assert [type(a) for a in answers] == [
        ResourceRequestInfo,
        EntityNotFoundError,
        ResourceRequestInfo,
    ]


def test_in_process(tmp_path: Path, clock: FakeClock) -> None:
    rm = InProcessResourceManager.open(
        f"sqlite:///{tmp_path / 'rm.db'}", Principal("admin", admin=True), clock=clock
    )
    try:
        _setup(rm)
        _check(rm.as_principal(Principal("alice")), rm.as_principal(Principal("bob")), clock)
    finally:
        rm.close()


@pytest.fixture
def embedded(tmp_path: Path) -> Iterator[InProcessResourceManager]:
    client = connect_embedded(f"sqlite:///{tmp_path / 'store.db'}", "local-user", step_slots=2)
    yield client
    client.close()


def test_embedded(embedded: InProcessResourceManager) -> None:
    request = ResourceRequestCreate.model_validate(
        {
            "subjects": [{"nodes": [{"subject_type": "account", "subject_id": "local-user"}]}],
            "demands": [{"resource": "CPU", "quantity": 1}],
            "lease_seconds": 30,
        }
    )
    held = embedded.requests.create(request)
    answers: list[ResourceRequestInfo | WharfError] = embedded.requests.renew_many(
        [_item(held.id, 90), _item(MISSING)]
    )
    assert isinstance(answers[0], ResourceRequestInfo) and answers[0].id == held.id
    assert answers[0].runtime_state is RS.RUNNING
    assert isinstance(answers[1], EntityNotFoundError)
