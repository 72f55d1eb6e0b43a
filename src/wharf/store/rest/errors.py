"""HTTP error responses mapped back to Wharf's error types; httpx errors never escape.

The server's error body is ``{"detail": ..., "type": <class name>}``. A known class name is
raised as that very class (so ``IllegalTransitionError`` stays one, as on SQL); otherwise the
status decides (503, and a proxy's 502 or 504 while the server restarts, are
``StoreUnavailableError``: an outage, which the engine's wait and heartbeat paths wait out).
REST-only conditions get their own classes (a 403 is ``wharf.core.errors.PermissionDeniedError``;
it and a 401 are ``CredentialsRefusedError``: permanent, never waited out as an outage):

    NotAuthenticatedError (401)    PermissionDeniedError (403)    RequestTooLargeError (413/414)

A route the server's router does not know (404 or 405 of ``type`` ``HTTPError``, never a Wharf
error's) is, from a Wharf server, a server older than this client: ``ServerTooOldError``, raised
by the session once the server's ``/health/live`` confirms it is one (:func:`unrouted`). So is
a 422 that is the router taking a route name of the client's path for an id (a GET under
``/api/v1/runs/`` answered by an older server's ``/api/v1/runs/{run_id}``:
:func:`literal_taken_for_id`).
"""

from __future__ import annotations

import re
from typing import Any

from wharf.core.errors import (
    CredentialsRefusedError,
    EntityExistsError,
    EntityNotFoundError,
    IllegalOperationError,
    IllegalTransitionError,
    InputError,
    PermissionDeniedError,
    RunStoppingError,
    SchemaVersionError,
    StoreError,
    StoreUnavailableError,
    WharfError,
)


class NotAuthenticatedError(CredentialsRefusedError):
    """The server refused the credentials (missing, invalid, expired or revoked): log in.
    ``detail``: the server's own words, without the advice to log in."""

    status = 401


class RequestTooLargeError(InputError):
    """The request's URI (414) or body (413) is larger than the server accepts."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class ServerTooOldError(StoreError):
    """The workspace server has no route for a call of this client: it is older than the
    client (a permanent condition, never an outage: upgrade the server)."""


def unrouted(status: int, body: Any) -> bool:
    """Whether an error response is the server framework's own "no such route" (404 Not Found,
    405 Method Not Allowed: the server's error handler types it ``HTTPError``), not a Wharf
    error such as a missing record (``EntityNotFoundError``)."""
    return status in (404, 405) and isinstance(body, dict) and body.get("type") == "HTTPError"


_ROUTE_NAME = re.compile(r"[a-z]+(?:[_-][a-z]+)*")
"""A path segment that is a route's own name (``sweep_candidates``, ``by-name``), never an id."""


def literal_taken_for_id(status: int, body: Any, path: str) -> bool:
    """Whether a 422 is the server's router reading a route name of ``path`` as an id: a route
    this client has and the server not yet, whose path an older route with an id there matches
    (``GET /api/v1/runs/sweep_candidates`` taken by ``GET /api/v1/runs/{run_id}``).

    Only when every error of the body is a path parameter's failed UUID parse and ``path`` has,
    after its collection (``/api/v1/runs``), a segment that is a route name: this client sends
    every id as a UUID, so the segment the server could not parse as one is such a name. Any
    other 422 (a query parameter's or the body's, or one beside the id's) is a genuine
    validation error and stays an ``InputError``."""
    if status != 422 or not isinstance(body, dict) or body.get("type") != "RequestValidationError":
        return False
    problems = body.get("errors")
    if not isinstance(problems, list) or not problems:
        return False
    for problem in problems:
        if not isinstance(problem, dict) or problem.get("type") != "uuid_parsing":
            return False
        where = problem.get("loc")
        if not isinstance(where, list) or len(where) != 2 or where[0] != "path":
            return False
    segments = path.partition("?")[0].strip("/").split("/")[3:]  # after api/v1/<collection>
    return any(_ROUTE_NAME.fullmatch(segment) for segment in segments)


def too_old(method: str, path: str, url: str, server_version: str, client_version: str) -> str:
    """The one-line message of a :class:`ServerTooOldError`."""
    return (
        f"The Wharf server at {url} (version {server_version}) has no route {method} {path}, "
        f"which this client (version {client_version}) needs: the server is older than the "
        "client. Upgrade the server (or use a client of the server's version)."
    )


_BY_TYPE: dict[str, type[WharfError]] = {
    cls.__name__: cls
    for cls in (
        EntityNotFoundError,
        EntityExistsError,
        IllegalOperationError,
        IllegalTransitionError,
        InputError,
        RunStoppingError,
        StoreError,
        StoreUnavailableError,
        SchemaVersionError,
    )
}
_BY_TYPE["AuthenticationError"] = NotAuthenticatedError
_BY_TYPE["PermissionDeniedError"] = PermissionDeniedError
_BY_STATUS: dict[int, type[WharfError]] = {
    400: InputError,
    401: NotAuthenticatedError,
    403: PermissionDeniedError,
    404: EntityNotFoundError,
    409: IllegalOperationError,
    422: InputError,
    502: StoreUnavailableError,
    503: StoreUnavailableError,
    504: StoreUnavailableError,
}


def from_response(status: int, body: Any, url: str) -> WharfError:
    """The Wharf error for an error response (``body``: its decoded JSON, or None)."""
    detail = body.get("detail") if isinstance(body, dict) else None
    kind = body.get("type") if isinstance(body, dict) else None
    message = detail if isinstance(detail, str) and detail else f"HTTP {status} from {url}."
    if status in (413, 414):
        return RequestTooLargeError(message, status)
    cls = _BY_TYPE.get(kind) if isinstance(kind, str) else None
    if cls is None:
        cls = _BY_STATUS.get(status, StoreError)
    if status == 401:
        hinted = f"{message} (server {url}; run 'wharf login {url}')"
        return (
            NotAuthenticatedError(hinted, message) if cls is NotAuthenticatedError else cls(hinted)
        )
    return cls(message)
