"""A ``wharf`` command run with a pseudo-terminal as its stdin, for the questions a command asks
only at a terminal (without one, ``wharf.cli.confirm`` refuses the question in one line)."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from collections.abc import Mapping


def answered(
    answer: str, *args: str, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``wharf ARGS`` (with ``env``, else this process's) at a terminal to which ``answer`` and
    a newline are typed; its output captured."""
    controller, terminal = pty.openpty()
    try:
        os.write(controller, f"{answer}\n".encode())  # kept by the terminal until read
        return subprocess.run(
            [sys.executable, "-m", "wharf.cli.main", *args],
            stdin=terminal,
            capture_output=True,
            text=True,
            env=None if env is None else dict(env),
            check=False,
            timeout=60,
        )
    finally:
        os.close(terminal)
        os.close(controller)
