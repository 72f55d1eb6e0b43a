"""The README's team-mode section, executed as printed: a Resource Manager and a workspace server
(real ``wharf … serve`` processes on PostgreSQL), an admin who adds a user, and that user who
logs in, runs a pipeline whose step asks for resources, and looks at their requests and the
team's pools — no pool, policy or RM credential set up by hand.

The commands are the README's block (``tests/test_readme.py`` passes it in); only the values in
capitals that must be generated are filled in (:func:`fill`), and the default ports are moved to
free ones so the test never meets another server on this machine. Each command runs in the
terminal (its own ``WHARF_HOME``) of the service it starts, or of whoever logged in last.
"""

from __future__ import annotations

import os
import secrets
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from tests.e2e.team import Service, free_port

RM_PORT, SERVER_PORT = 8238, 8237
BIN = Path(sys.executable).parent


def fill(line: str, values: dict[str, str], ports: dict[int, int]) -> list[str]:
    """The command's arguments: generated values in, default ports moved to free ones."""
    words = []
    for given in shlex.split(line):
        word = given
        for name, value in values.items():
            word = word.replace(name, value)
        for default, port in ports.items():
            word = word.replace(f"127.0.0.1:{default}", f"127.0.0.1:{port}")
        words.append(word)
    if words[0] == "wharf":
        words[0] = str(BIN / "wharf")
    elif words[0] == "python":
        words[0] = sys.executable
    if words[1:2] in (["resource-manager"], ["server"]) and words[2] == "serve":
        default = RM_PORT if words[1] == "resource-manager" else SERVER_PORT
        words += ["--port", str(ports[default]), "--log-level", "warning"]
    return words


def commands(text: str) -> list[str]:
    """The commands of a shell block: continuations joined, comments and blank lines dropped."""
    found = []
    for line in text.replace("\\\n", " ").splitlines():
        command = line.split("  #", 1)[0].strip()
        if command and not command.startswith("#"):
            found.append(command)
    return found


def terminal(line: str, current: str) -> str:
    """Whose terminal (and ``WHARF_HOME``) runs ``line``: each service its own; every other
    command the terminal of whoever logged in last (the administrator until someone does)."""
    words = shlex.split(line)
    if words[1:3] in (["resource-manager", "serve"], ["server", "serve"]):
        return words[1]
    if words[1:2] == ["login"] and "-u" in words:
        return words[words.index("-u") + 1]
    return current


def run_team_section(
    text: str,
    pipeline: str,
    workdir: Path,
    database_url: Callable[[str], str],
    services: list[Service],
) -> dict[str, str]:
    """Run the commands of ``text`` (services in the background, each until it answers), with
    ``pipeline`` saved as ``team_training.py``; each command's output (stdout and stderr)."""
    values = {
        "RM_DB_URL": database_url("postgresql"),
        "WHARF_DB_URL": database_url("postgresql"),
        "RM_KEY": secrets.token_hex(16),
        "ADMIN_PASSWORD": secrets.token_hex(8),
        "ALICE_PASSWORD": secrets.token_hex(8),
        "ARTIFACT_ROOT": str(workdir / "shared-artifacts"),
    }
    ports = {RM_PORT: free_port(), SERVER_PORT: free_port()}
    base = {k: v for k, v in os.environ.items() if not k.startswith("WHARF_")}
    outputs: dict[str, str] = {}
    who = "admin"
    for line in commands(text):
        args = fill(line, values, ports)
        home = workdir / terminal(line, who)
        if not home.exists():
            home.mkdir(parents=True)
            (home / "team_training.py").write_text(pipeline)
        env = {**base, "WHARF_HOME": str(home)}
        if args[2:3] == ["serve"]:
            port = int(args[args.index("--port") + 1])
            health = f"http://127.0.0.1:{port}/health"
            service = Service(home.name, args[1:], env, health, workdir / f"{port}.log")
            services.append(service)
            service.start()  # the workspace server checks the RM token at start
            continue
        who = terminal(line, who)
        done = subprocess.run(
            args, cwd=home, env=env, capture_output=True, text=True, timeout=300, check=False
        )
        assert done.returncode == 0, f"{line}\n{done.stdout}\n{done.stderr}"
        outputs[line] = done.stdout + done.stderr
    return outputs


def check_team_outputs(shown: dict[str, str]) -> None:
    """What the user sees at the end of the section."""
    assert "completed" in shown["python team_training.py"]
    requests = shown["wharf request list"]
    assert "released" in requests and "team" in requests and "1 CPU" in requests, requests
    assert "alice (via admin)" in requests  # the user, and the RM principal the server used
    assert "team" in shown["wharf pool list"] and "local" not in shown["wharf pool list"]
    assert "8 CPU" in shown["wharf pool show team"]
    assert "No current allocations" in shown["wharf pool show team"]
