"""Signed access tokens: compact HS256 JSON Web Tokens, built and checked here.

Owns: :class:`TokenSigner`.

Invariants: the signature is HMAC-SHA256 over ``header.payload``, compared in constant time,
and only this module's own header is accepted (no ``alg`` negotiation, so no ``none`` and no key
confusion); a token is refused at or after ``exp`` (times from the injected clock); a malformed
token raises :class:`AuthenticationError` with a one-line reason, never another exception.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Callable

from wharf.resource_manager.contract.errors import AuthenticationError
from wharf.resource_manager.service import Principal

MAX_TOKEN_LENGTH = 4096
VERIFIED_KEPT = 4096
"""Verified tokens remembered with their principal and expiry, so a client's next calls skip the
HMAC and the JSON parse (expiry is still checked on every call); forgotten all at once when
full."""
_HEADER = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').rstrip(b"=").decode()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class TokenSigner:
    """Issues and verifies tokens with one key. Claims: ``sub`` (principal name), ``adm``
    (administrator), ``sbj`` (trusted to assert subjects; left out when false), ``iat`` and
    ``exp`` (seconds since the epoch, server clock), ``jti`` (random). Tokens are stateless:
    any worker or replica holding the same key verifies them, and they cannot be revoked
    before ``exp`` (keep the TTL short)."""

    def __init__(
        self, secret: bytes, ttl_seconds: float, clock: Callable[[], float] = time.time
    ) -> None:
        self._secret = secret
        self.ttl_seconds = ttl_seconds
        self._clock = clock
        self._verified: dict[str, tuple[Principal, float]] = {}

    def _sign(self, signing_input: str) -> str:
        return _b64(hmac.new(self._secret, signing_input.encode(), hashlib.sha256).digest())

    def issue(self, principal: Principal) -> tuple[str, float]:
        """A token for ``principal`` and its expiry (seconds since the epoch)."""
        now = self._clock()
        expires = now + self.ttl_seconds
        claims = {
            "sub": principal.name,
            "adm": principal.admin,
            "iat": now,
            "exp": expires,
            "jti": secrets.token_hex(8),
        }
        if principal.asserts_subjects:
            claims["sbj"] = True
        payload = _b64(json.dumps(claims, separators=(",", ":")).encode())
        signing_input = f"{_HEADER}.{payload}"
        return f"{signing_input}.{self._sign(signing_input)}", expires

    def verify(self, token: str) -> Principal:
        """The principal of a valid, unexpired token; AuthenticationError otherwise."""
        known = self._verified.get(token)
        if known is not None and self._clock() < known[1]:
            return known[0]
        principal, expires = self._check(token)
        if len(self._verified) >= VERIFIED_KEPT:
            self._verified.clear()
        self._verified[token] = (principal, expires)
        return principal

    def _check(self, token: str) -> tuple[Principal, float]:
        parts = token.split(".")
        if len(token) > MAX_TOKEN_LENGTH or len(parts) != 3 or parts[0] != _HEADER:
            raise AuthenticationError("Malformed access token.")
        expected = self._sign(f"{parts[0]}.{parts[1]}")
        if not hmac.compare_digest(expected.encode(), parts[2].encode()):
            raise AuthenticationError("Invalid access token signature.")
        try:
            claims = json.loads(_unb64(parts[1]))
            name, admin, expires = claims["sub"], claims["adm"], claims["exp"]
        except (binascii.Error, ValueError, TypeError, KeyError):
            raise AuthenticationError("Malformed access token.") from None
        asserts_subjects = claims.get("sbj", False)
        if not (isinstance(name, str) and isinstance(admin, bool)):
            raise AuthenticationError("Malformed access token.")
        if not isinstance(asserts_subjects, bool):
            raise AuthenticationError("Malformed access token.")
        if not isinstance(expires, int | float) or self._clock() >= expires:
            raise AuthenticationError("The access token has expired; log in again.")
        principal = Principal(name, admin=admin, asserts_subjects=asserts_subjects)
        return principal, float(expires)
