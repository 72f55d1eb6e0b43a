"""Paging parameters of the RM's list routes over HTTP: out of range is a 422, never a 500 (a page
index so far out that its offset overflows the database's integers included)."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from wharf.core.paging import MAX_PAGE_INDEX

RR = "/v1/resource-requests"


@pytest.mark.parametrize(
    "query",
    ["page=0", f"page={MAX_PAGE_INDEX + 1}", "page=99999999999999999999999", "size=0", "size=1001"],
)
def test_paging_out_of_range_is_422(
    http: httpx.Client, token: Callable[[], dict[str, str]], query: str
) -> None:
    response = http.get(f"{RR}?{query}", headers=token())
    assert response.status_code == 422, response.text
    assert response.json()["error"] == "InputError"


def test_the_last_page_index_is_served(
    http: httpx.Client, token: Callable[[], dict[str, str]]
) -> None:
    response = http.get(f"{RR}?page={MAX_PAGE_INDEX}&size=1000", headers=token())
    assert response.status_code == 200, response.text
    assert response.json()["items"] == []
