"""Which modules a fresh interpreter has loaded after some code ran: the check behind the tests
that keep heavy dependencies off a path (a CLI command, a pod's start, a contract package).

``loaded_after(code, watched)`` runs ``code`` in a new ``python -c`` process (this interpreter,
``env`` or this process's environment) and returns the loaded modules that are, or lie under,
one of ``watched`` (``"sqlalchemy"`` also matches ``sqlalchemy.orm``), sorted. Whatever the code
prints itself is ignored: the answer is the process's last line.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping, Sequence

_REPORT = (
    "\nimport json as _json, sys as _sys\n"
    "_watched = {watched!r}\n"
    "print(_json.dumps(sorted(m for m in _sys.modules "
    "if any(m == w or m.startswith(w + '.') for w in _watched))))\n"
)


def loaded_after(
    code: str, watched: Sequence[str], *, env: Mapping[str, str] | None = None
) -> list[str]:
    """See the module docstring."""
    done = subprocess.run(
        [sys.executable, "-c", code + _REPORT.format(watched=tuple(watched))],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        env=None if env is None else dict(env),
    )
    answer: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return answer
