"""Revocation across the workers of one server: the semantics ``wharf.server.auth.cache`` states.

Two apps on one database stand for two worker processes (or replicas), each with its own auth
cache on its own fake monotonic clock. A revocation through one worker takes effect there at once;
the other keeps accepting an API key (and run tokens issued through it) it checked recently for at
most ``auth_cache_seconds`` more. A user's access token is never cached: logging out through one
worker locks it out of every worker at once.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from tests.server.conftest import World
from tests.server.live import LiveServer, open_state, service_key
from tests.server.things import Things
from wharf.server.app import create_app
from wharf.server.auth import api_keys
from wharf.server.auth.cache import AuthCache
from wharf.server.auth.principal import Principal
from wharf.store.account_models import ProjectRole

TTL = 5.0


class Monotonic:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Worker:
    url: str
    clock: Monotonic

    def status(self, credential: str, path: str) -> int:
        headers = {"authorization": f"Bearer {credential}"}
        return httpx.get(f"{self.url}{path}", headers=headers, timeout=30).status_code


@pytest.fixture
def workers(world: World) -> Iterator[tuple[Worker, Worker]]:
    """Worker A is ``world``'s server; worker B a second server on the same database."""
    first = Monotonic()
    world.state.auth_cache = AuthCache(TTL, first)
    state, stores = open_state(world.stores.store.url, token_clock=world.clock)
    second = Monotonic()
    state.auth_cache = AuthCache(TTL, second)
    server = LiveServer(create_app(state.settings, state=state)).start()
    try:
        yield Worker(world.url, first), Worker(server.url, second)
    finally:
        server.stop()
        stores.close()


def test_a_revoked_key_and_its_run_tokens_expire_from_other_workers_caches(
    world: World, workers: tuple[Worker, Worker]
) -> None:
    a, b = workers
    account = world.state.accounts.service_accounts.create("orchestrator")
    world.state.accounts.memberships.set_role(
        world.a.id, ProjectRole.MEMBER, service_account_id=account.id
    )
    key = service_key(world.state, account.id)
    run = Things(world).run
    token = world.client(key).post(f"/api/v1/runs/{run.id}/token").json()["access_token"]
    path = f"/api/v1/runs/{run.id}"
    for worker in (a, b):  # both check and remember both credentials
        assert worker.status(key, path) == worker.status(token, path) == 200

    parsed = api_keys.parse(key)
    assert parsed is not None
    revoke = f"/api/v1/service_accounts/{account.id}/api_keys/{parsed[0]}/revoke"
    assert world.as_role("admin").post(revoke).status_code == 200

    assert a.status(key, path) == a.status(token, path) == 401  # the revoking worker: at once
    b.clock.now += TTL - 0.01
    assert b.status(key, path) == b.status(token, path) == 200  # still cached there...
    b.clock.now += 0.01
    assert b.status(key, path) == b.status(token, path) == 401  # ...for at most the TTL


def test_logging_out_locks_a_user_out_of_every_worker_at_once(
    world: World, workers: tuple[Worker, Worker]
) -> None:
    a, b = workers
    token = world.credentials["member"]
    assert token is not None
    for worker in (a, b):
        assert worker.status(token, "/api/v1/auth/me") == 200
    assert world.client(token).post("/api/v1/auth/logout").status_code == 204
    for worker in (a, b):
        assert worker.status(token, "/api/v1/auth/me") == 401


def test_a_removed_members_run_token_expires_from_other_workers_caches(
    world: World, workers: tuple[Worker, Worker]
) -> None:
    """The membership check of a run token is remembered with the token (no read per call)."""
    a, b = workers
    run = Things(world).run
    member = world.as_role("member")
    token = member.post(f"/api/v1/runs/{run.id}/token").json()["access_token"]
    path = f"/api/v1/runs/{run.id}"
    for worker in (a, b):
        assert worker.status(token, path) == 200
    removed = world.as_role("padmin").delete(
        f"/api/v1/projects/{world.a.id}/members", params={"user_id": str(world.users["member"].id)}
    )
    assert removed.status_code == 204, removed.text

    assert a.status(token, path) == 403  # the worker that removed the member: at once
    b.clock.now += TTL - 0.01
    assert b.status(token, path) == 200  # still cached there...
    b.clock.now += 0.01
    assert b.status(token, path) == 403  # ...for at most the TTL


def test_a_check_under_way_when_the_cache_is_cleared_is_not_remembered() -> None:
    clock = Monotonic()
    cache = AuthCache(TTL, clock)
    principal = Principal("service_account", uuid.uuid4(), "robot", False)
    started = cache.generation  # a request starts checking the credential...
    cache.clear()  # ...a revocation through this process clears the cache meanwhile...
    cache.put("k", principal, None, started)  # ...and the stale answer is dropped
    assert cache.get("k", 0.0) is None
    cache.put("k", principal, None, cache.generation)
    assert cache.get("k", 0.0) == principal
    clock.now += TTL
    assert cache.get("k", 0.0) is None
