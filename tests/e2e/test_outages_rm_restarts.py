"""A Resource Manager replica restarted again and again (a crash loop) beside one that serves on,
both ``wharf resource-manager serve`` processes on one PostgreSQL database: a start is no
downtime while another replica serves, so a dead holder's lease lapses on time instead of being
extended by every start.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import _server
from tests.e2e.team import Service, free_port
from tests.resource_manager.service.helpers import gpus, klass, policy_spec, pool_spec, request_spec
from wharf.core.enums import ResourceRequestStatus
from wharf.resource_manager.client.http import HttpResourceManager

SWEEP_SECONDS = 30.0  # the default: a start used to give every live lease this long again
LEASE_SECONDS = 4
LIVENESS_SECONDS = 2.0  # the replicas' default liveness interval: how often the live one beats


@pytest.fixture
def two_replicas(
    tmp_path: Path, _servers: dict[str, Any]
) -> Iterator[tuple[Service, Service, str]]:
    """Two RM replicas on a fresh PostgreSQL database, and the administrator's API key."""
    url = _server(_servers, "postgresql").create().render_as_string(hide_password=False)
    env = {k: v for k, v in os.environ.items() if not k.startswith("WHARF_")}
    env["WHARF_HOME"] = str(tmp_path / "home")
    key, secret = "rm-admin-" + secrets.token_urlsafe(24), secrets.token_urlsafe(48)
    args = ["--db-url", url, "--admin-api-key", key, "--secret-key", secret]
    args += ["--sweep-interval", str(SWEEP_SECONDS), "--log-level", "warning"]
    services = []
    for i in range(2):
        port = free_port()
        services.append(
            Service(
                f"resource manager {i}",
                ["resource-manager", "serve", "--port", str(port), *args],
                env,
                f"http://127.0.0.1:{port}/health",
                tmp_path / f"resource-manager-{i}.log",
            )
        )
    try:
        services[0].start()  # migrates the database
        services[1].start()
        yield services[0], services[1], key
    finally:
        for service in services:
            service.stop()


def test_a_replica_restarting_in_a_loop_keeps_no_dead_holders_lease_alive(
    two_replicas: tuple[Service, Service, str],
) -> None:
    """A holder takes the only GPU with a 4 s lease and dies (never renews). One replica serves
    on; the other is killed and started again and again. The lease lapses within a beat of the
    live replica after its deadline; before, every start gave it another sweep interval (30 s),
    so it never lapsed while the loop went on."""
    live, looping, key = two_replicas
    with HttpResourceManager(live.health_url.removesuffix("/health"), api_key=key) as rm:
        rm.pools.create(pool_spec("gpus", klass("h100", GPU=1)))
        rm.policies.create(policy_spec("team"))
        held = rm.requests.create(request_spec(gpus(1), lease=LEASE_SECONDS))
        assert held.status is ResourceRequestStatus.ALLOCATED
        assert held.lease_expires_at is not None
        deadline = held.lease_expires_at
        give_up = deadline + timedelta(seconds=3 * LEASE_SECONDS + SWEEP_SECONDS / 2)
        restarts = 0
        while True:
            found = rm.requests.get(held.id)
            seen_at = datetime.now(UTC)
            if found.status is not ResourceRequestStatus.ALLOCATED or seen_at > give_up:
                break
            looping.stop()  # SIGKILL
            looping.start()  # until healthy: its start-up transaction has committed
            restarts += 1
        assert restarts >= 2, "the replica was not restarted while the lease was live"
        assert found.status is ResourceRequestStatus.EXPIRED, (found.status, found.lease_expires_at)
        late = (seen_at - deadline).total_seconds()
        # The live replica beats every 2 s; one restart's start-up may pass before we look.
        assert late < 2 * LIVENESS_SECONDS + 5, late
