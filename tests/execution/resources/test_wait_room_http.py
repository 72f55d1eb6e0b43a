# ruff: noqa: F811  (fixtures imported from the RM API conftest)
"""The wait room over the Resource Manager's HTTP client: the ``ids`` filter of its one
``list`` call travels as repeated ``id`` query parameters and the right waiter wakes."""

from __future__ import annotations

from uuid import UUID

from tests.execution.resources.test_wait_room_embedded import license_request
from tests.resource_manager.api.conftest import (  # noqa: F401 (fixtures)
    _rm_sqlite_template,
    admin,
    alice,
    make_client,
    server,
    sqlite_rm_url,
)
from wharf.core.enums import ResourceRequestStatus as S
from wharf.execution.resources.embedded import LazyResourceManager
from wharf.resource_manager.client.http import HttpResourceManager
from wharf.resource_manager.contract.models import RequestFilter
from wharf.sdk.pools import ensure_pool


def _ask(client: HttpResourceManager) -> UUID:
    return client.requests.create(license_request()).id


def test_a_release_over_http_wakes_the_next_waiter(
    admin: HttpResourceManager, alice: HttpResourceManager
) -> None:
    ensure_pool(admin, "licenses", {"license": 1}, account="alice")
    requests = LazyResourceManager(lambda: alice, watch_seconds=None)
    holder, first, second = (_ask(alice) for _ in range(3))
    with requests.wait_room.enter(first) as t1, requests.wait_room.enter(second) as t2:
        requests.release(holder)
        woken = t1.wait(0)
        assert woken is not None and woken.id == first and woken.status is S.ALLOCATED
        assert t2.wait(0) is None
    only = alice.requests.list(RequestFilter(ids=(first, holder)))
    assert {r.id for r in only.items} == {first, holder} and only.total == 2
