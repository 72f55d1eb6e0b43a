"""Checking login credentials against the configured, argon2-hashed ones.

Owns: :class:`CredentialChecker`, :func:`new_api_key`, :func:`hash_secret`,
:func:`api_key_owner`.

Invariants: secrets are compared only through argon2 verification (the bootstrap admin key in
constant time); a failed login takes about as long whether or not the name exists (an unknown
name is verified against a dummy hash) and says nothing about which part was wrong; an API key
``wrm.<name>.<secret>`` is verified only against the entry ``<name>``; verification never raises.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Sequence
from functools import cached_property

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from wharf.resource_manager.api.settings import Credential
from wharf.resource_manager.service import Principal

API_KEY_PREFIX = "wrm."
ADMIN_PRINCIPAL = "admin"


def new_api_key(name: str) -> str:
    """A fresh API key for the principal ``name`` (the secret part is 48 hex digits)."""
    return f"{API_KEY_PREFIX}{name}.{secrets.token_hex(24)}"


def api_key_owner(key: str) -> str | None:
    """The principal name inside an API key, or None if the key is not of our form."""
    if not key.startswith(API_KEY_PREFIX):
        return None
    name, dot, secret = key[len(API_KEY_PREFIX) :].rpartition(".")
    return name if dot and name and secret else None


def hash_secret(secret: str) -> str:
    """The argon2 hash to put in a credentials file for ``secret``."""
    return PasswordHasher().hash(secret)


def _principal(credential: Credential) -> Principal:
    return Principal(
        credential.name, admin=credential.admin, asserts_subjects=credential.asserts_subjects
    )


class CredentialChecker:
    def __init__(self, credentials: Sequence[Credential], admin_api_key: str | None) -> None:
        self._by_name = {c.name: c for c in credentials}
        self._admin_key = admin_api_key
        self._hasher = PasswordHasher()

    @cached_property
    def _dummy_hash(self) -> str:
        return self._hasher.hash(secrets.token_hex(16))

    def _verify(self, hashed: str | None, secret: str) -> bool:
        try:
            return self._hasher.verify(hashed or self._dummy_hash, secret) and hashed is not None
        except (VerificationError, InvalidHashError):
            return False

    def check_api_key(self, key: str) -> Principal | None:
        if self._admin_key is not None and hmac.compare_digest(
            key.encode(), self._admin_key.encode()
        ):
            return Principal(ADMIN_PRINCIPAL, admin=True)
        owner = api_key_owner(key)
        credential = self._by_name.get(owner) if owner is not None else None
        hashed = credential.api_key_hash if credential is not None else None
        if credential is None or not self._verify(hashed, key):
            return None
        return _principal(credential)

    def check_password(self, username: str, password: str) -> Principal | None:
        credential = self._by_name.get(username)
        hashed = credential.password_hash if credential is not None else None
        if credential is None or not self._verify(hashed, password):
            return None
        return _principal(credential)
