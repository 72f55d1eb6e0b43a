"""HTTP error responses the client maps without an ``error`` name it knows: by status."""

from __future__ import annotations

import pytest

from wharf.core.errors import InputError, StoreError, StoreUnavailableError
from wharf.resource_manager.contract.http_errors import error_from_response


@pytest.mark.parametrize("status", [400, 413, 414, 422, 431])
def test_a_refused_request_is_bad_input(status: int) -> None:
    body = {"detail": "The request line and headers are too large.", "error": "HeadTooLarge"}
    error = error_from_response(status, body, "")
    assert type(error) is InputError and str(error) == body["detail"]


def test_other_statuses() -> None:
    assert isinstance(error_from_response(503, None, "down"), StoreUnavailableError)
    other = error_from_response(500, None, "")
    assert type(other) is StoreError and "500 HTTP error" in str(other)
