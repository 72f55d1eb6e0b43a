"""The one place where errors become HTTP responses: status, JSON ``detail`` and error ``type``.

Every error response is ``{"detail": "<one line>", "type": "<error class>"}`` (422 adds
``errors``); the REST store maps ``type`` back to the same Wharf error class
(``wharf.store.rest.errors``), so callers see what the SQL store would raise. Entry point:
:func:`install`; the statuses are in ``_STATUS``.

Invariants: bad input never produces a 5xx (the wire schemas answer 422, the store
``InputError``, 400), so a 500 means a bug or a broken database; a 503 says only that, in fixed
words; an unauthenticated caller gets the 401 before any 422.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse

from wharf.core.errors import (
    EntityExistsError,
    EntityNotFoundError,
    IllegalOperationError,
    InputError,
    StoreUnavailableError,
    WharfError,
)
from wharf.core.validation import REQUEST_PARTS, body_not_json, describe_errors
from wharf.server.auth.errors import (
    AuthenticationError,
    LoginThrottledError,
    PermissionDeniedError,
)
from wharf.server.deps import refuse_unauthenticated
from wharf.server.schemas.filters import FilterError
from wharf.sql.errors import outage_detail

logger = logging.getLogger(__name__)

_STATUS: tuple[tuple[type[WharfError], int], ...] = (
    (EntityNotFoundError, 404),
    (EntityExistsError, 409),
    (IllegalOperationError, 409),
    (FilterError, 422),
    (InputError, 400),
    (LoginThrottledError, 429),
    (AuthenticationError, 401),
    (PermissionDeniedError, 403),
    (StoreUnavailableError, 503),
)
"""The status of each error class, the first match winning (subclasses included)::

    EntityNotFoundError            404      AuthenticationError    401 (WWW-Authenticate)
                                            LoginThrottledError    429 (Retry-After)
    EntityExistsError              409      PermissionDeniedError        403
    IllegalOperationError (+sub)   409      request validation      422 (RequestValidationError)
    InputError (+sub)              400      StoreUnavailableError   503
    FilterError (bad filter value) 422
    other StoreError / WharfError  500      anything else           500, logged, no details
"""


_SERVER_TYPES = (AuthenticationError, PermissionDeniedError)


def status_of(error: WharfError) -> int:
    for kind, status in _STATUS:
        if isinstance(error, kind):
            return status
    return 500


def error_response(
    status: int, detail: str, kind: str, headers: Mapping[str, str] | None = None, **extra: Any
) -> JSONResponse:
    return JSONResponse({"detail": detail, "type": kind, **extra}, status, headers=headers)


def _one_line(text: str) -> str:
    return " ".join(text.split())[:2000]


def _public_type(error: WharfError) -> str:
    """The class name the REST store knows: internal subclasses report their public base."""
    for kind in type(error).__mro__:
        if kind.__module__ == "wharf.core.errors" or kind in _SERVER_TYPES:
            return kind.__name__
    return "WharfError"


def _public_detail(error: WharfError) -> str:
    """The error's one-line message, except for a database outage (unreachable, too slow, or
    without Wharf's tables), which gets fixed words: the driver's message names the database's
    host, port, user and name, so it goes to the log, never into a body."""
    return outage_detail(error, "workspace server", restart="server") or _one_line(str(error))


async def _wharf_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, WharfError)
    status = status_of(exc)
    if isinstance(exc, StoreUnavailableError):  # expected during an outage: no traceback
        logger.warning("%s %s: %s", request.method, request.url.path, exc)
    elif status >= 500:
        logger.error("%s %s failed: %s", request.method, request.url.path, exc, exc_info=exc)
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    if isinstance(exc, LoginThrottledError):
        headers = {"Retry-After": str(exc.retry_after)}
    return error_response(status, _public_detail(exc), _public_type(exc), headers)


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    """422 with the validation details; a request on a route needing a principal is first
    authenticated, so an unauthenticated caller gets the 401, never the schema details."""
    assert isinstance(exc, RequestValidationError)
    try:
        await refuse_unauthenticated(request)  # authentication comes before validation
    except AuthenticationError as refused:
        return await _wharf_error(request, refused)
    errors = jsonable_encoder(exc.errors(), custom_encoder={BaseException: str})
    for error in errors:
        error.pop("input", None)  # may be huge, and echoes secrets (passwords)
        error.pop("url", None)
    detail = body_not_json(exc.errors(), request.headers.get("content-type")) or describe_errors(
        exc.errors(), title="request", drop_prefix=REQUEST_PARTS
    )
    return error_response(422, _one_line(detail), "RequestValidationError", errors=errors)


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    detail = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
    return error_response(exc.status_code, _one_line(detail), "HTTPError", exc.headers)


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    if isinstance(exc, RecursionError):  # a JSON body nested too deeply to decode
        return error_response(400, "The request body is nested too deeply.", "InputError")
    logger.exception("%s %s failed", request.method, request.url.path, exc_info=exc)
    return error_response(500, "Internal server error.", "InternalError")


def install(app: FastAPI) -> None:
    app.add_exception_handler(WharfError, _wharf_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)
