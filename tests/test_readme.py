"""The README's examples, run as printed.

Every fenced block of ``README.md`` is preceded by a marker ``<!-- example: NAME -->``; each name
has a test here, and a block without a marker (or a marker without a test) fails
``test_every_block_has_a_test``. Python blocks run as scripts in a fresh ``WHARF_HOME``; shell
blocks run line by line (``#`` comments dropped, ``\\`` continuations joined) in bash, with the
README's placeholder ``RUN`` replaced by the name of the latest run at that moment.
Every command must exit 0 unless the README says it fails.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.e2e.team import Service
from tests.e2e.team_readme import check_team_outputs, run_team_section

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
BIN = Path(sys.executable).parent
TESTED = {"setup-quickstart", "setup-tests", "pipeline", "cli-tour", "dynamic", "isolated"}
TESTED |= {"team-mode", "team-pipeline", "s3-artifacts"}
_MARKED_BLOCK = re.compile(
    r"(?:<!-- example: (?P<name>[\w-]+) -->\s*\n)?[ \t]*```(?P<lang>\w*)\n(?P<body>.*?)\n[ \t]*```",
    re.S,
)
Blocks = dict[str, tuple[str, str]]


def readme_blocks() -> tuple[Blocks, list[str]]:
    """The README's marked blocks by name (language, text), and the heads of unmarked ones."""
    marked: Blocks = {}
    unmarked: list[str] = []
    for match in _MARKED_BLOCK.finditer(README.read_text()):
        body = match["body"]
        name = match["name"]
        if name is None:
            unmarked.append(body.splitlines()[0] if body else "(empty block)")
        else:
            marked[name] = (match["lang"], _dedent(body))
    return marked, unmarked


def _dedent(text: str) -> str:
    lines = text.splitlines()
    indent = min((len(x) - len(x.lstrip()) for x in lines if x.strip()), default=0)
    return "\n".join(x[indent:] for x in lines)


def shell_commands(text: str) -> list[str]:
    """The commands of a shell block: continuations joined, comments and blank lines dropped."""
    joined = text.replace("\\\n", " ")
    commands = []
    for line in joined.splitlines():
        command = line.split("  #", 1)[0].strip()
        if command and not command.startswith("#"):
            commands.append(command)
    return commands


def block(name: str) -> str:
    blocks, _ = readme_blocks()
    assert name in blocks, f"README has no block marked '{name}'"
    return blocks[name][1]


def test_every_block_has_a_test() -> None:
    blocks, unmarked = readme_blocks()
    assert unmarked == [], f"README blocks without an '<!-- example: NAME -->' marker: {unmarked}"
    assert set(blocks) == TESTED


class Shell:
    """Runs README commands in one directory with one fresh Wharf home, as a user would."""

    def __init__(self, cwd: Path, env: dict[str, str]) -> None:
        self.cwd = cwd
        self.env = env

    def run(self, command: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
        if re.search(r"\bRUN\b", command):
            command = re.sub(r"\bRUN\b", shlex.quote(self.latest_run_name()), command)
        result = subprocess.run(
            ["bash", "-c", command],
            check=False,
            cwd=self.cwd,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        assert result.returncode == 0, (
            f"README command failed ({result.returncode}): {command}\n"
            f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
        )
        return result

    def run_block(self, name: str) -> list[subprocess.CompletedProcess[str]]:
        return [self.run(command) for command in shell_commands(block(name))]

    def latest_run_name(self) -> str:
        runs = json.loads(self.run("wharf runs list --output json").stdout)
        items = runs["items"] if isinstance(runs, dict) else runs
        return str(items[0]["name"])


@pytest.fixture
def shell(tmp_path: Path) -> Shell:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WHARF_")}
    env["WHARF_HOME"] = str(tmp_path / "home")
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    work = tmp_path / "work"
    work.mkdir()
    return Shell(work, env)


def test_setup_commands_are_the_two_the_guide_promises() -> None:
    quickstart = shell_commands(block("setup-quickstart"))
    assert quickstart == [
        "python3 -m venv .venv && .venv/bin/pip install -q . && .venv/bin/python "
        "examples/quickstart.py"
    ]
    assert shell_commands(block("setup-tests")) == ["./scripts/test"]  # what .ci/run runs
    assert "exec ./scripts/test" in (ROOT / ".ci" / "run").read_text()


def test_quickstart_runs(shell: Shell) -> None:
    """The first set-up command's last part, with this interpreter (the install is CI's own)."""
    result = shell.run(f"{shlex.quote(sys.executable)} {ROOT / 'examples' / 'quickstart.py'}")
    assert result.stdout.strip()


def test_pipeline_example_and_the_cli_tour(shell: Shell) -> None:
    (shell.cwd / "pipeline.py").write_text(block("pipeline") + "\n")
    first = shell.run("python pipeline.py")
    assert first.stdout.strip().splitlines()[-1] == "completed"
    again = shell.run("python pipeline.py")
    assert again.stdout.strip().splitlines()[-1] == "completed"
    shell.run_block("cli-tour")


def test_dynamic_example(shell: Shell) -> None:
    (shell.cwd / "sweep.py").write_text(block("dynamic") + "\n")
    result = shell.run("python sweep.py")
    assert result.stdout.strip()


def test_isolated_steps_example(shell: Shell) -> None:
    (shell.cwd / "pipeline.py").write_text(block("pipeline") + "\n")
    shell.run_block("isolated")


def test_s3_artifacts_example(shell: Shell, tmp_path: Path) -> None:
    """The S3 section as printed, on a free port: ``pip install`` finds everything installed
    (the test command installs the dev extra, which holds both), moto serves in the background
    until the test ends, and ``export`` sets the variables of the commands after it."""
    port = str(free_port())
    (shell.cwd / "pipeline.py").write_text(block("pipeline") + "\n")
    background: list[subprocess.Popen[bytes]] = []
    try:
        for printed in shell_commands(block("s3-artifacts")):
            command = printed.replace("127.0.0.1:5000", f"127.0.0.1:{port}")
            command = command.replace("-p 5000", f"-p {port}")
            if command.startswith("export "):
                for assignment in shlex.split(command)[1:]:
                    name, _, value = assignment.partition("=")
                    shell.env[name] = value
            elif command.endswith("&"):
                words = shlex.split(command[:-1])
                words[0] = str(BIN / words[0]) if words[0] == "python" else words[0]
                log = (tmp_path / "moto.log").open("wb")
                background.append(subprocess.Popen(words, stdout=log, stderr=log, env=shell.env))
                wait_until_listening(int(port), background[-1])
            else:
                last = shell.run(command, timeout=300.0)
        assert last.stdout.strip().splitlines()[-1] == "completed"
        listed = shell.run(f"curl -sf http://127.0.0.1:{port}/wharf-artifacts?list-type=2")
        assert "<Key>runs/" in listed.stdout
    finally:
        for process in background:
            process.terminate()
            process.wait(timeout=30)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_until_listening(port: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert process.poll() is None, "the server exited"
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise AssertionError(f"nothing listens on port {port}")


@pytest.fixture
def services() -> Iterator[list[Service]]:
    started: list[Service] = []
    yield started
    for service in reversed(started):
        service.stop()


def test_team_mode_example(
    tmp_path: Path, empty_database_url: Callable[[str], str], services: list[Service]
) -> None:
    """Real ``wharf … serve`` processes on PostgreSQL (see ``tests/e2e/test_team_readme.py``)."""
    shown = run_team_section(
        block("team-mode"), block("team-pipeline"), tmp_path, empty_database_url, services
    )
    check_team_outputs(shown)
