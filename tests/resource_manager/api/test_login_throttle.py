"""Login throttling on the Resource Manager API over real HTTP: per principal name (password and
API-key logins) and per address, 429 with ``Retry-After``, reset by a success. The throttle gets
small limits and a fake clock (its defaults are ``LoginLimits()``'s, on real time)."""

from __future__ import annotations

import httpx
import pytest

from tests.resource_manager.api.live import BOB_KEY, OPS_PASSWORD, LiveServer, start_rm
from wharf.core.login_throttle import LoginLimits, LoginThrottle
from wharf.resource_manager.api.deps import AppState

LIMITS = LoginLimits(max_failures_per_account=3, max_failures_per_address=6, window_seconds=60)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_the_limits_are_the_settings(sqlite_rm_url: str) -> None:
    limits = LoginLimits(max_failures_per_account=2)
    server = start_rm(sqlite_rm_url, login_limits=limits)
    try:
        with httpx.Client(base_url=server.url, timeout=30) as http:
            assert [password(http, "ops", "guess").status_code for _ in range(3)] == [
                401,
                401,
                429,
            ]
    finally:
        server.stop()


@pytest.fixture
def login_clock(server: LiveServer) -> Clock:
    state: AppState = server.app.state.rm
    assert state.login_throttle.limits == LoginLimits()
    state.login_throttle = LoginThrottle(LIMITS)
    state.clock = fake = Clock()
    return fake


def password(http: httpx.Client, username: str, secret: str) -> httpx.Response:
    return http.post("/v1/auth/login", json={"username": username, "password": secret})


def key(http: httpx.Client, api_key: str) -> httpx.Response:
    return http.post("/v1/auth/login", json={"api_key": api_key})


def test_a_burst_of_wrong_passwords_is_throttled(http: httpx.Client, login_clock: Clock) -> None:
    statuses = [password(http, "ops", f"guess-{i}").status_code for i in range(200)]
    assert statuses[:3] == [401] * 3
    assert set(statuses[3:]) == {429}
    refused = password(http, "ops", OPS_PASSWORD)  # the right password is not even checked
    assert refused.status_code == 429, refused.text
    assert refused.headers["retry-after"] == "60"
    assert refused.json()["error"] == "AuthenticationError"
    assert key(http, BOB_KEY).status_code == 200  # another principal logs in
    login_clock.now += 60
    assert password(http, "ops", OPS_PASSWORD).status_code == 200


def test_wrong_api_keys_count_against_the_name_inside_them(
    http: httpx.Client, login_clock: Clock
) -> None:
    for i in range(3):
        assert key(http, f"wrm.bob.{i:048d}").status_code == 401
    assert key(http, BOB_KEY).status_code == 429
    login_clock.now += 30
    assert key(http, BOB_KEY).headers["retry-after"] == "30"


def test_a_success_resets_the_principal_count(http: httpx.Client, login_clock: Clock) -> None:
    for _ in range(2):  # four failures in all: more than the limit allows without a reset
        for _ in range(2):
            assert password(http, "ops", "guess").status_code == 401
        assert password(http, "ops", OPS_PASSWORD).status_code == 200


def test_one_address_guessing_many_principals_is_throttled(
    http: httpx.Client, login_clock: Clock
) -> None:
    for name in ("a", "b", "c", "d", "e", "f"):
        assert password(http, name, "guess").status_code == 401
    assert key(http, BOB_KEY).status_code == 429
    login_clock.now += 60
    assert key(http, BOB_KEY).status_code == 200


def test_many_right_keys_at_once_are_never_throttled(
    server: LiveServer, login_clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Logins of one service account's key in flight at once (pods sharing it) were refused
    past the limit: each counted as a failure until it succeeded."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    checker = server.app.state.rm.checker
    together = threading.Barrier(12, timeout=30)
    checked = checker.check_api_key

    def check_api_key(secret: str) -> object:  # all 12 are being verified at once
        together.wait()
        return checked(secret)

    monkeypatch.setattr(checker, "check_api_key", check_api_key)

    def one(_: int) -> int:
        with httpx.Client(base_url=server.url, timeout=60) as http:
            return key(http, BOB_KEY).status_code

    with ThreadPoolExecutor(12) as pool:
        assert list(pool.map(one, range(12))) == [200] * 12
