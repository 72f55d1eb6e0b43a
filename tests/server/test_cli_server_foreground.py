# ruff: noqa: F811  (fixtures imported from the server tests)
"""``wharf server status`` finds a server started in the foreground with ``wharf server serve``,
and ``serve`` refuses a Resource Manager token the RM rejects, or a database it cannot open, in
one line. Real processes."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from tests.cli.test_cli import assert_one_line_error
from tests.resource_manager.api.live import ALICE_KEY
from tests.resource_manager.api.live import LiveServer as RmServer
from tests.server.resource_world import _rm_sqlite_template, rm_server  # noqa: F401
from tests.server.test_cli_server import free_port, wharf
from tests.waiting import wait_until

START_TIMEOUT = 60.0


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WHARF_")}
    env["WHARF_HOME"] = str(home)
    return env


def test_status_finds_a_foreground_server(tmp_path: Path) -> None:
    home = tmp_path / "home"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    nothing = wharf(home, "server", "status", "--port", str(port))
    assert f"No Wharf server is running at {url}" in nothing.stdout
    assert nothing.returncode == 3  # as a service's status command says "not running"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "wharf.cli.main",
            "server",
            "serve",
            "--port",
            str(port),
            "--db-url",
            f"sqlite:///{tmp_path / 'ws.db'}",
            "--log-level",
            "warning",
        ],
        env=_env(home),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            found = wharf(home, "server", "status", "--port", str(port))
            if "healthy" in found.stdout:
                break
            assert process.poll() is None and time.monotonic() < deadline, found.stdout
            time.sleep(0.2)
        assert f"Wharf server at {url}: healthy" in found.stdout
        assert "wharf server serve" in found.stdout
        assert found.returncode == 0
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_serve_refuses_a_token_the_resource_manager_rejects(
    tmp_path: Path, rm_server: RmServer
) -> None:
    home = tmp_path / "home"
    args = ["--db-url", f"sqlite:///{tmp_path / 'ws.db'}", "--port", str(free_port())]
    args += ["--resource-manager-url", rm_server.url]
    refused = wharf(home, "server", "serve", *args, "--resource-manager-token", "wrm.x." + "z" * 40)
    assert_one_line_error(refused, "rejected --resource-manager-token")
    assert "Traceback" not in refused.stderr
    # a token it accepts passes the check (the server then starts: stopped at once here)
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "wharf.cli.main",
            "server",
            "serve",
            *args,
            "--resource-manager-token",
            ALICE_KEY,
            "--log-level",
            "warning",
        ],
        env=_env(home),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + START_TIMEOUT
        port = args[3]
        while wharf(home, "server", "status", "--port", port).stdout.find("healthy") < 0:
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            assert time.monotonic() < deadline
            time.sleep(0.2)
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_serve_refuses_a_database_it_cannot_open_in_one_line(tmp_path: Path) -> None:
    home = tmp_path / "home"
    port = str(free_port())
    missing = f"sqlite:///{tmp_path / 'missing' / 'ws.db'}"
    for url, fragment in ((missing, "does not exist"), ("nonsense://x", "Unsupported store URL")):
        refused = wharf(home, "server", "serve", "--port", port, "--db-url", url)
        assert_one_line_error(refused, fragment)


def test_up_refuses_a_port_where_a_foreground_server_answers(tmp_path: Path) -> None:
    """``up`` used to take the foreground server's answers for its own (whose process had
    failed to bind) and report it running."""
    home = tmp_path / "home"
    port = str(free_port())
    db = f"sqlite:///{tmp_path / 'ws.db'}"
    command = [sys.executable, "-m", "wharf.cli.main", "server", "serve", "--port", port]
    process = subprocess.Popen(
        [*command, "--db-url", db, "--log-level", "warning"],
        env=_env(home),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        answering = wait_until(
            lambda: "healthy" in wharf(home, "server", "status", "--port", port).stdout,
            timeout=START_TIMEOUT,
        )
        assert answering and process.poll() is None
        refused = wharf(home, "server", "up", "--port", port, "--db-url", db)
        assert_one_line_error(refused, f"A server already answers at http://127.0.0.1:{port}")
        assert "No Wharf server is running." in wharf(home, "server", "down").stdout
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_serve_and_up_refuse_a_short_secret_key_in_one_line(tmp_path: Path) -> None:
    """It was "'secret_key' needs 32+ entries" (serve) or a server that never started (up)."""
    home = tmp_path / "home"
    for command in ("serve", "up"):
        refused = wharf(home, "server", command, "--port", str(free_port()), "--secret-key", "k")
        assert_one_line_error(refused, "'--secret-key': needs 32+ characters (it has 1)")


def test_serve_and_up_refuse_an_admin_password_they_would_ignore_or_set_too_short(
    tmp_path: Path,
) -> None:
    """Without --admin-username it was ignored; with a 1-character one the admin got it, though
    every other password needs 8."""
    home = tmp_path / "home"
    for command in ("serve", "up"):
        port = ["--port", str(free_port())]
        alone = wharf(home, "server", command, *port, "--admin-password", "long enough pw")
        assert_one_line_error(alone, "--admin-password needs --admin-username")
        short = wharf(
            home, "server", command, *port, "--admin-username", "root", "--admin-password", "x"
        )
        assert_one_line_error(short, "'--admin-password': needs 8 to 1024 characters")


def test_serve_refuses_a_port_in_use_in_one_line(tmp_path: Path) -> None:
    """It used to start, log uvicorn's bind error among its start-up lines and exit 3."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        refused = wharf(tmp_path / "home", "server", "serve", "--port", port)
    assert_one_line_error(refused, f"Cannot listen on 127.0.0.1:{port}: Address already in use")
