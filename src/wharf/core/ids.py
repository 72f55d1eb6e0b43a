"""Identifier helpers. Ids are UUID4s; names are for humans and may repeat across projects."""

from __future__ import annotations

import uuid


def new_id() -> uuid.UUID:
    return uuid.uuid4()


def parse_uuid(value: str) -> uuid.UUID | None:
    """The UUID spelled by ``value``, or None if it is not a UUID (then it may be a name)."""
    try:
        return uuid.UUID(value)
    except ValueError:
        return None
