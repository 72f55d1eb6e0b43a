"""``wharf resource-manager serve``: the admin key's minimum length, a database it cannot open
(one line, before serving), and ``--bootstrap-pool``
(a fresh RM users can run steps on at once; the same options again change nothing). Real
server processes on a SQLite database."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests.cli.test_cli import assert_one_line_error
from tests.cli.test_rm_cli import run
from tests.resource_manager.api.live import free_socket
from wharf.resource_manager.client.http import HttpResourceManager
from wharf.resource_manager.contract.models import PoolUpdate, ResourceRequestCreate
from wharf.resource_manager.domain import load

KEY = "k" * 16


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WHARF_")}
    env["WHARF_HOME"] = str(tmp_path / "home")
    return env


@contextmanager
def serving(tmp_path: Path, *options: str) -> Iterator[tuple[str, str]]:
    """A ``resource-manager serve`` process on ``tmp_path/rm.db``: its URL and its stderr so far."""
    port = free_socket().getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / f"rm-{port}.log"
    command = [sys.executable, "-m", "wharf.cli.main", "resource-manager", "serve"]
    command += ["--port", str(port), "--log-level", "warning", "--admin-api-key", KEY]
    command += ["--db-url", f"sqlite:///{tmp_path / 'rm.db'}", *options]
    with log.open("w") as out:
        process = subprocess.Popen(
            command,
            env=_env(tmp_path),
            stdout=subprocess.DEVNULL,
            stderr=out,
        )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert process.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "the RM did not start"
            time.sleep(0.1)
        yield url, log.read_text()
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_the_admin_key_states_its_minimum_length(tmp_path: Path) -> None:
    helped = run("resource-manager", "serve", "--help", env=_env(tmp_path))
    assert "at least 16 characters" in " ".join(helped.stdout.split())
    short = run("resource-manager", "serve", "--admin-api-key", "short", env=_env(tmp_path))
    assert_one_line_error(short, "--admin-api-key must be at least 16 characters long")


def test_bad_bootstrap_pools_are_one_line(tmp_path: Path) -> None:
    for spec, words in (("team", "expects NAME=RESOURCE"), ("team=tpu=2", "Unknown resource")):
        result = run(
            "resource-manager", "serve", "--admin-api-key", KEY, "--bootstrap-pool", spec,
            "--db-url", f"sqlite:///{tmp_path / 'rm.db'}", env=_env(tmp_path),
        )  # fmt: skip
        assert_one_line_error(result, words)


def test_a_database_it_cannot_open_is_one_line(tmp_path: Path) -> None:
    missing = f"sqlite:///{tmp_path / 'missing' / 'rm.db'}"
    for url, words in ((missing, "does not exist"), ("nonsense://x", "Unsupported store URL")):
        result = run(
            "resource-manager", "serve", "--admin-api-key", KEY, "--db-url", url,
            env=_env(tmp_path),
        )  # fmt: skip
        assert_one_line_error(result, words)


def _request(account: str) -> ResourceRequestCreate:
    return load(
        ResourceRequestCreate,
        {
            "subjects": [{"nodes": [{"subject_type": "account", "subject_id": account}]}],
            "demands": [{"resource": "CPU", "quantity": 1}],
            "lease_seconds": 60,
        },
    )


def test_bootstrap_pools_let_every_account_in_and_are_idempotent(tmp_path: Path) -> None:
    options = ("--bootstrap-pool", "team=cpu=4,memory=8GiB", "--bootstrap-pool", "gpus=gpu:h100=2")
    with serving(tmp_path, *options) as (url, log):
        assert "made pool 'team' and policy 'team-everyone'" in log
        with HttpResourceManager(url, api_key=KEY) as rm:
            assert sorted(p.name for p in rm.pools.list()) == ["gpus", "team"]
            assert rm.requests.create(_request("alice")).status.value == "allocated"
            # an administrator changes the pool afterwards ...
            rm.pools.update("team", load(PoolUpdate, {"concurrency_limit": 3}))
    with serving(tmp_path, *options) as (url, log):  # ... a restart leaves it so
        assert "pool and policy exist, left as they are" in log
        with HttpResourceManager(url, api_key=KEY) as rm:
            assert rm.pools.get("team").concurrency_limit == 3
            assert len(rm.policies.list("team")) == 1
            gpus = rm.pools.get("gpus")
            assert [c.name for c in gpus.classes] == ["h100"]


def test_a_port_in_use_is_one_line_and_opens_nothing(tmp_path: Path) -> None:
    """As ``wharf server serve``: not uvicorn's start-up log ending in a bind error (exit 3)."""
    taken = free_socket()
    taken.listen()
    port = taken.getsockname()[1]
    try:
        result = run(
            *("resource-manager", "serve", "--port", str(port), "--admin-api-key", KEY),
            *("--db-url", f"sqlite:///{tmp_path / 'rm.db'}"),
            env=_env(tmp_path),
        )
    finally:
        taken.close()
    assert_one_line_error(result, f"Cannot listen on 127.0.0.1:{port}: Address already in use")
    assert result.returncode == 1
    assert not (tmp_path / "rm.db").exists()
