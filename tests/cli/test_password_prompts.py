"""A password prompt with no terminal to hide the typing on (CI, cron, ``setsid``; the
password piped in) warns in one plain line, without Python's warning and its source line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def test_a_piped_password_without_a_terminal_warns_in_plain_lines(tmp_path: Path) -> None:
    command = ("resource-manager", "credential", "bob", "--password")
    result = subprocess.run(
        [sys.executable, "-m", "wharf.cli.main", *command],
        input="a-long-password\na-long-password\n",
        capture_output=True,
        text=True,
        env={**os.environ, "WHARF_HOME": str(tmp_path / "home")},
        start_new_session=True,  # no controlling terminal: getpass cannot hide the input
        check=False,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert '"name": "bob"' in result.stdout
    assert "GetPassWarning" not in result.stderr and "getpass.py" not in result.stderr
    assert "Warning: Password input may be echoed." in result.stderr
