"""What the API checks of a request before any route reads its body: its size, then who sent it.

Owns :func:`guard` (wraps the app in both checks) and :data:`PUBLIC_BODY_PATHS`.

Invariant: no body over ``ApiSettings.max_body_bytes`` is read (413), and no route reads a body
before its sender is authenticated (401, never a 422 describing the schema).
"""

from __future__ import annotations

from fastapi import FastAPI
from starlette.types import ASGIApp, Receive, Scope, Send

from wharf.request_limits import SizeLimits
from wharf.resource_manager.api.deps import AppState, authenticate
from wharf.resource_manager.api.errors import error_response
from wharf.resource_manager.contract.errors import AuthenticationError

PUBLIC_BODY_PATHS = frozenset({"/v1/auth/login"})
"""The only routes that read a body from an anonymous caller."""
_INPUT_ERROR = "InputError"  # the RM's error name for a refused request (413 and 414 alike)


class _AuthenticateFirst:
    """FastAPI's routes read and parse a body before their dependencies authenticate."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] not in PUBLIC_BODY_PATHS and _has_body(scope):
            state: AppState = scope["app"].state.rm
            headers = dict(scope.get("headers", ()))
            header = headers.get(b"authorization")
            try:
                authenticate(state, header.decode("latin-1") if header is not None else None)
            except AuthenticationError as error:
                await error_response(error)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _has_body(scope: Scope) -> bool:
    for name, value in scope.get("headers", ()):
        if name == b"transfer-encoding" or (name == b"content-length" and value.strip() != b"0"):
            return True
    return False


def guard(app: FastAPI, max_body_bytes: int) -> None:
    """Authenticate FastAPI's routes before their bodies are read, and put the size limits in
    front of everything, lean routes included (call after the lean routes are mounted).

    A body over ``max_body_bytes`` gets 413 before any of it is read
    (:class:`wharf.request_limits.SizeLimits`). A request with a body for a FastAPI route that
    needs a principal (every one but login) without a valid token gets 401 whatever the body
    holds, never a 422 describing the schema. Lean routes authenticate before reading their
    body themselves (:class:`.lean.Call`), so they skip that check."""
    app.add_middleware(_AuthenticateFirst)
    build = app.build_middleware_stack

    def build_with_limits() -> ASGIApp:
        return SizeLimits(
            build(),
            max_body_bytes=max_body_bytes,
            error_key="error",
            error_names={413: _INPUT_ERROR, 414: _INPUT_ERROR},
        )

    app.build_middleware_stack = build_with_limits  # type: ignore[method-assign]
