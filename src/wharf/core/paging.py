"""The ONE paging model: a page request (1-based index, size, sort by creation time) and a page
of items with the total count, shared by the metadata store and the Resource Manager.

Invariants: ``index`` is between 1 and :data:`MAX_PAGE_INDEX` (so no offset overflows a
database's integers); ``size`` is between 1 and :data:`MAX_PAGE_SIZE`; the wire
format (field names, defaults) is the same on every API that pages.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

T = TypeVar("T")

MAX_PAGE_SIZE = 1000
MAX_PAGE_INDEX = 1_000_000


class PageRequest(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    index: int = Field(default=1, ge=1, le=MAX_PAGE_INDEX)
    """1-based page number."""
    size: int = Field(default=50, ge=1, le=MAX_PAGE_SIZE)
    sort: Literal["asc", "desc"] = "desc"
    """Order by creation time (ties by id)."""


class Page(BaseModel, Generic[T]):
    """One page of a listing; iterating it (``for run in page``) and ``len`` go over its items,
    not over its fields as a model's iteration would."""

    model_config = ConfigDict(frozen=True)

    items: list[T]
    index: int
    size: int
    total: int

    @property
    def total_pages(self) -> int:
        return max(1, -(-self.total // self.size))

    def __iter__(self) -> Iterator[T]:  # type: ignore[override]
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)
