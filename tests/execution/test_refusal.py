"""The error a run refused its credential ends with (:mod:`wharf.execution.refusal`): one line
that names the run and the server's words, printed alone (no traceback) by a real interpreter
that nobody catches it in, which exits with status 1."""

from __future__ import annotations

import subprocess
import sys

from wharf.core.errors import CredentialsRefusedError, PermissionDeniedError
from wharf.execution.refusal import RunRefusedError
from wharf.store.rest.errors import from_response


def test_the_line_names_the_run_the_status_and_the_servers_words() -> None:
    refusal = from_response(
        401, {"detail": "The API key behind this token has been revoked."}, "http://server"
    )
    assert isinstance(refusal, CredentialsRefusedError)
    error = RunRefusedError("train-1", refusal)
    assert str(error) == (
        "Run 'train-1' stopped: the workspace server refused its credentials (401: The API key "
        "behind this token has been revoked). Nothing was written after that; the server ends "
        "the run as 'orchestrator lost' once its heartbeat deadline passes."
    )
    assert error.refusal is refusal and error.run_name == "train-1"


def test_a_withdrawn_permission_says_403_on_one_line() -> None:
    error = RunRefusedError("train-2", PermissionDeniedError("Not a member\nof project A."))
    assert "(403: Not a member of project A)" in str(error)
    assert "\n" not in str(error)


SCRIPT = """
import sys
from wharf.core.errors import CredentialsRefusedError
from wharf.execution.refusal import run_refused

try:
    raise CredentialsRefusedError("Invalid or revoked API key.")
except CredentialsRefusedError as exc:
    error = run_refused("train-3", exc)
if sys.argv[1] == "other":
    raise ValueError("not a refusal")
raise error from None
"""


def run_script(case: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-c", SCRIPT, case]
    return subprocess.run(command, check=False, capture_output=True, text=True, timeout=60)


def test_uncaught_it_prints_its_line_alone_and_exits_1() -> None:
    done = run_script("refused")
    assert done.returncode == 1
    refusal = CredentialsRefusedError("Invalid or revoked API key.")
    assert done.stderr.splitlines() == [str(RunRefusedError("train-3", refusal))]


def test_any_other_uncaught_error_keeps_its_traceback() -> None:
    done = run_script("other")
    assert done.returncode == 1
    assert done.stderr.startswith("Traceback") and "ValueError: not a refusal" in done.stderr
