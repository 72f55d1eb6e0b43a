"""``wharf server up | status | down``, ``wharf login | logout`` and the store selection, with a
real background server (two worker processes) in a temporary Wharf home."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from wharf.config.global_config import load_config
from wharf.sdk.workspace import open_store
from wharf.store.rest import RestStore
from wharf.store.sql import SqlStore


def wharf(home: Path, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WHARF_")}
    env["WHARF_HOME"] = str(home)
    return subprocess.run(
        [sys.executable, "-m", "wharf.cli.main", *args],
        env=env,
        input=input,
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_open_store_picks_rest_when_a_server_is_configured(tmp_path: Path) -> None:
    config = load_config(
        {"WHARF_HOME": str(tmp_path), "WHARF_SERVER_URL": "http://h:1", "WHARF_API_KEY": "k"}
    )
    store = open_store(config)
    assert isinstance(store, RestStore) and store.url == "http://h:1"
    store.close()
    store = open_store(load_config({"WHARF_HOME": str(tmp_path)}))
    assert isinstance(store, SqlStore)
    store.close()


@pytest.mark.slow
def test_background_server_login_and_logout(tmp_path: Path) -> None:
    home = tmp_path / "home"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    assert "No Wharf server is running" in wharf(home, "server", "status").stdout
    up = wharf(
        home,
        "server",
        "up",
        "--port",
        str(port),
        "--workers",
        "2",
        "--admin-username",
        "root",
        "--admin-password",
        "root-password",
    )
    assert up.returncode == 0, up.stderr + up.stdout
    try:
        assert f"running at {url}" in up.stdout
        assert "healthy" in wharf(home, "server", "status").stdout
        again = wharf(home, "server", "up", "--port", str(port))
        assert again.returncode == 1 and "already running" in again.stderr
        info = json.loads((home / "server" / "server.json").read_text())
        assert "root-password" not in " ".join(info["command"])  # secrets travel in the env
        assert (home / "server" / "secret_key").stat().st_mode & 0o777 == 0o600

        bad = wharf(home, "login", url, "-u", "root", "--password", "nope")
        assert bad.returncode == 1 and bad.stderr.startswith("Error: Invalid username or password")
        login = wharf(home, "login", url, "-u", "root", input="root-password\n")
        assert login.returncode == 0 and "as user 'root'" in login.stdout, login.stderr
        saved = json.loads((home / "config.json").read_text())
        assert saved["server_url"] == url and saved["api_key"].count(".") == 2
        # the token is the owner's alone: 0600 in a 0700 home (the secret key's too)
        assert (home / "config.json").stat().st_mode & 0o777 == 0o600
        assert home.stat().st_mode & 0o777 == 0o700
        assert (home / "server").stat().st_mode & 0o777 == 0o700
        listed = wharf(home, "runs", "list", "--output", "json")
        assert listed.returncode == 0 and json.loads(listed.stdout) == [], listed.stderr
        token = saved["api_key"]
        assert (
            httpx.get(
                f"{url}/api/v1/auth/me", headers={"authorization": f"Bearer {token}"}
            ).status_code
            == 200
        )
        out = wharf(home, "logout")
        assert out.returncode == 0 and f"Logged out of {url}" in out.stdout
        assert (
            httpx.get(
                f"{url}/api/v1/auth/me", headers={"authorization": f"Bearer {token}"}
            ).status_code
            == 401
        )
        assert "server_url" not in json.loads((home / "config.json").read_text())
    finally:
        down = wharf(home, "server", "down")
    assert down.returncode == 0 and "Stopped" in down.stdout
    assert "No Wharf server is running" in wharf(home, "server", "status").stdout
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"{url}/health", timeout=1)
