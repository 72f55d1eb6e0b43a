"""Idempotency keys: a retried mutating call returns the first call's result.

Owns :class:`IdempotencyKey`, :func:`fingerprint`, :func:`lookup`, :func:`lookup_many`,
:func:`find`, :func:`replay`, :func:`store`, :func:`forget_before`.

Invariants:
- keys are scoped by (principal, operation): two callers, or two operations, never collide;
- the first *successful* result is stored in the same transaction as the change it describes,
  so a key exists iff its change committed; failed calls store nothing and may be retried;
- a key reused with different arguments is an :class:`IllegalOperationError`, never a silent
  replay of an unrelated result; keys older than the configured TTL are forgotten by the sweep;
- a response is stored as the JSON text its caller encoded and handed back as that text, never
  decoded and encoded again on the way.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Select, and_, bindparam, delete, insert, or_, select, type_coerce

from wharf.core.errors import IllegalOperationError, InputError
from wharf.resource_manager.service import tables as t
from wharf.sql.types import LONG_TEXT

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
_RESPONSE_TEXT = type_coerce(_C.response, LONG_TEXT).label("response")
"""The stored response as its JSON text (the column's own type would decode it)."""
_LOOKUP = select(_C.fingerprint, _RESPONSE_TEXT).where(
    _C.principal == bindparam("i_principal"),
    _C.operation == bindparam("i_operation"),
    _C.key == bindparam("i_key"),
)


def lookup(conn: Connection, key: IdempotencyKey) -> str | None:
    """The stored response (JSON text), None if the key is new; IllegalOperationError if the
    key was used with other arguments."""
    params = {"i_principal": key.principal, "i_operation": key.operation, "i_key": key.key}
    row = conn.execute(_LOOKUP, params).first()
    return replay(key, None if row is None else (row.fingerprint, row.response))


Stored = dict[tuple[str, str, str], tuple[str, str]]
"""Scope (as :func:`stored_scope` gives it) -> (fingerprint, response JSON) of stored keys."""

_CHUNK = 100
_LOOKUPS: dict[int, Select[Any]] = {}
"""Number of keys -> the statement that looks them up (built once per size, at most _CHUNK,
so SQLAlchemy reuses its compiled form)."""


def _lookup_statement(count: int) -> Select[Any]:
    # An OR of whole-key equalities: every database searches the primary key once per term
    # whatever its statistics say. (A row-value ``IN`` makes SQLite scan the table; an IN list
    # per column makes PostgreSQL, before the table was first analysed, scan every key of the
    # principal.)
    terms = [
        and_(
            _C.principal == bindparam(f"i_p{index}"),
            _C.operation == bindparam(f"i_o{index}"),
            _C.key == bindparam(f"i_k{index}"),
        )
        for index in range(count)
    ]
    return select(_C.principal, _C.operation, _C.key, _C.fingerprint, _RESPONSE_TEXT).where(
        or_(*terms)
    )


def _lookup(count: int) -> Select[Any]:
    statement = _LOOKUPS.get(count)
    if statement is None:
        statement = _LOOKUPS[count] = _lookup_statement(count)
    return statement


def lookup_many(conn: Connection, keys: Iterable[IdempotencyKey]) -> Stored:
    """Every stored key among ``keys`` (one query per hundred keys; none without keys); pass
    an entry to :func:`replay` with its key.

    A scheduling batch looks up the keys of all its operations with it, not one query per
    operation: over HTTP every mutating call carries a key, and on PostgreSQL each lookup is a
    round trip made with the scheduling lock held. (The renewal runner looks keys up one by
    one with :func:`lookup`.)"""
    padded = conn.dialect.name in ("mysql", "mariadb")
    scopes = list(dict.fromkeys(key.scope for key in keys))
    wanted = {stored_scope(scope, padded) for scope in scopes}
    found: Stored = {}
    for start in range(0, len(scopes), _CHUNK):
        chunk = scopes[start : start + _CHUNK]
        params: dict[str, str] = {}
        for index, (principal, operation, key) in enumerate(chunk):
            params[f"i_p{index}"] = principal
            params[f"i_o{index}"] = operation
            params[f"i_k{index}"] = key
        for row in conn.execute(_lookup(len(chunk)), params).mappings():
            scope = stored_scope((row["principal"], row["operation"], row["key"]), padded)
            if scope in wanted:
                found[scope] = (row["fingerprint"], row["response"])
    return found


def stored_scope(scope: tuple[str, str, str], padded: bool) -> tuple[str, str, str]:
    """How the database compares scopes: MySQL's binary collation ignores trailing spaces (PAD
    SPACE), so the key a row matched is found even when it differs from the row in those."""
    if not padded:
        return scope
    return (scope[0].rstrip(" "), scope[1].rstrip(" "), scope[2].rstrip(" "))


def replay(key: IdempotencyKey, stored: tuple[str, str] | None) -> str | None:
    """The stored response (JSON text) for ``key`` from its stored (fingerprint, response), None
    if there is none; IllegalOperationError if the key was used with other arguments."""
    if stored is None:
        return None
    if stored[0] != key.fingerprint:
        raise IllegalOperationError(
            f"Idempotency key '{key.key}' was already used for a different {key.operation} call."
        )
    return stored[1]


def find(conn: Connection, stored: Stored, key: IdempotencyKey) -> str | None:
    """:func:`replay` of ``key`` from what :func:`lookup_many` found on ``conn``."""
    padded = conn.dialect.name in ("mysql", "mariadb")
    return replay(key, stored.get(stored_scope(key.scope, padded)))


_STORE = insert(t.idempotency_keys).values(
    principal=bindparam("principal"),
    operation=bindparam("operation"),
    key=bindparam("key"),
    fingerprint=bindparam("fingerprint"),
    response=bindparam("response", type_=LONG_TEXT),
    created=bindparam("created"),
)


def store(conn: Connection, entries: list[tuple[IdempotencyKey, str]], now: datetime) -> None:
    """Store each key with its call's response, already encoded as JSON text (in the
    transaction of the change they describe)."""
    if not entries:
        return
    rows = [
        {
            "principal": key.principal,
            "operation": key.operation,
            "key": key.key,
            "fingerprint": key.fingerprint,
            "response": response,
            "created": now,
        }
        for key, response in entries
    ]
    conn.execute(_STORE, rows)


def forget_before(conn: Connection, cutoff: datetime) -> None:
    conn.execute(delete(t.idempotency_keys).where(t.idempotency_keys.c.created < cutoff))
