"""Identifiers of new requests: time-ordered UUIDs (the version 7 layout of RFC 9562).

Owns :func:`request_id` (see it for why they are ordered) and :func:`entropy`.

Invariants: the timestamp is the service's injected clock (the batch's ``now``), never a clock
read here; 74 random bits (``os.urandom``) keep ids unique and unguessable within one
millisecond; ids are valid RFC 9562 version 7 UUIDs. Nothing relies on the order for
correctness: ties between requests of one batch are broken by the id, arbitrarily.
"""

from __future__ import annotations

import os
from datetime import datetime
from uuid import UUID

_VERSION_7 = 0x7 << 76
_VARIANT = 0x2 << 62
_RAND_A = 0xFFF << 64
_RAND_B = (1 << 62) - 1


def entropy() -> bytes:
    """The random part of a future :func:`request_id`."""
    return os.urandom(10)


def request_id(now: datetime, random_part: bytes | None = None) -> UUID:
    """A new id whose first 48 bits are ``now`` in Unix milliseconds (aware datetime);
    ``random_part``: 10 bytes from :func:`entropy` (read here when not given).

    Ordered because the id is the key of ``rm_requests`` and, through ``request_id``, of its
    subject and metadata rows: random (version 4) keys land every insert on a different B-tree
    leaf of each of those indexes, so every commit rewrites many pages in the WAL; keys that
    grow with time append to a few hot pages.
    """
    millis = int(now.timestamp() * 1000) & ((1 << 48) - 1)
    rand = int.from_bytes(random_part if random_part is not None else entropy(), "big")
    value = (millis << 80) | _VERSION_7 | (rand & _RAND_A) | _VARIANT | (rand & _RAND_B)
    return UUID(int=value)
