"""The error a run refused its credential ends with (:mod:`wharf.execution.refusal`): one line
that names the run and the server's words."""

from __future__ import annotations

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
