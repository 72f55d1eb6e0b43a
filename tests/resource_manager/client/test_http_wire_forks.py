# ruff: noqa: F811  (fixtures imported from the API conftest)
"""A forked child of a process whose Resource Manager client is open (a multiprocessing pool or
an ``os.fork`` of an inline step) calls the RM on connections of its own, never on the forking
thread's kept-alive one, over either wire of :mod:`wharf.resource_manager.client.http_wire`.

A real fork of the test process, a real RM server (uvicorn over TCP); the parent calls on the
forking thread's connection while the child calls.
"""

from __future__ import annotations

import os
import signal
import time
import traceback
import warnings
from collections.abc import Callable

import pytest

from tests.resource_manager.api.conftest import (  # noqa: F401 (fixtures)
    _rm_sqlite_template,
    server,
    sqlite_rm_url,
)
from tests.resource_manager.api.live import ADMIN_KEY, LiveServer
from tests.sql.forking import SAFETY_TIMEOUT
from wharf.resource_manager.client.http import HttpResourceManager
from wharf.resource_manager.client.http_wire import CoreWire, HttpxWire

CALLS = 300
"""Calls by the child while its parent calls too: on a shared socket some got the other's
answer."""


def _fork(body: Callable[[], None]) -> int:
    """The child's pid; the child runs ``body`` and leaves with ``os._exit`` (1 if it raised)."""
    with warnings.catch_warnings():
        # Python 3.12 warns that forking a process with threads (the server's) may deadlock
        # the child: the hazard the client guards against.
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:
        code = 0
        try:
            body()
        except BaseException:
            traceback.print_exc()
            code = 1
        os._exit(code)
    return pid


def _call_at_once(client: HttpResourceManager, in_child: Callable[[], None]) -> None:
    """Fork a child that runs ``in_child`` while the parent calls the RM on the forking
    thread's connection; both must succeed."""
    failures: list[BaseException] = []
    pid = _fork(in_child)
    status = None
    deadline = time.monotonic() + SAFETY_TIMEOUT
    try:
        while status is None and time.monotonic() < deadline:
            try:
                assert client.descriptors.get("CPU").name == "CPU"
            except BaseException as exc:
                failures.append(exc)
                break
            done, waited = os.waitpid(pid, os.WNOHANG)
            if done:
                status = os.waitstatus_to_exitcode(waited)
    finally:
        if status is None:
            done, waited = os.waitpid(pid, os.WNOHANG)
            if done:
                status = os.waitstatus_to_exitcode(waited)
            else:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
    assert (status, [repr(f) for f in failures]) == (0, [])
    assert client.descriptors.get("memory").name == "memory"


def test_a_forked_child_and_its_parent_call_at_once_each_on_its_own_connection(
    server: LiveServer,
) -> None:
    """On the forking thread's socket the two processes read each other's answers: one got
    the other's descriptor for its own, or an unreadable answer, or waited for an answer the
    other read. The child's ``close`` leaves the parent's connection alone."""
    client = HttpResourceManager(server.url, api_key=ADMIN_KEY, timeout=5)
    wire = client._transport._wire
    assert isinstance(wire, CoreWire)
    assert client.descriptors.get("CPU").name == "CPU"  # logged in, a connection kept alive
    kept = wire._local.connection

    def in_child() -> None:
        for _ in range(CALLS):
            assert client.descriptors.get("GPU").name == "GPU"
        assert wire._local.connection is not kept
        client.close()

    try:
        _call_at_once(client, in_child)
        assert wire._local.connection is kept and not kept.is_closed()
    finally:
        client.close()


@pytest.fixture
def proxied(monkeypatch: pytest.MonkeyPatch) -> None:
    """An environment proxy that the RM's address is exempt from: the client takes the
    ``httpx`` wire, whose requests still go straight to the RM."""
    for name in ("http", "https", "all", "no"):
        monkeypatch.delenv(f"{name}_proxy", raising=False)
        monkeypatch.delenv(f"{name.upper()}_PROXY", raising=False)
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")


@pytest.mark.usefixtures("proxied")
def test_a_forked_child_of_a_client_over_httpx_calls_on_a_client_of_its_own(
    server: LiveServer,
) -> None:
    """The ``httpx`` wire (an environment proxy) pools keep-alive
    sockets in its own ``httpx.Client``: the child makes a new client and leaves the
    parent's open."""
    client = HttpResourceManager(server.url, api_key=ADMIN_KEY, timeout=5)
    wire = client._transport._wire
    assert isinstance(wire, HttpxWire)
    assert client.descriptors.get("CPU").name == "CPU"  # logged in, a connection kept alive
    kept = wire._http
    assert kept is not None

    def in_child() -> None:
        for _ in range(CALLS):
            assert client.descriptors.get("GPU").name == "GPU"
        assert wire._http is not kept
        client.close()

    try:
        _call_at_once(client, in_child)
        assert wire._http is kept and not kept.is_closed
    finally:
        client.close()
