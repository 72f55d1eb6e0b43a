"""The README's team-mode section, executed as printed: a Resource Manager and a workspace server
(real ``wharf … serve`` processes on PostgreSQL), an admin who adds a user, and that user who
logs in, runs a pipeline whose step asks for resources, and looks at their requests and the
team's pools — no pool, policy or RM credential set up by hand.

:data:`COMMANDS` is the README's block (the README prints exactly these lines); only the values
in capitals that must be generated are filled in (:func:`fill`), and the default ports are moved
to free ones so the test never meets another server on this machine. Each command runs in the
terminal (its own ``WHARF_HOME``) of the service it starts, or of whoever logged in last.
:func:`run_team_section` and :func:`check_team_outputs` take any such text, so the README's own
block can be run with them.
"""

from __future__ import annotations

import os
import secrets
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.e2e.team import Service, free_port

COMMANDS = """\
# The Resource Manager, with a pool every account may use (RM_KEY: 16 characters or more):
wharf resource-manager serve --db-url RM_DB_URL --admin-api-key RM_KEY \\
    --bootstrap-pool team=cpu=8,memory=32GiB
# The workspace server, using it:
wharf server serve --db-url WHARF_DB_URL --admin-username admin --admin-password ADMIN_PASSWORD \\
    --resource-manager-url http://127.0.0.1:8238 --resource-manager-token RM_KEY
# The workspace administrator adds a user to the default project:
wharf login http://127.0.0.1:8237 -u admin --password ADMIN_PASSWORD
wharf user create alice --password ALICE_PASSWORD
wharf project add-member default --user alice
# The user logs in and runs pipelines unchanged:
wharf login http://127.0.0.1:8237 -u alice --password ALICE_PASSWORD
python team_training.py        # the pipeline below: its step asks for 1 CPU and 256 MiB
wharf request list             # your steps' resource requests
wharf pool list                # the team's pools (pool show / queue too)
wharf pool show team
"""
"""The README's team-mode commands, in order; ``#`` lines say who runs the ones below them."""

PIPELINE = """\
from wharf import ResourceSettings, pipeline, step

@step(settings={"resources": ResourceSettings(cpu_count=1, memory="256MiB")})
def train() -> float:
    return 0.9

@pipeline
def team_training() -> None:
    train()

team_training()
"""
"""``team_training.py`` as the README shows it."""

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


@pytest.fixture
def services() -> Iterator[list[Service]]:
    started: list[Service] = []
    yield started
    for service in reversed(started):
        service.stop()


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
    assert "released" in requests and "team" in requests and "1 CPU" in requests
    assert "alice (via admin)" in requests  # the user, and the RM principal the server used
    assert "team" in shown["wharf pool list"] and "local" not in shown["wharf pool list"]
    assert "8 CPU" in shown["wharf pool show team"]
    assert "No current allocations" in shown["wharf pool show team"]


def test_the_readme_team_section_works_as_written(
    tmp_path: Path, empty_database_url: Callable[[str], str], services: list[Service]
) -> None:
    shown = run_team_section(COMMANDS, PIPELINE, tmp_path, empty_database_url, services)
    check_team_outputs(shown)
