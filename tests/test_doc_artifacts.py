"""The examples of ``docs/artifacts.md``, run as printed, as ``tests/test_doc_examples.py`` runs
those of the other guides.

The Python blocks run in order as one script in a fresh ``WHARF_HOME``; then, in the same home,
the shell block's commands (``#`` comments dropped) run in order through
``wharf.cli.main.main`` in one process, each of which must exit 0. The values the page's
comments promise are checked in the output. ``text`` blocks are output shown, not run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.test_doc_examples import commands

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "artifacts.md"
_BLOCK = re.compile(r"^```(?P<lang>\w*)\n(?P<body>.*?)\n```", re.S | re.M)
_RUN_COMMANDS = """\
import shlex, sys
from wharf.cli.main import main
for line in sys.argv[1:]:
    print(f"$ {line}", flush=True)
    try:
        main(shlex.split(line)[1:])
    except SystemExit as exit:
        if exit.code not in (0, None):
            sys.exit(f"{line!r} exited with {exit.code}")
    sys.stdout.flush()
"""


def blocks(lang: str) -> list[str]:
    return [m["body"] for m in _BLOCK.finditer(DOC.read_text()) if m["lang"] == lang]


def run(args: list[str], home: Path, cwd: Path, *, fails: bool = False) -> str:
    """The output of a Python process (stderr too when ``fails``, which it must)."""
    drop = {"WHARF_STORE_URL", "WHARF_SERVER_URL", "WHARF_API_KEY", "WHARF_RM_URL"}
    drop |= {"WHARF_RM_API_KEY", "WHARF_ARTIFACT_ROOT", "WHARF_ACTIVE_STACK", "WHARF_PROJECT"}
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["WHARF_HOME"] = str(home)
    done = subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (done.returncode != 0) == fails, f"{args}\n{done.stdout}\n{done.stderr}"
    return done.stdout + done.stderr if fails else done.stdout


def test_the_examples_are_found() -> None:
    assert {m["lang"] for m in _BLOCK.finditer(DOC.read_text())} == {"python", "sh", "text"}
    assert len(blocks("python")) == 5
    assert [len(commands(b)) for b in blocks("sh")] == [5]


def test_the_examples_run_and_print_what_the_page_says(tmp_path: Path) -> None:
    home = tmp_path / "home"
    script = tmp_path / "examples.py"
    script.write_text("\n\n".join(blocks("python")))
    printed = run([str(script)], home, tmp_path).splitlines()
    assert printed == [
        "Vocabulary(words=['cat', 'dog', 'mat', 'on', 'sat', 'the'])",
        "2 [8, 9, 10, 11]",
        "[8, 9, 10, 11]",
        "3.5",
        "[0.2, 0.3]",
    ]

    lines = [line for block in blocks("sh") for line in commands(block)]
    assert all(line.startswith("wharf ") for line in lines), lines
    shown = run(["-c", _RUN_COMMANDS, *lines], home, tmp_path)
    loads = re.findall(r"^\$ wharf artifacts load .*\n(.*)$", shown, re.M)
    assert loads[:2] == ["[8, 9, 10, 11]", "[8, 9]"], shown
    assert (tmp_path / "test.txt").read_text() == "[8, 9, 10, 11]"
    for name in ("prepare::split::train", "prepare::stats::output_1", "tune::train::output"):
        assert name in shown

    versions = run(["-c", _LATEST_VERSIONS], home, tmp_path)
    assert versions.split() == ["2", "2", "1", "1"]  # stats was cached in the second run


_LATEST_VERSIONS = """\
from wharf import Client
for output in ("split::train", "split::test", "stats::output_0", "stats::output_1"):
    print(Client().list_artifact_versions(name=f"prepare::{output}").items[0].version)
"""


def test_a_wrong_parameter_is_refused_when_the_pipeline_is_called(tmp_path: Path) -> None:
    (tune,) = [b for b in blocks("python") if "def tune" in b]
    call = "train(epochs=3, learning_rate=1)"
    assert call in tune
    script = tmp_path / "tune.py"
    script.write_text(tune.replace(call, 'train(epochs="3", learning_rate=0.1)'))
    output = run([str(script)], tmp_path / "home", tmp_path, fails=True)
    assert "Step 'train' parameter 'epochs' is annotated int but was given str." in output
    runs = "from wharf import Client; print(Client().list_pipeline_runs().total)"
    assert run(["-c", runs], tmp_path / "home", tmp_path).strip() == "0"
