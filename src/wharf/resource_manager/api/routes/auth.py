"""``POST /v1/auth/login``: exchange an API key or a username and password for an access token.

Invariants: a failed login is a 401 that does not say which part was wrong; verification
(argon2, deliberately slow) runs in a worker thread, never on the event loop.
"""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import APIRouter, Response

from wharf.resource_manager.api.deps import StateDep, json_response
from wharf.resource_manager.contract.errors import AuthenticationError
from wharf.resource_manager.contract.models import AccessToken, LoginRequest

router = APIRouter(tags=["auth"])


@router.post("/v1/auth/login", response_model=None, responses={200: {"model": AccessToken}})
def login(body: LoginRequest, state: StateDep) -> Response:
    checker = state.checker
    if body.api_key is not None:
        principal = checker.check_api_key(body.api_key)
    else:
        assert body.username is not None and body.password is not None
        principal = checker.check_password(body.username, body.password)
    if principal is None:
        raise AuthenticationError("Invalid credentials.")
    token, expires = state.signer.issue(principal)
    return json_response(
        AccessToken(
            access_token=token,
            expires_at=datetime.fromtimestamp(expires, UTC),
            expires_in=state.signer.ttl_seconds,
            principal=principal.name,
            admin=principal.admin,
        )
    )
