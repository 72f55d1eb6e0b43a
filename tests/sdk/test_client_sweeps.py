# ruff: noqa: F811  (fixtures imported from the server and CLI tests)
"""A client's sweep of lost runs through an outage of a real workspace server (a TCP proxy in
front of it, cut and restored): a read goes on without the sweep, and the failure is a warning
once per outage, not once per read (a follower polls through one)."""

from __future__ import annotations

import logging

import pytest

from tests.cli.test_run_logs_outage import proxied  # noqa: F401 (fixture)
from tests.faults.tcp_proxy import TcpProxy
from tests.server.conftest import World, live, world  # noqa: F401 (fixtures)
from wharf.sdk.client import Client

SWEEP_WARNING = "Could not sweep lost runs"


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.WARNING and SWEEP_WARNING in r.getMessage()
    ]


def test_a_failing_sweep_warns_once_per_outage(
    world: World, proxied: tuple[Client, TcpProxy], caplog: pytest.LogCaptureFixture
) -> None:
    client, proxy = proxied
    caplog.set_level(logging.DEBUG, logger="wharf.sdk.client")
    proxy.cut()
    for _ in range(3):
        assert client._sweep_lost_runs(now=True) == set()
    assert len(warnings(caplog)) == 1
    proxy.restore()
    assert client._sweep_lost_runs(now=True) == set()
    proxy.cut()
    client._sweep_lost_runs(now=True)
    assert len(warnings(caplog)) == 2  # a new outage is said again
    proxy.restore()
