"""Every error the API returns, mapped in one place.

Owns: :func:`install_error_handlers`, :func:`status_for`, :func:`error_response`.

Invariants: the body is always ``{"detail": "<one line>", "error": "<Wharf error class>"}``,
which :mod:`wharf.resource_manager.contract.http_errors` turns back into the same class; no
traceback or library exception text reaches a client; a database that cannot be reached,
answers too slowly or lacks its tables is a 503 in fixed words (the driver's message, which
names the database's host, port, user and name, is logged).
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from wharf.core.errors import (
    EntityExistsError,
    EntityNotFoundError,
    IllegalOperationError,
    InputError,
    StoreUnavailableError,
    WharfError,
)
from wharf.core.validation import REQUEST_PARTS, body_not_json, describe_errors
from wharf.resource_manager.contract.errors import AuthenticationError, PermissionDeniedError
from wharf.resource_manager.contract.http_errors import wire_name
from wharf.sql.errors import outage_detail

logger = logging.getLogger(__name__)

_STATUS: tuple[tuple[type[WharfError], int], ...] = (
    (AuthenticationError, 401),
    (PermissionDeniedError, 403),
    (EntityNotFoundError, 404),
    (EntityExistsError, 409),
    (IllegalOperationError, 409),
    (InputError, 400),
    (StoreUnavailableError, 503),
)
"""Most specific first: PermissionDeniedError is an IllegalOperationError."""


def status_for(error: WharfError) -> int:
    return next((code for cls, code in _STATUS if isinstance(error, cls)), 500)


def _body(detail: str, error: str | None) -> dict[str, str]:
    body = {"detail": " ".join(detail.split())}
    if error is not None:
        body["error"] = error
    return body


async def _wharf_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, WharfError)
    return error_response(exc)


def _public_detail(exc: WharfError) -> str:
    return outage_detail(exc, "Resource Manager", restart="Resource Manager") or str(exc)


def error_response(exc: WharfError) -> JSONResponse:
    """The answer to ``exc``, for code that runs before the exception handlers (middleware)."""
    status = status_for(exc)
    if status >= 500:
        logger.warning("Resource Manager API error: %s", exc)
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    body = _body(_public_detail(exc), wire_name(exc))
    return JSONResponse(body, status_code=status, headers=headers)


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    detail = body_not_json(exc.errors(), request.headers.get("content-type")) or describe_errors(
        exc.errors(), title="request", drop_prefix=REQUEST_PARTS
    )
    return JSONResponse(_body(detail, InputError.__name__), status_code=422)


async def _http_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    name = EntityNotFoundError.__name__ if exc.status_code == 404 else None
    return JSONResponse(
        _body(str(exc.detail), name), status_code=exc.status_code, headers=exc.headers
    )


async def _unexpected(_request: Request, exc: Exception) -> JSONResponse:
    logger.error("Unexpected error in the Resource Manager API", exc_info=exc)
    return JSONResponse(_body("Internal server error.", None), status_code=500)


def install_error_handlers(app: FastAPI) -> None:
    """Map every error to its status::

        EntityNotFoundError 404     EntityExistsError 409     IllegalOperationError 409
        PermissionDeniedError 403   InputError 400            malformed request (validation) 422
        AuthenticationError 401     StoreUnavailableError 503
        other StoreError / WharfError 500                     anything else 500

    A 401 carries ``WWW-Authenticate: Bearer``; anything unexpected is logged.
    """
    app.add_exception_handler(WharfError, _wharf_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)
