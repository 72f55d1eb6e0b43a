"""API keys of service accounts: ``wharf_<key id hex>_<secret>``.

The secret is 32 random bytes (url-safe base64). The store keeps only its SHA-256 digest: a
memory-hard hash protects low-entropy passwords against guessing; a 256-bit random secret needs
none, and a fast digest keeps authentication cheap on every request. The key id (a UUID) finds
the row; the digest is compared in constant time.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from uuid import UUID

PREFIX = "wharf_"


def new_secret() -> tuple[str, str]:
    """A new secret and the digest to store; the key is :func:`format_key` of the stored id."""
    secret = secrets.token_urlsafe(32)
    return secret, digest(secret)


def format_key(key_id: UUID, secret: str) -> str:
    return f"{PREFIX}{key_id.hex}_{secret}"


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def parse(key: str) -> tuple[UUID, str] | None:
    """``(key id, secret)`` of a well-formed key, else None."""
    if not key.startswith(PREFIX):
        return None
    body = key[len(PREFIX) :]
    id_hex, sep, secret = body.partition("_")
    if not sep or len(id_hex) != 32 or not secret or len(secret) > 256:
        return None
    try:
        return UUID(hex=id_hex), secret
    except ValueError:
        return None


def matches(stored_digest: str, secret: str) -> bool:
    return hmac.compare_digest(stored_digest, digest(secret))
