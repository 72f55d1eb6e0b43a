"""Error responses mapped back to Wharf's errors (:mod:`wharf.store.rest.errors`): an outage,
however a proxy or the server words it, is ``StoreUnavailableError``, which the engine's wait
and heartbeat paths wait out; a refused credential (401, 403) is ``CredentialsRefusedError``,
which nobody waits out."""

from __future__ import annotations

import pytest

from wharf.core.errors import (
    CredentialsRefusedError,
    EntityNotFoundError,
    IllegalTransitionError,
    PermissionDeniedError,
    StoreError,
    StoreUnavailableError,
)
from wharf.execution.outages import refused, transient
from wharf.store.rest.errors import NotAuthenticatedError, from_response

URL = "http://server"


@pytest.mark.parametrize("status", [502, 503, 504])
def test_a_server_restarting_behind_a_proxy_is_an_outage(status: int) -> None:
    error = from_response(status, None, URL)
    assert type(error) is StoreUnavailableError
    assert f"HTTP {status}" in str(error)


def test_other_statuses_keep_their_meaning() -> None:
    assert type(from_response(500, None, URL)) is StoreError
    assert type(from_response(404, {"detail": "no such run"}, URL)) is EntityNotFoundError
    body = {"detail": "ended", "type": "IllegalTransitionError"}
    assert type(from_response(409, body, URL)) is IllegalTransitionError


@pytest.mark.parametrize("kind", [None, "AuthenticationError"])
def test_a_refused_credential_is_permanent_and_keeps_the_servers_words(kind: str | None) -> None:
    body = {"detail": "The API key behind this token has been revoked.", "type": kind}
    error = from_response(401, body, URL)
    assert type(error) is NotAuthenticatedError
    assert isinstance(error, CredentialsRefusedError) and error.status == 401
    assert error.detail == "The API key behind this token has been revoked."
    assert str(error).startswith(error.detail) and f"wharf login {URL}" in str(error)
    assert refused(error) and not transient(error)


@pytest.mark.parametrize("kind", [None, "PermissionDeniedError"])
def test_a_withdrawn_permission_is_permanent_too(kind: str | None) -> None:
    error = from_response(403, {"detail": "Members only.", "type": kind}, URL)
    assert type(error) is PermissionDeniedError
    assert isinstance(error, CredentialsRefusedError) and error.status == 403
    assert error.detail == str(error) == "Members only."
    assert refused(error) and not transient(error)


def test_no_other_status_is_a_refused_credential() -> None:
    for status in (400, 404, 409, 422, 500, 502, 503, 504):
        assert not refused(from_response(status, None, URL)), status
