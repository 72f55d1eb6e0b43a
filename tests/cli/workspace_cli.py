"""Shared by the CLI tests that run commands as a user of a live workspace server paired with a
live Resource Manager (the ``team`` fixture of ``tests.server.resource_world``)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.server.live import LiveServer, start_server
from tests.server.resource_world import Team


@pytest.fixture(scope="module")
def live() -> Iterator[LiveServer]:
    server = start_server()
    yield server
    server.stop()


def workspace_env(team: Team, tmp_path: Path, role: str) -> dict[str, str]:
    """A terminal of ``role`` (admin, member, viewer) logged in to the team's server through
    ``WHARF_SERVER_URL``/``WHARF_API_KEY``, with a home of its own and no other Wharf setting."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("WHARF_")}
    credential = team.world.credentials[role]
    assert credential is not None
    env.update(
        WHARF_HOME=str(tmp_path / "home"), WHARF_SERVER_URL=team.world.url, WHARF_API_KEY=credential
    )
    return env
