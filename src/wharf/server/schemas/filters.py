"""Query parameters of list routes: paging, and filter values including ``oneof:[...]``.

A filter value is either a plain value or ``oneof:`` followed by a JSON array of plain values
(ZenML's syntax). Invalid syntax, an empty or too long list (``max_filter_values``) or an
invalid element is an ``InputError``-like 422 (``FilterError``), never a 500.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated, Literal, TypeVar

from fastapi import Query

from wharf.core.errors import InputError
from wharf.core.paging import MAX_PAGE_INDEX
from wharf.store.models import MAX_PAGE_SIZE, PageRequest

T = TypeVar("T")
ONEOF = "oneof:"


class FilterError(InputError):
    """An invalid filter value (422)."""


def parse_oneof(
    field: str, raw: str | None, max_values: int, convert: Callable[[str], T]
) -> tuple[T, ...] | None:
    """The values a filter accepts, or None when the parameter is absent."""
    if raw is None:
        return None
    if not raw.startswith(ONEOF):
        return (_convert(field, raw, convert),)
    try:
        values = json.loads(raw[len(ONEOF) :])
    except (ValueError, RecursionError):
        raise FilterError(
            f"Invalid filter '{field}': expected oneof:[...] with a JSON array."
        ) from None
    if not isinstance(values, list) or not values:
        raise FilterError(f"Invalid filter '{field}': oneof needs a non-empty JSON array.")
    if len(values) > max_values:
        raise FilterError(
            f"Filter '{field}' holds {len(values)} values, more than the {max_values} allowed; "
            "split it into several requests."
        )
    if not all(isinstance(v, str) for v in values):
        raise FilterError(f"Invalid filter '{field}': oneof values must be strings.")
    return tuple(dict.fromkeys(_convert(field, v, convert) for v in values))


def _convert(field: str, value: str, convert: Callable[[str], T]) -> T:
    try:
        return convert(value)
    except ValueError:
        raise FilterError(f"Invalid value for filter '{field}': {value!r}.") from None


IdPrefixQuery = Annotated[
    str | None,
    Query(
        pattern=r"^[0-9a-f]{1,32}$",
        description="Only records whose id, as 32 lower-case hex digits, starts with these.",
    ),
]
"""The ``id_prefix`` filter of list routes (short ids; ``wharf.core.ids``)."""


def name_value(value: str) -> str:
    if not value or len(value) > 255:
        raise ValueError(value)
    return value


async def page_request(
    index: Annotated[int, Query(ge=1, le=MAX_PAGE_INDEX, description="1-based page")] = 1,
    size: Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE)] = 50,
    sort: Annotated[Literal["asc", "desc"], Query()] = "desc",
) -> PageRequest:
    return PageRequest(index=index, size=size, sort=sort)
