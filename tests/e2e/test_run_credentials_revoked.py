"""A run whose service account's API key is revoked while it runs (a pipeline script of a real
process, over a real workspace server): the script stops its run at once and exits non-zero
with one error whose one-line message names the cause (no warnings, no other traceback); the
server, which it can no longer write to, ends the run as lost once its heartbeat deadline has
passed (nothing is left running)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest

from tests.e2e.test_rest_lost_orchestrator import SCRIPT, register_plain_stack
from tests.e2e.test_signals import alive
from tests.server.conftest import World, live, world  # noqa: F401 (fixtures)
from tests.server.live import service_key
from tests.waiting import wait_for
from wharf.config.global_config import load_config
from wharf.core.enums import ExecutionStatus
from wharf.server.auth import api_keys
from wharf.store.account_models import ProjectRole
from wharf.store.defaults import ensure_default_user
from wharf.store.models import StepRunFilter

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX processes")

EXIT_SECONDS = 30.0
"""How long the script may take to exit once its key is revoked (it beats every 0.2 s)."""


@dataclass
class Bot:
    """A service account, member of project A, with one API key; ``env``: a pipeline script's
    environment on a stack of its own."""

    account_id: str
    key_id: str
    env: dict[str, str]
    isolated: bool


@pytest.fixture(params=["local", "local_process"])
def bot(request: pytest.FixtureRequest, world: World, tmp_path: Path) -> Iterator[Bot]:  # noqa: F811
    """The bot, on a stack whose orchestrator runs its steps inline (``local``) or each in a
    process of its own (``local_process``)."""
    ensure_default_user(world.stores.store)  # whom a service account's runs act for
    account = world.state.accounts.service_accounts.create("bot")
    world.state.accounts.memberships.set_role(
        world.a.id, ProjectRole.MEMBER, service_account_id=account.id
    )
    key = service_key(world.state, account.id)
    env = {k: v for k, v in os.environ.items() if not k.startswith("WHARF_")}
    env |= {
        "WHARF_HOME": str(tmp_path / "home"),
        "WHARF_SERVER_URL": world.url,
        "WHARF_API_KEY": key,
        "WHARF_PROJECT": "A",
        "WHARF_ACTIVE_STACK": "plain",
        "WHARF_HEARTBEAT_INTERVAL": "0.2",
    }
    config = load_config(env)
    register_plain_stack(config, request.param)
    parsed = api_keys.parse(key)
    assert parsed is not None
    yield Bot(str(account.id), str(parsed[0]), env, isolated=request.param == "local_process")


def test_a_run_whose_api_key_is_revoked_stops_with_one_error(
    world: World,  # noqa: F811
    bot: Bot,
    tmp_path: Path,
) -> None:
    script = tmp_path / "held.py"
    script.write_text(SCRIPT)
    release, started = tmp_path / "release", tmp_path / "started"
    process = subprocess.Popen(
        [sys.executable, str(script), str(release), str(started)],
        cwd=tmp_path,
        env=bot.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(started.exists, "the step to start", EXIT_SECONDS)
        admin = world.as_role("admin")
        path = f"/api/v1/service_accounts/{bot.account_id}/api_keys/{bot.key_id}/revoke"
        assert admin.post(path).status_code == 200
        _, err = process.communicate(timeout=EXIT_SECONDS)  # the step never finishes
    finally:
        release.touch()
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 1, err
    assert err.count("Traceback") == 1 and "WARNING" not in err, err  # the script's own error
    (run,) = world.stores.store.runs.list().items
    line = (
        f"Run '{run.name}' stopped: the workspace server refused its credentials (401: The API "
        "key behind this token has been revoked). Nothing was written after that; the server "
        "ends the run as 'orchestrator lost' once its heartbeat deadline passes."
    )
    assert [x for x in err.splitlines() if "stopped:" in x] == [
        f"wharf.execution.refusal.RunRefusedError: {line}"
    ]
    assert err.splitlines()[-1] == f"wharf.execution.refusal.RunRefusedError: {line}"
    # Nothing was written after the revocation: the run and its step are as they were.
    assert run.status is ExecutionStatus.RUNNING and run.heartbeat_deadline is not None
    (step,) = world.stores.store.steps.list(StepRunFilter(run_id=run.id)).items
    assert step.status is ExecutionStatus.RUNNING
    if bot.isolated:  # its own process, refused too, is gone with the run's
        pid = step.pid
        assert pid is not None
        wait_for(lambda: not alive(pid), "the step's process to end", EXIT_SECONDS)
    # The server's sweep ends it, with the reason it can give: nobody beats for it any more.
    later = run.heartbeat_deadline + timedelta(seconds=1)
    (lost,) = world.stores.store.runs.fail_lost_orchestrators(later)
    assert lost.run.id == run.id and lost.run.status is ExecutionStatus.FAILED
    assert (lost.run.status_reason or "").startswith("orchestrator lost")
    assert [s.status for s in lost.steps] == [ExecutionStatus.FAILED]
