"""The paging model (``wharf.core.paging``): a page is a sequence of its items."""

from __future__ import annotations

from wharf.core.paging import Page


def test_a_page_iterates_over_and_counts_its_items() -> None:
    page = Page[str](items=["a", "b"], index=1, size=50, total=7)
    assert list(page) == ["a", "b"] and len(page) == 2
    assert page.model_dump() == {"items": ["a", "b"], "index": 1, "size": 50, "total": 7}
    empty = Page[str](items=[], index=2, size=50, total=7)
    assert list(empty) == [] and len(empty) == 0 and empty.total_pages == 1
