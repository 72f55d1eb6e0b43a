"""``wharf server up | down | status``: the server as a background process of this machine.

Files (in ``<user data dir>/server/``): ``server.json`` (pid, URL, log path, command line) and
``server.log`` (its stdout and stderr). Invariants:
- ``up`` starts ``wharf server serve ...`` in a new session (so ``down`` can signal its whole
  process group, workers included) and returns only once ``/health`` answers, or fails with
  the log's last lines if the process exits or does not answer in time (then it is stopped);
  it starts nothing where a server answers already (that one's answers are not the new one's);
- a pid file whose process is gone is stale and is removed by ``status`` / ``up`` / ``down``;
- ``down`` sends SIGTERM to the group, waits, and sends SIGKILL after the grace period.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from wharf.core.errors import IllegalOperationError, StoreUnavailableError

START_TIMEOUT_SECONDS = 60.0
STOP_TIMEOUT_SECONDS = 15.0


@dataclass(frozen=True)
class DaemonInfo:
    pid: int
    url: str
    log_file: str
    command: list[str]


def server_dir(home: Path) -> Path:
    return home / "server"


def _info_file(home: Path) -> Path:
    return server_dir(home) / "server.json"


def read_info(home: Path) -> DaemonInfo | None:
    """The running daemon's info; None (and the stale file removed) if it is not running."""
    path = _info_file(home)
    try:
        info = DaemonInfo(**json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        return None
    if not _alive(info.pid):
        path.unlink(missing_ok=True)
        return None
    return info


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie child of this very process counts as gone
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return done == 0


def healthy(url: str, timeout: float = 1.0) -> bool:
    import httpx

    try:
        return httpx.get(f"{url}/health", timeout=timeout).status_code == 200
    except httpx.HTTPError:
        return False


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def start(
    home: Path,
    serve_args: list[str],
    url: str,
    *,
    env: dict[str, str] | None = None,
    timeout: float = START_TIMEOUT_SECONDS,
) -> DaemonInfo:
    """Start ``wharf server serve <serve_args>`` in the background and wait for ``url``.

    ``env`` is added to the child's environment (secrets travel there, not on its command
    line, which every user of the machine can read)."""
    running = read_info(home)
    if running is not None:
        raise IllegalOperationError(
            f"A Wharf server is already running at {running.url} (pid {running.pid}); "
            "stop it with 'wharf server down'."
        )
    if healthy(url):  # else its answers would pass for the new server's, which cannot bind
        raise IllegalOperationError(
            f"A server already answers at {url} (one started with 'wharf server serve'?); stop "
            "it or choose another --port."
        )
    directory = server_dir(home)
    directory.mkdir(parents=True, exist_ok=True)
    log_file = directory / "server.log"
    command = [sys.executable, "-m", "wharf.cli.main", "server", "serve", *serve_args]
    with open(log_file, "ab") as log:
        process = subprocess.Popen(
            command,
            env={**os.environ, **(env or {})},
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    info = DaemonInfo(process.pid, url, str(log_file), command)
    _info_file(home).write_text(json.dumps(asdict(info), indent=2), encoding="utf-8")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            _info_file(home).unlink(missing_ok=True)
            raise StoreUnavailableError(
                f"The server exited with code {process.returncode} while starting; "
                f"last lines of {log_file}:\n{_tail(log_file)}"
            )
        if healthy(url):
            return info
        time.sleep(0.1)
    stop(home)
    raise StoreUnavailableError(
        f"The server did not answer at {url} within {timeout:.0f} s; last lines of "
        f"{log_file}:\n{_tail(log_file)}"
    )


def stop(home: Path, timeout: float = STOP_TIMEOUT_SECONDS) -> DaemonInfo | None:
    """Stop the daemon; None if none was running."""
    info = read_info(home)
    if info is None:
        return None
    _signal_group(info.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and _alive(info.pid):
        time.sleep(0.1)
    if _alive(info.pid):
        _signal_group(info.pid, signal.SIGKILL)
    _info_file(home).unlink(missing_ok=True)
    return info


def _signal_group(pid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pid, sig)  # the daemon leads its own session and process group
    except ProcessLookupError:
        pass
    except PermissionError:
        os.kill(pid, sig)
