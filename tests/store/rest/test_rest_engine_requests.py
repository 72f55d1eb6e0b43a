"""The engine over REST: how many HTTP requests a pipeline costs per step (issue 5 §6: at most
3), counted on the wire against a real server. Counting is deterministic: the engine reads the
run's status only where it ends the run (``runs.finish``; a stop is refused by the
step-creating requests themselves)."""

from __future__ import annotations

import collections
import re
import shutil
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from tests.e2e import steps_lib
from tests.server.live import LiveServer, admin_key, open_state, shared_default_stack
from wharf import pipeline
from wharf.config.global_config import load_config
from wharf.core.enums import ExecutionStatus
from wharf.sdk.workspace import Workspace
from wharf.store.models import PageRequest, StepRunFilter
from wharf.store.rest import RestStore

STEPS = 20
_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


class CountingTransport(httpx.BaseTransport):
    """Sends over real HTTP and counts the requests by route (ids replaced by ``{id}``)."""

    def __init__(self) -> None:
        self._inner = httpx.HTTPTransport()
        self.routes: collections.Counter[str] = collections.Counter()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.routes[f"{request.method} {_ID.sub('{id}', request.url.path)}"] += 1
        return self._inner.handle_request(request)

    def close(self) -> None:
        self._inner.close()


@pytest.fixture
def server(
    live_server: LiveServer, tmp_path: Path, _sqlite_template: Path
) -> Iterator[tuple[str, str]]:
    path = tmp_path / f"server-{uuid.uuid4().hex[:8]}.db"
    shutil.copyfile(_sqlite_template, path)
    state, stores = open_state(f"sqlite:///{path}")
    shared_default_stack(state, tmp_path / "shared-artifacts")
    live_server.use(state)
    try:
        yield live_server.url, admin_key(state)
    finally:
        stores.close()


def open_workspace(url: str, key: str, home: Path) -> tuple[Workspace, CountingTransport]:
    transport = CountingTransport()
    config = load_config({"WHARF_HOME": str(home), "WHARF_SERVER_URL": url, "WHARF_API_KEY": key})
    workspace = Workspace.open(config, store=RestStore(url, key, transport=transport))
    frozen = datetime.now(UTC)
    workspace.clock = lambda: frozen
    return workspace, transport


@pipeline(name="rest_chain")
def chain(seed: int) -> None:
    value = steps_lib.produce(value=seed)
    for _ in range(STEPS - 1):
        value = steps_lib.double(value)


def run_counted(workspace: Workspace, transport: CountingTransport, seed: int) -> dict[str, int]:
    transport.routes.clear()
    run = chain.run_in(workspace, seed=seed)
    routes = dict(transport.routes)
    assert run.status is ExecutionStatus.COMPLETED, run.status_reason
    steps = workspace.store.steps.list(StepRunFilter(run_id=run.id), PageRequest(size=100))
    assert steps.total == STEPS
    return routes


def per_step(routes: dict[str, int]) -> float:
    return sum(routes.values()) / STEPS


def test_at_most_three_requests_per_step(server: tuple[str, str], tmp_path: Path) -> None:
    url, key = server
    workspace, transport = open_workspace(url, key, tmp_path / "home")
    seed = uuid.uuid4().int % 10**9
    try:
        uncached = run_counted(workspace, transport, seed)
        # per step: the cache lookup that creates it, and its end with its output
        assert uncached["POST /api/v1/steps/find_cached_or_create"] == STEPS
        assert uncached["POST /api/v1/steps/{id}/finish"] == STEPS
        # the run's end reads its status itself: the runner reads none of its own
        assert "GET /api/v1/runs/{id}/status" not in uncached
        assert uncached["GET /api/v1/runs/{id}"] == 1
        for route in ("POST /api/v1/steps", "PATCH /api/v1/steps/{id}"):
            assert route not in uncached
        assert not any("artifact_versions" in route for route in uncached)
        assert per_step(uncached) <= 3, uncached

        cached = run_counted(workspace, transport, seed)
        # per step: the lookup, which records the cached step too; its outputs are known
        assert cached["POST /api/v1/steps/find_cached_or_create"] == STEPS
        assert "POST /api/v1/steps" not in cached
        assert not any("artifact_versions" in route for route in cached)
        assert per_step(cached) <= 3, cached
    finally:
        workspace.close()

    fresh, fresh_transport = open_workspace(url, key, tmp_path / "home")
    try:
        cold = run_counted(fresh, fresh_transport, seed)
        # a workspace that did not run it gets each cached step's outputs with the lookup:
        # one request per step, plus the run's own requests
        assert cold["POST /api/v1/steps/find_cached_or_create"] == STEPS
        assert "POST /api/v1/steps" not in cold
        assert not any("artifact_versions" in route for route in cold)
        # ... and reads its stack once (a workspace remembers its stacks and components)
        stack_reads = {"GET /api/v1/stacks/by-name": 1, "GET /api/v1/components/{id}": 2}
        assert not any(route in cached for route in stack_reads)
        assert cold == {**cached, **stack_reads}, (cold, cached)
        assert per_step(cold) <= 3, cold
    finally:
        fresh.close()
