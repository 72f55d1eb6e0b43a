# ruff: noqa: F811  (fixtures imported from the server tests)
"""``wharf runs logs --follow`` (:class:`wharf.cli.run_logs.RunLogs`) through a short outage of a
real workspace server (a TCP proxy in front of it, cut and restored): it says once that the
store is lost, keeps following, and ends when the run does; an outage longer than
``OUTAGE_LIMIT`` ends it with the error. It used to end at the first refused connection."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import pytest

from tests.faults.tcp_proxy import TcpProxy
from tests.server.conftest import World, live, world  # noqa: F401 (fixtures)
from tests.server.things import Things
from wharf.cli.run_logs import OUTAGE_LIMIT, RunLogs
from wharf.config.global_config import load_config
from wharf.core.enums import ExecutionStatus
from wharf.core.errors import StoreUnavailableError
from wharf.sdk.client import Client
from wharf.store.rest import RestStore


@pytest.fixture
def proxied(world: World, tmp_path: Path) -> Iterator[tuple[Client, TcpProxy]]:
    address = urlparse(world.url)
    proxy = TcpProxy(str(address.hostname), int(address.port or 80))
    url = f"http://127.0.0.1:{proxy.port}"
    key = str(world.credentials["member"])
    environ = {"WHARF_HOME": str(tmp_path), "WHARF_SERVER_URL": url, "WHARF_API_KEY": key}
    environ["WHARF_PROJECT"] = world.a.name
    client = Client(load_config(environ), RestStore(url, key))
    try:
        yield client, proxy
    finally:
        client.close()
        proxy.close()


class Outage:
    """The follower's sleep and clock: the store is cut at the first sleep; ``restore_after``
    sleeps later it is restored and the run ends (None: never)."""

    def __init__(self, world: World, proxy: TcpProxy, run_id: object, restore_after: int | None):
        self.world, self.proxy, self.run_id = world, proxy, run_id
        self.restore_after = restore_after
        self.sleeps = 0
        self.now = 0.0

    def sleep(self, seconds: float) -> None:
        self.sleeps += 1
        self.now += seconds
        if self.sleeps == 1:
            self.proxy.cut()
        elif self.sleeps == self.restore_after:
            self.proxy.restore()
            store = self.world.stores.store
            store.runs.finish(self.run_id, ExecutionStatus.COMPLETED, None)  # type: ignore[arg-type]

    def clock(self) -> float:
        return self.now


def test_follow_outlasts_a_short_outage(world: World, proxied: tuple[Client, TcpProxy]) -> None:
    client, proxy = proxied
    things = Things(world)
    lines: list[str] = []
    logs = RunLogs(client, str(things.run.id), lines.append)
    outage = Outage(world, proxy, things.run.id, restore_after=5)
    logs.follow(sleep=outage.sleep, clock=outage.clock)
    lost = [line for line in lines if line.startswith("Lost the store")]
    assert len(lost) == 1 and "still following" in lost[0], lines
    assert "Reached the store again; following." in lines


def test_follow_gives_up_after_a_long_outage(
    world: World, proxied: tuple[Client, TcpProxy]
) -> None:
    client, proxy = proxied
    things = Things(world)
    outage = Outage(world, proxy, things.run.id, restore_after=None)
    logs = RunLogs(client, str(things.run.id), lambda line: None)
    with pytest.raises(StoreUnavailableError):
        logs.follow(sleep=outage.sleep, clock=outage.clock)
    assert outage.now > OUTAGE_LIMIT
