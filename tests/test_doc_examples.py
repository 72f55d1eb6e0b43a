"""The examples of ``docs/resources.md``, run as printed (``docs/caching.md``'s:
``tests/test_doc_caching.py``).

Python blocks run as scripts in a fresh ``WHARF_HOME``. Shell blocks run command by command
(``#`` comments dropped, ``\\`` continuations joined) through ``wharf.cli.main.main`` in one
process, so every command must exit 0; a line naming a placeholder (``REQUEST_ID``) is left
out. The YAML block (the pool file) is created by ``tests/cli/test_pool_views.py``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "docs" / "resources.md"]
_BLOCK = re.compile(r"^```(?P<lang>\w*)\n(?P<body>.*?)\n```", re.S | re.M)
PLACEHOLDERS = ("REQUEST_ID",)
_RUN_COMMANDS = """\
import shlex, sys
from wharf.cli.main import main
for line in sys.argv[1:]:
    try:
        main(shlex.split(line)[1:])
    except SystemExit as exit:
        if exit.code not in (0, None):
            sys.exit(f"{line!r} exited with {exit.code}")
"""


def blocks(lang: str) -> list[str]:
    return [
        m["body"] for doc in DOCS for m in _BLOCK.finditer(doc.read_text()) if m["lang"] == lang
    ]


def commands(block: str) -> list[str]:
    joined = re.sub(r"\\\n\s*", " ", block)
    lines = (re.sub(r"\s+#.*$", "", line).strip() for line in joined.splitlines())
    return [line for line in lines if line and not any(p in line for p in PLACEHOLDERS)]


def test_the_examples_are_found() -> None:
    assert len(blocks("python")) == 1
    assert [len(commands(b)) for b in blocks("sh")] == [1, 5, 2]


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    drop = {"WHARF_STORE_URL", "WHARF_SERVER_URL", "WHARF_API_KEY", "WHARF_RM_URL"}
    env = {k: v for k, v in os.environ.items() if k not in drop | {"WHARF_RM_API_KEY"}}
    env["WHARF_HOME"] = str(tmp_path / "home")
    return env


def run(args: list[str], env: dict[str, str], cwd: Path) -> None:
    done = subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, f"{args}\n{done.stdout}\n{done.stderr}"


def test_the_python_examples_run(env: dict[str, str], tmp_path: Path) -> None:
    script = tmp_path / "examples.py"
    script.write_text("\n\n".join(blocks("python")))
    run([str(script)], env, tmp_path)


def test_the_shell_examples_run_in_order(env: dict[str, str], tmp_path: Path) -> None:
    lines = [line for block in blocks("sh") for line in commands(block)]
    assert all(line.startswith("wharf ") for line in lines), lines
    run(["-c", _RUN_COMMANDS, *lines], env, tmp_path)
