# ruff: noqa: F811  (fixtures imported from the server tests)
"""Bad input to real ``wharf`` processes gets one line on stderr, a non-zero exit and no
traceback: a question with no terminal to answer it (destructive commands, ``login``), a name
holding line breaks or other control characters or far too long to echo, a ``--page`` past the
last, an empty RUN sent to a workspace server. Help pages are plain text, without markup."""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import click
import pytest

from tests.cli.test_help_texts import COMMANDS
from tests.server.conftest import World, live, world  # noqa: F401 (fixtures)
from wharf.cli.error_text import MAX_SHOWN, one_line_values


def wharf(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``wharf ARGS`` with no terminal: stdin is empty, as in CI or cron."""
    return subprocess.run(
        [sys.executable, "-m", "wharf.cli.main", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        check=False,
        timeout=60,
    )


def one_line_error(result: subprocess.CompletedProcess[str], *fragments: str) -> str:
    assert result.returncode in (1, 2), result  # an error, or a usage error
    assert "Traceback" not in result.stderr
    assert result.stdout == "", result.stdout  # no question left on stdout
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("WHARF_HOME", str(home))
    for name in ("WHARF_STORE_URL", "WHARF_SERVER_URL", "WHARF_API_KEY", "WHARF_ACTIVE_STACK"):
        monkeypatch.delenv(name, raising=False)
    return home


def test_destructive_commands_without_a_terminal_say_to_add_yes(home: Path) -> None:
    """They used to print the question on stdout and "Aborted." on stderr."""
    spare = ("component", "register", "spare", "-t", "orchestrator", "-f", "local")
    assert wharf(*spare).returncode == 0
    other = ("stack", "register", "other", "-o", "spare", "-a", "default")
    assert wharf(*other).returncode == 0
    for command, kept in (
        (("stack", "delete", "other"), ("stack", "show", "other")),
        (("component", "delete", "spare", "-t", "orchestrator"), ("component", "list")),
    ):
        one_line_error(wharf(*command), "there is no terminal to answer on; add --yes")
        assert "spare" in wharf(*kept).stdout  # nothing was deleted
    assert wharf("stack", "delete", "other", "--yes").returncode == 0
    assert wharf("component", "delete", "spare", "-y").returncode == 0


def _reading_its_terminal(pid: int) -> bool:
    """The process sleeps in a terminal read (Linux: the wait of ``n_tty_read``)."""
    try:
        return Path(f"/proc/{pid}/wchan").read_text() == "wait_woken"
    except OSError:
        return False


def test_ctrl_c_at_a_question_exits_130_quietly(home: Path) -> None:
    """As ``runs logs --follow`` (``test_run_views``) and a pipeline's process do; it used to
    say "Aborted." and exit 1."""
    assert wharf("stack", "register", "other", "-o", "default", "-a", "default").returncode == 0
    controller, terminal = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "wharf.cli.main", "stack", "delete", "other"],
        stdin=terminal,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert process.stdout is not None
        asked = b""
        deadline = time.monotonic() + 60
        while b"[y/N]" not in asked or not _reading_its_terminal(process.pid):
            assert time.monotonic() < deadline and process.poll() is None, asked
            if select.select([process.stdout], [], [], 0.05)[0]:
                asked += os.read(process.stdout.fileno(), 1024)
        process.send_signal(signal.SIGINT)  # (sent earlier, it could land before the read)
        _, rest = process.communicate(timeout=60)
    finally:
        process.kill()
        os.close(terminal)
        os.close(controller)
    assert (process.returncode, rest) == (130, b"\n")  # the question's line ended, no more
    assert "other" in wharf("stack", "show", "other").stdout


def test_login_without_a_terminal_says_how_to_give_what_it_would_ask(home: Path) -> None:
    """It used to print ``Username:`` (or a warning and ``Password:``) and "Aborted."."""
    url = "http://127.0.0.1:9"  # never reached: nothing can be asked before it would be
    one_line_error(wharf("login", url), "--username NAME", "--api-key KEY")
    one_line_error(wharf("login", url, "-u", "alice"), "--password PASSWORD", "stdin")
    assert not (home / "config.json").exists()


@pytest.mark.parametrize(
    "command",
    [
        ("runs", "show"),
        ("stack", "show"),
        ("runs", "list", "--pipeline"),
        ("artifacts", "load"),
    ],
)
def test_a_name_with_control_characters_is_echoed_escaped_on_one_line(
    home: Path, command: tuple[str, ...]
) -> None:
    line = one_line_error(wharf(*command, "a\nb\x1b[31m"))
    assert "'a\\nb\\x1b[31m'" in line
    assert "\x1b" not in line


def test_a_very_long_name_is_echoed_shortened(home: Path) -> None:
    line = one_line_error(wharf("runs", "show", "x" * 100_000), "No pipeline run")
    assert f"'{'x' * MAX_SHOWN}…'" in line
    assert len(line) < 200


def test_a_page_past_the_last_names_the_page_option(home: Path) -> None:
    """It used to name the store's field: "'index' must be at most 1000000"."""
    line = one_line_error(wharf("runs", "list", "--page", "9" * 23))
    assert "'--page'" in line and "index" not in line


def test_an_empty_run_is_refused_alike_by_a_server_and_the_embedded_store(
    world: World, home: Path
) -> None:
    """A workspace server used to answer "Invalid request: 'name' must not be empty"."""
    embedded = one_line_error(wharf("runs", "stop", ""))
    assert embedded == "Error: No pipeline run with id or name ''."
    env = {"WHARF_SERVER_URL": world.url, "WHARF_API_KEY": str(world.credentials["member"])}
    env["WHARF_PROJECT"] = world.a.name
    for command in (("stop", ""), ("show", " "), ("logs", "")):
        line = one_line_error(wharf("runs", *command, env=env))
        assert line == f"Error: No pipeline run with id or name '{command[1]}'."


def test_a_message_s_own_line_breaks_are_kept_and_only_quoted_values_rewritten() -> None:
    """A server that failed to start is reported with its log's last lines: those stay lines."""
    message = "The server exited; last lines of '/x/log':\nError: can't bind 'a\tb'\n  \x1b[0m"
    assert one_line_values(message) == (
        "The server exited; last lines of '/x/log':\nError: can't bind 'a\\tb'\n  \\x1b[0m"
    )
    path = "/" + "d" * 300
    assert one_line_values(f"No file '{path}'.") == f"No file '{path}'."  # a path stays whole


def test_help_pages_are_plain_text() -> None:
    """reStructuredText's ``literal`` quotes (and Markdown's) read as noise on a terminal."""
    for path, command in COMMANDS.items():
        text = command.get_help(click.Context(command, info_name=path))
        assert "`" not in text, (path, [line for line in text.splitlines() if "`" in line])
