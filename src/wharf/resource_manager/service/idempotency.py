"""Idempotency keys: a retried mutating call returns the first call's result.

Owns: :class:`IdempotencyKey`, :func:`fingerprint`, :func:`lookup`, :func:`store`,
:func:`forget_before`.

Invariants:
- keys are scoped by (principal, operation): two callers, or two operations, never collide;
- the first *successful* result is stored in the same transaction as the change it describes,
  so a key exists iff its change committed; failed calls store nothing and may be retried;
- a key reused with different arguments is an :class:`IllegalOperationError`, never a silent
  replay of an unrelated result;
- keys older than the configured TTL are forgotten by the sweep.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, bindparam, delete, select

from wharf.core.errors import IllegalOperationError, InputError
from wharf.resource_manager.service import tables as t

MAX_KEY_LENGTH = t.KEY_LENGTH


@dataclass(frozen=True, slots=True)
class IdempotencyKey:
    principal: str
    operation: str
    key: str
    fingerprint: str

    @classmethod
    def of(
        cls, principal: str, operation: str, key: str | None, payload: Any
    ) -> IdempotencyKey | None:
        if key is None:
            return None
        if not key or len(key) > MAX_KEY_LENGTH:
            raise InputError(
                f"An idempotency key must have 1 to {MAX_KEY_LENGTH} characters, got {len(key)}."
            )
        return cls(principal, operation, key, fingerprint(payload))

    @property
    def scope(self) -> tuple[str, str, str]:
        return (self.principal, self.operation, self.key)


def fingerprint(payload: Any) -> str:
    """A stable hash of the call's arguments (JSON with sorted keys)."""
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


_C = t.idempotency_keys.c
_LOOKUP = select(_C.fingerprint, _C.response).where(
    _C.principal == bindparam("i_principal"),
    _C.operation == bindparam("i_operation"),
    _C.key == bindparam("i_key"),
)


def lookup(conn: Connection, key: IdempotencyKey) -> tuple[bool, Any]:
    """(found, stored response); IllegalOperationError if the key was used with other arguments."""
    params = {"i_principal": key.principal, "i_operation": key.operation, "i_key": key.key}
    row = conn.execute(_LOOKUP, params).first()
    if row is None:
        return False, None
    if row.fingerprint != key.fingerprint:
        raise IllegalOperationError(
            f"Idempotency key '{key.key}' was already used for a different {key.operation} call."
        )
    return True, row.response


def store(conn: Connection, entries: list[tuple[IdempotencyKey, Any]], now: datetime) -> None:
    if not entries:
        return
    conn.execute(
        t.idempotency_keys.insert(),
        [
            {
                "principal": key.principal,
                "operation": key.operation,
                "key": key.key,
                "fingerprint": key.fingerprint,
                "response": response,
                "created": now,
            }
            for key, response in entries
        ],
    )


def forget_before(conn: Connection, cutoff: datetime) -> None:
    conn.execute(delete(t.idempotency_keys).where(t.idempotency_keys.c.created < cutoff))
