"""``wharf server serve`` and ``up`` refuse, in one line and before serving, what would leave a
server no one can use or a message naming an internal field: an ``--admin-username`` with no
password for an admin that has none, when no terminal can ask for it; and a number of seconds
that is not finite or out of bounds (``--access-token-ttl``, ``up --timeout``). An admin that
has a password already restarts with its name alone, and at a terminal the password is asked
for. Real ``wharf`` processes (stdin not a terminal, or a pseudo-terminal)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.cli.test_cli import assert_one_line_error
from tests.server.test_cli_server import free_port, wharf
from tests.server.test_cli_server_foreground import _env
from tests.waiting import wait_until

START_TIMEOUT = 60.0
PASSWORD = "admin-password-1"


def _serve(
    home: Path, db: Path, port: int, *args: str, stdin: int = subprocess.DEVNULL
) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "wharf.cli.main", "server", "serve", "--port", str(port)]
    command += ["--db-url", f"sqlite:///{db}", "--log-level", "warning", *args]
    return subprocess.Popen(
        command,
        env=_env(home),
        stdin=stdin,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # no controlling terminal: the prompt reads its stdin
    )


def _login(url: str) -> int:
    answer = httpx.post(
        f"{url}/api/v1/auth/login", json={"username": "admin", "password": PASSWORD}, timeout=30
    )
    return answer.status_code


def _answers(url: str) -> bool:
    try:
        return httpx.get(f"{url}/health", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def _started(process: subprocess.Popen[str], url: str) -> bool:
    """Whether the server answers at ``url`` (waits until it does, exits or the time is up)."""
    wait_until(lambda: _answers(url) or process.poll() is not None, timeout=START_TIMEOUT)
    return _answers(url)


def _why(process: subprocess.Popen[str]) -> str:
    """What a server that does not answer said, if it ended (a live one's stderr never ends)."""
    if process.poll() is None or process.stderr is None:
        return "the server is running but does not answer"
    return process.stderr.read()


def _stop(process: subprocess.Popen[str]) -> None:
    process.terminate()
    process.wait(timeout=30)


@pytest.mark.parametrize("command", ["serve", "up"])
def test_an_admin_without_a_password_is_refused_without_a_terminal(
    tmp_path: Path, command: str
) -> None:
    """It used to start with an admin no one could log in as (401 at every login)."""
    home = tmp_path / "home"
    args = ["--port", str(free_port()), "--db-url", f"sqlite:///{tmp_path / 'ws.db'}"]
    refused = wharf(home, "server", command, *args, "--admin-username", "admin", input="")
    assert_one_line_error(refused, "Admin 'admin' has no password: give it in")
    assert "WHARF_SERVER_ADMIN_PASSWORD" in refused.stderr
    assert "No Wharf server is running." in wharf(home, "server", "down").stdout


def test_an_admin_with_a_password_restarts_with_its_name_alone(tmp_path: Path) -> None:
    home, db, port = tmp_path / "home", tmp_path / "ws.db", free_port()
    url = f"http://127.0.0.1:{port}"
    admin = ("--admin-username", "admin")
    for args in ((*admin, "--admin-password", PASSWORD), admin):
        process = _serve(home, db, port, *args)
        try:
            assert _started(process, url), _why(process)
            assert _login(url) == 200
        finally:
            _stop(process)


def _answer(process: subprocess.Popen[str], terminal: int, prompt: str, text: str) -> None:
    """Type ``text`` at the terminal once ``prompt`` ends what the process wrote to stderr
    (the prompt flushes what was typed before it)."""
    assert process.stderr is not None
    written = ""
    while not written.endswith(prompt):
        char = process.stderr.read(1)
        assert char, f"the process ended before asking {prompt!r}: {written!r}"
        written += char
    os.write(terminal, f"{text}\n".encode())


def test_at_a_terminal_serve_asks_for_the_admins_password(tmp_path: Path) -> None:
    home, db, port = tmp_path / "home", tmp_path / "ws.db", free_port()
    url = f"http://127.0.0.1:{port}"
    terminal, stdin = os.openpty()
    try:
        process = _serve(home, db, port, "--admin-username", "admin", stdin=stdin)
        try:
            _answer(process, terminal, "Password of admin 'admin': ", PASSWORD)
            _answer(process, terminal, "Repeat for confirmation: ", PASSWORD)
            assert _started(process, url)
            assert _login(url) == 200
        finally:
            _stop(process)
    finally:
        os.close(terminal)
        os.close(stdin)


@pytest.mark.parametrize("command", ["serve", "up"])
@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "0", "2592001", "1e400", "soon"])
def test_access_token_ttl_must_be_finite_seconds_within_bounds(
    tmp_path: Path, command: str, value: str
) -> None:
    """``nan`` said "'access_token_ttl_seconds' must be at most 2592000.0"."""
    port = ["--port", str(free_port())]
    refused = wharf(tmp_path / "home", "server", command, *port, "--access-token-ttl", value)
    assert_one_line_error(
        refused,
        "Invalid value for '--access-token-ttl': must be a finite number of seconds between 1 "
        f"and 2592000, not '{value}'.",
    )
    assert "access_token_ttl_seconds" not in refused.stderr


@pytest.mark.parametrize("value", ["nan", "inf", "0"])
def test_up_timeout_must_be_finite_seconds(tmp_path: Path, value: str) -> None:
    """``nan`` started the server, gave up at once and said it did not answer within nan s."""
    home = tmp_path / "home"
    refused = wharf(home, "server", "up", "--port", str(free_port()), "--timeout", value)
    assert_one_line_error(
        refused, f"'--timeout': must be a finite number of seconds, at least 1, not '{value}'."
    )
    assert "No Wharf server is running." in wharf(home, "server", "down").stdout
