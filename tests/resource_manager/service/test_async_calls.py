"""The service's ``*_async`` entry points (the API server's): concurrent coroutines are answered
by the combined transactions, each with its own request."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from tests.resource_manager.service.helpers import ALICE, gpus, request_spec, setup_pool
from wharf.core.enums import ResourceRequestStatus as S
from wharf.resource_manager.service import ResourceManagerService


@pytest.mark.parametrize("action", ["renew", "create_release"])
def test_the_service_async_entry_points(
    open_rm: Callable[..., ResourceManagerService], action: str
) -> None:
    rm = open_rm()
    setup_pool(rm, gpus_total=64)
    held = [rm.requests.create(ALICE, request_spec(gpus(1))) for _ in range(8)]

    async def main() -> list[S]:
        if action == "renew":
            renewed = await asyncio.gather(
                *(rm.requests.renew_async(ALICE, r.id, 60) for r in held * 4)
            )
            return [r.status for r in renewed]
        created = await asyncio.gather(
            *(rm.requests.create_async(ALICE, request_spec(gpus(1))) for _ in range(16))
        )
        released = await asyncio.gather(*(rm.requests.release_async(ALICE, r.id) for r in created))
        assert all(r.status is S.ALLOCATED for r in created)
        return [r.status for r in released]

    statuses = asyncio.run(main())
    expected = S.ALLOCATED if action == "renew" else S.RELEASED
    assert statuses and all(status is expected for status in statuses)
