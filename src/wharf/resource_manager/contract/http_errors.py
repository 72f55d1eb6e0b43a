"""Errors on the Resource Manager's HTTP wire, both ways, without any HTTP library.

Owns: :data:`WIRE_ERRORS`, :func:`wire_name` (what the API puts in an error body) and
:func:`error_from_response` (what the HTTP client raises for one). An error response is
``{"detail": "<one line>", "error": "<Wharf error class name>"}``.

Invariant: every HTTP error becomes a :class:`~wharf.core.errors.WharfError`, so callers of
the HTTP client catch the same types as callers of the in-process one.
"""

from __future__ import annotations

from typing import Any

from wharf.core.errors import (
    EntityExistsError,
    EntityNotFoundError,
    IllegalOperationError,
    IllegalTransitionError,
    InputError,
    SchemaVersionError,
    StoreError,
    StoreUnavailableError,
    WharfError,
)
from wharf.resource_manager.contract.errors import AuthenticationError, PermissionDeniedError

WIRE_ERRORS: dict[str, type[WharfError]] = {
    cls.__name__: cls
    for cls in (
        EntityNotFoundError,
        EntityExistsError,
        IllegalOperationError,
        IllegalTransitionError,
        PermissionDeniedError,
        InputError,
        StoreError,
        StoreUnavailableError,
        SchemaVersionError,
        AuthenticationError,
    )
}
"""The error classes that travel by name; anything else travels as its nearest base here."""


def wire_name(error: WharfError) -> str | None:
    """The most specific class of ``error`` that :data:`WIRE_ERRORS` knows, by name."""
    for cls in type(error).__mro__:
        if WIRE_ERRORS.get(cls.__name__) is cls:
            return cls.__name__
    return None


def detail_text(body: Any, fallback: str) -> str:
    """The ``detail`` of an error body as one line (lists are joined), else ``fallback``."""
    detail = body.get("detail") if isinstance(body, dict) else None
    if isinstance(detail, list):
        detail = "; ".join(
            str(item.get("msg", item)) if isinstance(item, dict) else str(item) for item in detail
        )
    text = str(detail) if detail else fallback
    return " ".join(text.split()) or f"HTTP error {fallback!r}"


def error_from_response(status: int, body: Any, text: str) -> WharfError:
    """The Wharf error for an HTTP error response (``body``: parsed JSON or None).

    The body's ``error`` field names exactly the class the service raised (an
    ``EntityExistsError`` and an ``IllegalOperationError`` are both 409); without it (a proxy's
    page, an older server) the status code decides::

        400, 413, 414, 422, 431 -> InputError     404 -> EntityNotFoundError
        401 -> AuthenticationError                403 -> PermissionDeniedError
        409 -> EntityExistsError if the text says "already exists" or "duplicate",
               else IllegalOperationError
        503 -> StoreUnavailableError              other -> StoreError("<code> HTTP error ...")
    """
    message = detail_text(body, text.strip()[:500] or f"HTTP {status}")
    name = body.get("error") if isinstance(body, dict) else None
    cls = WIRE_ERRORS.get(name) if isinstance(name, str) else None
    if cls is not None:
        return cls(message)
    if status in (400, 413, 414, 422, 431):  # the request itself was refused: bad input
        return InputError(message)
    if status == 401:
        return AuthenticationError(message)
    if status == 403:
        return PermissionDeniedError(message)
    if status == 404:
        return EntityNotFoundError(message)
    if status == 409:
        lowered = message.lower()
        if "already exists" in lowered or "duplicate" in lowered:
            return EntityExistsError(message)
        return IllegalOperationError(message)
    if status == 503:
        return StoreUnavailableError(f"The Resource Manager is unavailable: {message}")
    return StoreError(f"{status} HTTP error from the Resource Manager: {message}")
