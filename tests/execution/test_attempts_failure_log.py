"""The stored log of a step's last failed attempt holds its traceback: the console shows it once,
with the ``RunFailedError`` the pipeline call raises, and the attempt's log line says so; before,
``wharf runs logs`` / ``wharf steps logs`` read after the run showed that line and no traceback
anywhere. A real pipeline process, a real ``wharf`` command."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.cli.test_cli import wharf

SCRIPT = """
from wharf import pipeline, step

@step
def boom() -> int:
    print("about to fail")
    raise ValueError("bad data")

@pipeline(name="failing")
def failing() -> None:
    boom()

if __name__ == "__main__":
    failing()
"""


def test_the_last_attempt_s_traceback_is_in_its_stored_log(tmp_path: Path) -> None:
    home = tmp_path / "home"
    script = tmp_path / "failing.py"
    script.write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if k != "WHARF_STORE_URL"}
    env["WHARF_HOME"] = str(home)
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1
    assert "(its traceback follows with the RunFailedError)" in done.stderr
    assert done.stderr.count('raise ValueError("bad data")') == 1  # shown once on the console
    shown = wharf("runs", "list", "-o", "json", env={"WHARF_HOME": str(home)})
    assert shown.returncode == 0, shown.stderr
    name = next(line for line in shown.stdout.split('"') if line.startswith("failing-"))
    logs = wharf("steps", "logs", name, "boom", env={"WHARF_HOME": str(home)})
    assert logs.returncode == 0, logs.stderr
    lines = logs.stdout.splitlines()
    assert lines[0] == "about to fail"
    assert "(its traceback follows with the RunFailedError)" in lines[1]
    assert lines[2] == "Traceback (most recent call last):"
    assert 'raise ValueError("bad data")' in logs.stdout
    assert lines[-1] == "ValueError: bad data"
