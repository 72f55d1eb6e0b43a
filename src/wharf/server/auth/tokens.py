"""Signed bearer tokens: compact HS256 JSON Web Tokens, built and checked here (no dependency).

Invariants:
- The signature is HMAC-SHA256 over ``header.payload`` with the server's secret, compared in
  constant time before any part is parsed; only ``alg: HS256`` is accepted (no ``none``, no
  key confusion).
- Every token carries ``iat``, ``exp`` and a random ``jti``; a token is refused at or after
  ``exp`` (times from the caller's clock).
- Claims are parsed into :class:`TokenClaims`; any malformed part raises ``AuthenticationError``
  with a one-line reason, never another exception.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
from typing import Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict, ValidationError

from wharf.server.auth.errors import AuthenticationError

_HEADER = {"alg": "HS256", "typ": "JWT"}
MAX_TOKEN_LENGTH = 4096


class TokenClaims(BaseModel):
    """A token's claims (``iat`` / ``exp``: seconds since the epoch, floats).

    Kinds (``typ``): ``access`` (a login; ``sub``/``knd`` name the user or service account),
    ``run`` (run-scoped: ``sub``/``knd`` name the principal that requested it, ``run``/``prj``/
    ``snp`` its run, ``key`` the API key it came through, if any) and ``schedule``
    (schedule-scoped, for a schedule's fired runs: the same principal claims, ``sch``/``prj``/
    ``snp`` its schedule). ``gen`` is a user's token generation when the token was issued.
    Clients read a run token's ``typ`` and ``run`` claims (unverified) to tell which run it is
    scoped to (``wharf.execution.services.run_token_scope``): those names are part of the
    interface.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    typ: Literal["access", "run", "schedule"]
    sub: UUID
    knd: Literal["user", "service_account"]
    iat: float
    exp: float
    jti: str
    run: UUID | None = None
    sch: UUID | None = None
    prj: UUID | None = None
    snp: UUID | None = None
    key: UUID | None = None
    gen: int | None = None


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def new_jti() -> str:
    return secrets.token_hex(12)


def looks_like_token(value: str) -> bool:
    return value.count(".") == 2


def encode(claims: TokenClaims, secret: bytes) -> str:
    header = _b64(json.dumps(_HEADER, separators=(",", ":")).encode())
    payload = _b64(claims.model_dump_json(exclude_none=True).encode())
    signature = hmac.new(secret, f"{header}.{payload}".encode(), hashlib.sha256).digest()
    return f"{header}.{payload}.{_b64(signature)}"


def decode(token: str, secret: bytes, now: float) -> TokenClaims:
    """The claims of a valid, unexpired token signed with ``secret``."""
    if len(token) > MAX_TOKEN_LENGTH or not looks_like_token(token):
        raise AuthenticationError("Malformed token.")
    header, payload, signature = token.split(".")
    expected = hmac.new(secret, f"{header}.{payload}".encode(), hashlib.sha256).digest()
    try:
        given = _unb64(signature)
    except (binascii.Error, ValueError):
        raise AuthenticationError("Malformed token.") from None
    if not hmac.compare_digest(expected, given):  # before any JSON of an unsigned token is parsed
        raise AuthenticationError("Invalid token signature.")
    try:
        head = json.loads(_unb64(header))
        body = json.loads(_unb64(payload))
    except (binascii.Error, ValueError, RecursionError):
        raise AuthenticationError("Malformed token.") from None
    if head != _HEADER:
        raise AuthenticationError("Unsupported token header.")
    try:
        claims = TokenClaims.model_validate(body)
    except ValidationError:
        raise AuthenticationError("Malformed token claims.") from None
    if now >= claims.exp:
        raise AuthenticationError("The token has expired; log in again.")
    return claims
