"""Identifier helpers: new ids, random bytes for them, and parsing.

Owns :func:`new_id`, :func:`random_bytes`, :func:`parse_uuid` and the short id prefixes users
type (:func:`parse_id_prefix`, :func:`id_prefix_bounds`). Ids are random (version 4) UUIDs; an id
prefix is the start of the id's 32-digit lower-case hex form, and every id starting with it lies
between the two UUIDs :func:`id_prefix_bounds` returns (one range query in stores). Random bytes
come from keyed BLAKE2b over a counter (key from ``os.urandom``) rather than ``os.urandom`` at
every call, which releases the GIL and makes busy threads wait to get it back.

Invariants: every call returns fresh bytes (the counter never repeats within a key); a forked
child takes a new key before it runs anything (``os.register_at_fork``); nothing here blocks or
takes a lock.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import uuid
from collections.abc import Sequence
from typing import Protocol, TypeVar

from wharf.core.errors import AmbiguousIdError

_MAX_BYTES = 64  # one BLAKE2b digest


class _KeyedCounter:
    def __init__(self) -> None:
        self.rekey()

    def rekey(self) -> None:
        self._key = os.urandom(32)
        self._counter = itertools.count()

    def take(self, size: int) -> bytes:
        block = next(self._counter).to_bytes(16, "big")
        return hashlib.blake2b(block, key=self._key, digest_size=size).digest()


_GENERATOR = _KeyedCounter()
os.register_at_fork(after_in_child=_GENERATOR.rekey)


def random_bytes(size: int) -> bytes:
    """``size`` (1 to 64) unpredictable bytes, without a system call."""
    if not 1 <= size <= _MAX_BYTES:
        raise ValueError(f"random_bytes takes 1 to {_MAX_BYTES} bytes, not {size}.")
    return _GENERATOR.take(size)


def new_id() -> uuid.UUID:
    return uuid.UUID(bytes=random_bytes(16), version=4)


def parse_uuid(value: str) -> uuid.UUID | None:
    """The UUID spelled by ``value``, or None if it is not a UUID (then it may be a name)."""
    try:
        return uuid.UUID(value)
    except ValueError:
        return None


MIN_ID_PREFIX = 4
"""Fewest hex digits a short id must have (fewer would match too many ids to be useful)."""
_HEX = frozenset("0123456789abcdef")


def parse_id_prefix(value: str) -> str | None:
    """The lower-case hex digits ``value`` spells if it can be the start of an id (at least
    :data:`MIN_ID_PREFIX` digits; hyphens, as a UUID is written, are ignored), else None."""
    digits = value.replace("-", "").lower()
    if MIN_ID_PREFIX <= len(digits) <= 32 and _HEX.issuperset(digits):
        return digits
    return None


def id_prefix_bounds(prefix: str) -> tuple[uuid.UUID, uuid.UUID]:
    """The lowest and highest ids whose hex form starts with ``prefix`` (1 to 32 hex digits)."""
    return uuid.UUID(prefix.ljust(32, "0")), uuid.UUID(prefix.ljust(32, "f"))


MAX_ID_CANDIDATES = 5
"""How many matches of an ambiguous prefix an error lists (look up one more to know)."""


class _Identified(Protocol):
    @property
    def id(self) -> uuid.UUID: ...


R = TypeVar("R", bound=_Identified)


def only_match(kind: str, text: str, matches: Sequence[R]) -> R | None:
    """The one record of ``matches`` (those whose id starts with the prefix ``text``; look up
    :data:`MAX_ID_CANDIDATES` + 1), None if there is none; several raise
    :class:`AmbiguousIdError`, whose one-line message lists them (ids and names)."""
    if len(matches) <= 1:
        return matches[0] if matches else None
    shown = [_candidate(m) for m in matches[:MAX_ID_CANDIDATES]]
    more = ", ..." if len(matches) > MAX_ID_CANDIDATES else ""
    raise AmbiguousIdError(
        f"'{text}' is the start of several {kind} ids: {', '.join(shown)}{more}; give more digits."
    )


def _candidate(record: _Identified) -> str:
    name = getattr(record, "name", None)
    return f"{record.id}" + (f" ({name})" if isinstance(name, str) else "")
