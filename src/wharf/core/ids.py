"""Identifier helpers: new ids, parsing, and the short id prefixes users type.

Owns :func:`new_id`, :func:`parse_uuid`, :func:`parse_id_prefix`, :func:`id_prefix_bounds`,
:func:`only_match` and :func:`run_not_found` (the message for a run that nothing matches). Ids
are random (version 4) UUIDs from :func:`uuid.uuid4`; nothing orders by them. An id prefix is
the start of the id's 32-digit lower-case hex form, and every id starting with it lies between
the two UUIDs :func:`id_prefix_bounds` returns (one range query in stores).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Protocol, TypeVar

from wharf.core.errors import AmbiguousIdError, EntityNotFoundError


def new_id() -> uuid.UUID:
    """A new random (version 4) UUID."""
    return uuid.uuid4()


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


def run_not_found(text: str, *, names_a_pipeline: bool) -> EntityNotFoundError:
    """The error for a run name, id or id prefix ``text`` that matches no run; when ``text`` is
    a pipeline's name (``wharf runs show training``) it says how to list that pipeline's runs,
    and when it is a hex prefix too short to be one, how long one must be."""
    message = f"No pipeline run with id or name '{text}'."
    if names_a_pipeline:
        message += f" '{text}' is a pipeline: wharf runs list --pipeline '{text}' lists its runs."
    elif 0 < len(text) < MIN_ID_PREFIX and _HEX.issuperset(text.lower()):
        message += f" An id prefix needs at least {MIN_ID_PREFIX} hex digits."
    return EntityNotFoundError(message)
