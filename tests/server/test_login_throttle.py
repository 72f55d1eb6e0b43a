"""Login throttling on the workspace server over real HTTP: per account and per address, 429
with ``Retry-After``, reset by a success. Time moves with the state's injected clock; the
throttle gets small limits (its defaults are ``LoginLimits()``'s)."""

from __future__ import annotations

import httpx
import pytest

from tests.server.conftest import World
from wharf.core.login_throttle import LoginLimits, LoginThrottle

LIMITS = LoginLimits(max_failures_per_account=3, max_failures_per_address=6, window_seconds=60)


@pytest.fixture
def client(world: World) -> httpx.Client:
    world.state.login_throttle = LoginThrottle(LIMITS)
    for name in ("alice", "bob", "carol", "dave"):
        world.user(name, password="correct horse")
    return world.client()


def login(client: httpx.Client, username: str, password: str) -> httpx.Response:
    return client.post("/api/v1/auth/login", json={"username": username, "password": password})


def test_the_default_limits_apply_to_a_server(world: World) -> None:
    assert world.state.settings.login_limits == LoginLimits()
    assert world.state.login_throttle.limits == LoginLimits()


def test_a_burst_of_wrong_passwords_is_throttled_per_account(
    world: World, client: httpx.Client
) -> None:
    statuses = [login(client, "alice", f"guess-{i}").status_code for i in range(200)]
    assert statuses[:3] == [401] * 3
    assert set(statuses[3:]) == {429}

    refused = login(client, "alice", "correct horse")  # even the right password: not checked
    assert refused.status_code == 429, refused.text
    assert 0 < int(refused.headers["retry-after"]) <= 60
    assert refused.json()["type"] == "AuthenticationError"
    assert "try again" in refused.json()["detail"]
    assert login(client, "bob", "correct horse").status_code == 200  # other accounts log in

    world.clock.advance(60)
    assert login(client, "alice", "correct horse").status_code == 200


def test_retry_after_counts_down_with_the_clock(world: World, client: httpx.Client) -> None:
    for _ in range(3):
        login(client, "alice", "guess")
    assert login(client, "alice", "guess").headers["retry-after"] == "60"
    world.clock.advance(45)
    assert login(client, "alice", "guess").headers["retry-after"] == "15"


def test_a_success_resets_the_account_count(client: httpx.Client) -> None:
    for _ in range(2):  # four failures in all: more than the limit allows without a reset
        for _ in range(2):
            assert login(client, "alice", "guess").status_code == 401
        assert login(client, "alice", "correct horse").status_code == 200


def test_one_address_guessing_many_accounts_is_throttled(
    world: World, client: httpx.Client
) -> None:
    for name in ("alice", "bob", "carol"):
        for _ in range(2):
            assert login(client, name, "guess").status_code == 401
    refused = login(client, "dave", "correct horse")  # another account, the same address
    assert refused.status_code == 429
    assert int(refused.headers["retry-after"]) > 0
    world.clock.advance(60)
    assert login(client, "dave", "correct horse").status_code == 200


def test_many_right_passwords_at_once_are_never_throttled(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Logins of one account in flight at once (a CI matrix, pods sharing a user) were refused
    past the limit: each counted as a failure until it succeeded. Default limits."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    world.user("bob", password="correct horse")
    passwords = world.state.passwords
    together = threading.Barrier(16, timeout=30)
    checked = passwords.verify

    def verify(stored: str, given: str) -> bool:  # all 16 are being verified at once
        together.wait()
        return checked(stored, given)

    monkeypatch.setattr(passwords, "verify", verify)

    def one(_: int) -> int:
        with httpx.Client(base_url=world.url, timeout=60) as http:
            return login(http, "bob", "correct horse").status_code

    with ThreadPoolExecutor(16) as pool:
        assert list(pool.map(one, range(16))) == [200] * 16
