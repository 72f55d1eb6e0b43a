"""Error responses mapped back to Wharf's errors (:mod:`wharf.store.rest.errors`): an outage,
however a proxy or the server words it, is ``StoreUnavailableError``, which the engine's wait
and heartbeat paths wait out."""

from __future__ import annotations

import pytest

from wharf.core.errors import (
    EntityNotFoundError,
    IllegalTransitionError,
    StoreError,
    StoreUnavailableError,
)
from wharf.store.rest.errors import from_response

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
