"""``POST /v1/auth/login``: exchange an API key or a username and password for an access token.

Invariants: a failed login is a 401 that does not say which part was wrong; verification
(argon2, deliberately slow) runs in a worker thread, never on the event loop; logins are
throttled per principal name and per client address (:mod:`wharf.core.login_throttle`, per API
process): past a limit they get 429 and ``Retry-After`` before any credential is checked.
"""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from wharf.resource_manager.api.credentials import api_key_owner
from wharf.resource_manager.api.deps import StateDep, json_response
from wharf.resource_manager.contract.errors import AuthenticationError
from wharf.resource_manager.contract.models import AccessToken, LoginRequest

router = APIRouter(tags=["auth"])


_TOO_MANY = {"description": "Too many failed logins (see Retry-After)"}


@router.post(
    "/v1/auth/login",
    response_model=None,
    responses={200: {"model": AccessToken}, 429: _TOO_MANY},
)
def login(body: LoginRequest, state: StateDep, request: Request) -> Response:
    account = body.username if body.api_key is None else api_key_owner(body.api_key)
    address = request.client.host if request.client is not None else None
    throttle = state.login_throttle
    refused = throttle.attempt(account, address, state.clock())
    if refused is not None:
        return JSONResponse(
            {
                "detail": f"Too many failed logins for this {refused.scope}; try again in "
                f"{refused.retry_after} s.",
                "error": AuthenticationError.__name__,
            },
            status_code=429,
            headers={"Retry-After": str(refused.retry_after)},
        )
    checker = state.checker
    try:
        if body.api_key is not None:
            principal = checker.check_api_key(body.api_key)
        else:
            assert body.username is not None and body.password is not None
            principal = checker.check_password(body.username, body.password)
    except BaseException:  # not verified (the database did not answer): no failure
        throttle.abandoned(account, address)
        raise
    if principal is None:
        throttle.failed(account, address, state.clock())
        raise AuthenticationError("Invalid credentials.")
    throttle.succeeded(account, address)
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
