"""What every route needs: the app's state, the authenticated principal, the idempotency key,
and JSON responses built straight from the wire models.

Owns: :class:`AppState`, :func:`authenticate`, :func:`idempotency_key`, the FastAPI
dependencies :data:`StateDep`, :data:`CallerDep`, :data:`AdminDep`, :data:`IdempotencyDep`, and
:func:`json_response`.

Invariants: the principal comes only from a valid bearer token; ``X-Idempotency-Key`` is passed
to the service unchanged (1-255 characters, else 400); responses are serialised once, by alias
(``class``), and FastAPI does not validate them again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Depends, Header, Request, Response
from pydantic import BaseModel

from wharf.core.errors import InputError
from wharf.core.login_throttle import LoginThrottle
from wharf.resource_manager.api.credentials import CredentialChecker
from wharf.resource_manager.api.metrics import MetricsReader
from wharf.resource_manager.api.settings import ApiSettings
from wharf.resource_manager.api.tokens import TokenSigner
from wharf.resource_manager.contract.errors import AuthenticationError, PermissionDeniedError
from wharf.resource_manager.service import Principal, ResourceManagerService

MAX_IDEMPOTENCY_KEY_LENGTH = 255
JSON = "application/json"


@dataclass
class AppState:
    settings: ApiSettings
    service: ResourceManagerService
    signer: TokenSigner
    checker: CredentialChecker
    metrics: MetricsReader
    clock: Callable[[], float] = time.time
    """Seconds since the epoch, for the login throttle (tests inject a fake)."""
    login_throttle: LoginThrottle = field(init=False)
    """Failed logins of this process, per principal name and per client address."""

    def __post_init__(self) -> None:
        self.login_throttle = LoginThrottle(self.settings.login_limits)


def authenticate(state: AppState, header: str | None) -> Principal:
    """The principal of an ``Authorization: Bearer <token>`` header; AuthenticationError."""
    if not header:
        raise AuthenticationError("Not authenticated: send 'Authorization: Bearer <token>'.")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token:
        raise AuthenticationError("Use 'Authorization: Bearer <token>' from /v1/auth/login.")
    return state.signer.verify(token.strip())


def idempotency_key(value: str | None) -> str | None:
    """The ``X-Idempotency-Key`` header, checked (1-255 characters, else InputError)."""
    if value is not None and not 0 < len(value) <= MAX_IDEMPOTENCY_KEY_LENGTH:
        raise InputError(
            f"X-Idempotency-Key must have 1 to {MAX_IDEMPOTENCY_KEY_LENGTH} characters."
        )
    return value


def _state(request: Request) -> AppState:
    state: AppState = request.app.state.rm
    return state


async def _caller(request: Request) -> Principal:
    return authenticate(_state(request), request.headers.get("authorization"))


async def _admin(caller: Annotated[Principal, Depends(_caller)]) -> Principal:
    if not caller.admin:
        raise PermissionDeniedError("Only an administrator may read pool queues and allocations.")
    return caller


async def _idempotency_key(
    x_idempotency_key: Annotated[str | None, Header()] = None,
) -> str | None:
    return idempotency_key(x_idempotency_key)


StateDep = Annotated[AppState, Depends(_state)]
CallerDep = Annotated[Principal, Depends(_caller)]
AdminDep = Annotated[Principal, Depends(_admin)]
IdempotencyDep = Annotated[str | None, Depends(_idempotency_key)]


def json_response(
    content: BaseModel | Sequence[BaseModel] | None, status_code: int = 200
) -> Response:
    if content is None:
        return Response(status_code=204 if status_code == 200 else status_code)
    if isinstance(content, BaseModel):
        body = content.model_dump_json(by_alias=True)
    else:
        body = "[" + ",".join(item.model_dump_json(by_alias=True) for item in content) + "]"
    return Response(body, status_code=status_code, media_type=JSON)
