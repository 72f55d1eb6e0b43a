"""Contract: paging (1-based, totals, both directions, ties broken by id) on every list."""

from __future__ import annotations

from datetime import timedelta

import pytest
from pydantic import ValidationError

from tests.conftest import FakeClock
from wharf.store.models import MAX_PAGE_SIZE, PageRequest
from wharf.store.sql import SqlStore


def test_pages_cover_everything_once(backend: SqlStore) -> None:
    users = [backend.users.create(f"user-{i:02d}") for i in range(7)]
    seen = []
    for index in (1, 2, 3):
        page = backend.users.list(PageRequest(index=index, size=3, sort="asc"))
        assert (page.index, page.size, page.total, page.total_pages) == (index, 3, 7, 3)
        seen.extend(page.items)
    assert seen == users
    desc = backend.users.list(PageRequest(index=1, size=3, sort="desc"))
    assert desc.items == users[::-1][:3]
    beyond = backend.users.list(PageRequest(index=5, size=3))
    assert beyond.items == [] and beyond.total == 7


def test_ties_on_created_are_ordered_by_id(backend: SqlStore, clock: FakeClock) -> None:
    clock.tick = timedelta(0)  # every record gets the same creation time
    projects = [backend.projects.create(f"p{i}") for i in range(6)]
    by_id = sorted(projects, key=lambda p: p.id)
    asc = [
        p
        for i in (1, 2)
        for p in backend.projects.list(PageRequest(index=i, size=3, sort="asc")).items
    ]
    assert asc == by_id
    desc = backend.projects.list(PageRequest(size=6, sort="desc")).items
    assert desc == by_id[::-1]


def test_page_request_bounds() -> None:
    PageRequest(size=MAX_PAGE_SIZE)
    with pytest.raises(ValidationError):
        PageRequest(size=MAX_PAGE_SIZE + 1)
    with pytest.raises(ValidationError):
        PageRequest(index=0)


def test_empty_lists(backend: SqlStore) -> None:
    assert backend.users.list().items == [] and backend.users.list().total == 0
    assert backend.runs.list().total == 0 and backend.steps.list().total == 0
    assert backend.artifacts.list_versions().total == 0 and backend.stacks.list_stacks().total == 0
