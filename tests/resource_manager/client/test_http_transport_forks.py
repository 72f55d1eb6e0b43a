# ruff: noqa: F811  (fixtures imported from the API conftest)
"""A forked child of a process whose Resource Manager client is open logs in on its own, even
when a thread of its parent held the client's login lock at the fork
(:class:`wharf.resource_manager.client.http_transport.Transport`): that thread does not exist in
the child, so the lock would never be released there.

Real forks (``tests.sql.forking``) of the test process, a real RM server (uvicorn over TCP).
"""

from __future__ import annotations

import pytest

from tests.resource_manager.api.conftest import (  # noqa: F401 (fixtures)
    _rm_sqlite_template,
    server,
    sqlite_rm_url,
)
from tests.resource_manager.api.live import ADMIN_KEY, LiveServer
from tests.sql.forking import exit_code_in_fork, held_by_another_thread
from wharf.resource_manager.client.http import HttpResourceManager


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize("due", ["first login", "token refresh"])
def test_a_forked_child_logs_in_though_a_parent_thread_held_the_login_lock(
    server: LiveServer, due: str
) -> None:
    """The child's first call needs a login (none yet, or the token is due for refresh) while
    the parent's lock is held by a thread the child has not: it used to wait forever."""
    clock = Clock()
    client = HttpResourceManager(server.url, api_key=ADMIN_KEY, timeout=5, clock=clock)
    transport = client._transport
    if due == "token refresh":
        assert client.descriptors.get("CPU").name == "CPU"
        clock.now += 10**6  # past any token's refresh time
    lock = transport._lock

    def in_child() -> None:
        assert client.descriptors.get("GPU").name == "GPU"
        assert transport._auth is not None and transport._lock is not lock

    try:
        with held_by_another_thread(lambda: lock):
            assert exit_code_in_fork(in_child) == 0
        assert client.descriptors.get("memory").name == "memory"
    finally:
        client.close()
