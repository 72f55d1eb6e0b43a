"""Password hashing with argon2id (memory-hard), via argon2-cffi.

``verify`` never raises for a wrong or malformed hash: it returns False. Parameters are
argon2-cffi's defaults (RFC 9106 low-memory profile) unless a test passes cheaper ones.
"""

from __future__ import annotations

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

MIN_PASSWORD_LENGTH = 8
MAX_PASSWORD_LENGTH = 1024


class Passwords:
    def __init__(self, hasher: PasswordHasher | None = None) -> None:
        self._hasher = hasher or PasswordHasher()

    def hash(self, password: str) -> str:
        return self._hasher.hash(password)

    def verify(self, password_hash: str, password: str) -> bool:
        try:
            return self._hasher.verify(password_hash, password)
        except (VerifyMismatchError, VerificationError, InvalidHashError):
            return False

    def dummy_verify(self, password: str) -> None:
        """Spend the time of a verification (unknown user): login timing does not leak names."""
        self.verify(_DUMMY, password)


_DUMMY = (
    "$argon2id$v=19$m=65536,t=3,p=4$c29tZXNhbHRzb21lc2FsdA$ZmFrZWhhc2hmYWtlaGFzaGZha2VoYXNoZmFrZQ"
)
