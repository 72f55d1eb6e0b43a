# ruff: noqa: F811  (fixtures imported from the API conftest)
"""``HttpResourceManager`` implements ``ResourceManagerClient`` against a real uvicorn server and
raises the same Wharf errors as the in-process client."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

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
from tests.resource_manager.api.live import ADMIN_KEY, OPS_PASSWORD, LiveServer
from wharf.core.enums import ResourceRequestRuntimeState as RS
from wharf.core.enums import ResourceRequestStatus as S
from wharf.core.errors import (
    EntityExistsError,
    EntityNotFoundError,
    IllegalOperationError,
    InputError,
)
from wharf.resource_manager.client.http import HttpResourceManager, list_params
from wharf.resource_manager.contract import AuthenticationError, PermissionDeniedError
from wharf.resource_manager.contract.models import (
    DescriptorUpdate,
    PageRequest,
    PolicyCreate,
    PolicyUpdate,
    PoolCreate,
    PoolUpdate,
    RequestFilter,
    ResourceRequestCreate,
)
from wharf.resource_manager.contract.protocol import ResourceManagerClient
from wharf.resource_manager.domain import ResourceDescriptor, SubjectType
from wharf.resource_manager.embedded.inprocess import InProcessResourceManager
from wharf.resource_manager.service import Principal


def _pool(gpus: int = 1) -> PoolCreate:
    return PoolCreate.model_validate(
        {"name": "gpus", "classes": [{"name": "a100", "capacity": {"GPU": gpus, "CPU": "8"}}]}
    )


def _policy() -> PolicyCreate:
    return PolicyCreate.model_validate(
        {"name": "users", "pool": "gpus", "subject_selector": {"subject_type": "account"}}
    )


def _request(user: str, quantity: int = 1, **demand: Any) -> ResourceRequestCreate:
    return ResourceRequestCreate.model_validate(
        {
            "subjects": [{"nodes": [{"subject_type": "account", "subject_id": user}]}],
            "demands": [{"resource": "GPU", "quantity": quantity, "class": "a100", **demand}],
            "lease_seconds": 30,
            "metadata": {"user": user},
        }
    )


def test_a_full_round_trip_through_the_protocol(
    admin: HttpResourceManager, alice: HttpResourceManager, clock: FakeClock
) -> None:
    rm: ResourceManagerClient = admin
    assert {d.name for d in rm.descriptors.list()} == {"CPU", "GPU", "memory"}
    license_ = ResourceDescriptor.model_validate(
        {"name": "lic", "kind": "license", "units": [{"name": "seat", "multiplier": 1}]}
    )
    assert rm.descriptors.create(license_) == license_
    assert rm.descriptors.update("lic", DescriptorUpdate(description="x")).description == "x"
    assert rm.descriptors.get("lic").description == "x"
    rm.descriptors.delete("lic")

    pool = rm.pools.create(_pool(), idempotency_key="pool")
    assert rm.pools.create(_pool(), idempotency_key="pool") == pool
    assert rm.pools.get(pool.id) == rm.pools.get("gpus") == pool
    policy = rm.policies.create(_policy(), idempotency_key="policy")
    assert rm.policies.create(_policy(), idempotency_key="policy") == policy  # replay parses
    assert rm.policies.list("gpus") == [policy] == rm.policies.list()

    held = alice.requests.create(_request("alice"), idempotency_key="r1")
    assert held.status is S.ALLOCATED and held.requester == "alice"
    assert alice.requests.create(_request("alice"), idempotency_key="r1") == held
    waiting = alice.requests.create(_request("alice"))
    assert [e.request.id for e in rm.pools.queue("gpus")] == [waiting.id]
    assert alice.requests.explain(waiting.id).outcome == "waiting"
    clock.advance(5)
    renewed = alice.requests.renew(held.id, 60, RS.RUNNING)
    assert renewed.runtime_state is RS.RUNNING and renewed.renewed_at is not None
    assert [a.request_id for a in rm.pools.allocations(pool.id)] == [held.id]
    assert alice.requests.release(held.id).status is S.RELEASED
    assert alice.requests.get(waiting.id).status is S.ALLOCATED
    query = RequestFilter(metadata={"user": "alice"}, status=(S.RELEASED,))
    assert [r.id for r in alice.requests.list(query).items] == [held.id]
    page = alice.requests.list(None, PageRequest(index=2, size=1, sort="asc"))
    assert page.total == 2 and [r.id for r in page.items] == [waiting.id]
    assert rm.pools.update("gpus", PoolUpdate(rank=3)).rank == 3
    assert rm.policies.update("users", PolicyUpdate(priority=7)).priority == 7
    third = alice.requests.create(_request("alice"))
    cancelled = alice.requests.cancel(third.id, by="user 'carol' (project admin)")
    assert cancelled.status is S.CANCELLED  # who ended it goes over the wire as its reason
    assert cancelled.status_reason == "Cancelled by user 'carol' (project admin)."
    alice.requests.release(waiting.id)
    rm.policies.delete("users")
    rm.pools.delete("gpus")
    assert rm.pools.list() == []


def test_list_parameters() -> None:
    query = RequestFilter(
        status=(S.PENDING, S.ALLOCATED),
        subject_id="p",
        subject_type=SubjectType.PROJECT,
        pool="gpus",
        requester="alice",
        metadata={"run": "r1", "step": "s"},
    )
    assert list_params(query, PageRequest(index=3, size=7, sort="asc")) == {
        "page": 3,
        "size": 7,
        "sort": "asc",
        "status": ["pending", "allocated"],
        "subject_id": "p",
        "pool": "gpus",
        "requester": "alice",
        "subject_type": "project",
        "metadata[run]": "r1",
        "metadata[step]": "s",
    }


@pytest.fixture
def inprocess(sqlite_rm_url: str, clock: FakeClock) -> Iterator[InProcessResourceManager]:
    client = InProcessResourceManager.open(
        sqlite_rm_url.replace("rm.db", "local.db"), Principal("admin", admin=True), clock=clock
    )
    yield client
    client.close()


def _failures(
    rm: ResourceManagerClient, as_bob: ResourceManagerClient
) -> list[tuple[str, Callable[[], object]]]:
    rm.pools.create(_pool())
    rm.policies.create(_policy())
    held = rm.requests.create(_request("admin"))
    return [
        ("missing pool", lambda: rm.pools.get("nope")),
        ("duplicate pool", lambda: rm.pools.create(_pool())),
        ("pool with requests", lambda: rm.pools.delete("gpus")),
        ("cancel an allocation", lambda: rm.requests.cancel(held.id)),
        ("someone else's request", lambda: as_bob.requests.renew(held.id, 10)),
        ("not an admin", lambda: as_bob.pools.create(_pool())),
        ("unknown unit", lambda: rm.requests.create(_request("admin", unit="GiB"))),
        ("over capacity", lambda: rm.policies.create(_over_capacity())),
        ("bad lease", lambda: rm.requests.renew(held.id, 0)),
        ("reused key", lambda: _reuse_key(rm)),
    ]


def _over_capacity() -> PolicyCreate:
    grants = [{"class": "a100", "resources": {"GPU": {"reserved": 2}}}]
    body = {**_policy().model_dump(by_alias=True), "name": "x", "grants": grants}
    return PolicyCreate.model_validate(body)


def _reuse_key(rm: ResourceManagerClient) -> None:
    rm.pools.update("gpus", PoolUpdate(rank=1), idempotency_key="k")
    rm.pools.update("gpus", PoolUpdate(rank=2), idempotency_key="k")


_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _raised(call: Callable[[], object]) -> tuple[type[BaseException], str]:
    with pytest.raises(Exception) as info:
        call()
    return type(info.value), str(info.value)


def test_http_errors_are_the_in_process_errors(
    admin: HttpResourceManager, bob: HttpResourceManager, inprocess: InProcessResourceManager
) -> None:
    over_http = _failures(admin, bob)
    local = _failures(inprocess, inprocess.as_principal(Principal("bob")))
    expected = {
        "missing pool": EntityNotFoundError,
        "duplicate pool": EntityExistsError,
        "pool with requests": IllegalOperationError,
        "cancel an allocation": IllegalOperationError,
        "someone else's request": PermissionDeniedError,
        "not an admin": PermissionDeniedError,
        "unknown unit": InputError,
        "over capacity": InputError,
        "bad lease": InputError,
        "reused key": IllegalOperationError,
    }
    for (name, remote_call), (_, local_call) in zip(over_http, local, strict=True):
        remote_type, remote_text = _raised(remote_call)
        local_type, local_text = _raised(local_call)
        assert remote_type is local_type is expected[name], name
        if name != "bad lease":  # pydantic words the field path differently over HTTP
            assert _UUID.sub("<id>", remote_text) == _UUID.sub("<id>", local_text), name


def test_bad_credentials_and_password_logins(server: LiveServer) -> None:
    wrong = HttpResourceManager(server.url, api_key="wrm.alice.nope")
    with wrong, pytest.raises(AuthenticationError, match="login failed: Invalid credentials"):
        wrong.pools.list()
    with HttpResourceManager(server.url, username="ops", password=OPS_PASSWORD) as ops:
        assert ops.pools.list() == []
    with pytest.raises(InputError, match="api_key, or username and password"):
        HttpResourceManager(server.url)
    with pytest.raises(InputError, match="http:// or https://"):
        HttpResourceManager("localhost:8238", api_key="k")


def test_credentials_in_the_url_are_refused_without_showing_them(server: LiveServer) -> None:
    """``httpx`` would send a URL's credentials as Basic auth in place of the bearer token, so
    every authenticated call would fail: such a URL is refused up front, its password unshown."""
    with_credentials = server.url.replace("http://", "http://ops:hunter2@")
    for login in ({"api_key": ADMIN_KEY}, {"username": "ops", "password": OPS_PASSWORD}):
        with pytest.raises(InputError, match="credentials in the URL") as refused:
            HttpResourceManager(with_credentials, **login).close()
        assert "hunter2" not in str(refused.value) and server.url in str(refused.value)
        with HttpResourceManager(server.url, **login) as client:
            assert client.pools.list() == []


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://ops:hunter2@[::1", "'http://ops:***@[::1'"),
        ("ops:hunter2@rm.example:8238", "'ops:***@rm.example:8238'"),
        ("https://hunter2@rm.example:port", "'https://***@rm.example:port'"),
    ],
)
def test_a_malformed_url_is_refused_without_its_credentials(url: str, shown: str) -> None:
    """The URL is shown (what is wrong is still said), its password or token as ``***``."""
    with pytest.raises(InputError) as refused:
        HttpResourceManager(url, api_key="k").close()
    assert shown in str(refused.value) and "hunter2" not in str(refused.value)


def test_the_client_works_as_a_context_manager(server: LiveServer) -> None:
    with server.client() as client:
        assert client.url == server.url
        assert client.pools.list() == []
