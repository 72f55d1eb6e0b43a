"""Tables and detail views show a missing value one way, ``-``, and mappings as JSON."""

from __future__ import annotations

from datetime import UTC, datetime
from enum import Enum

import pytest
from pydantic import BaseModel

from wharf.cli.output import MISSING, echo_fields, emit, emit_one


class Colour(Enum):
    RED = "red"


class Record(BaseModel):
    name: str
    note: str | None
    tags: list[str]
    attributes: dict[str, object]
    colour: Colour
    created: datetime


RECORD = Record(
    name="a",
    note="",
    tags=[],
    attributes={"local": True, "n": 2},
    colour=Colour.RED,
    created=datetime(2026, 1, 2, 3, 4, 5, 678, tzinfo=UTC),
)


def test_tables_show_none_and_empty_values_as_a_dash(capsys: pytest.CaptureFixture[str]) -> None:
    emit([RECORD], ("name", "note", "tags", "attributes", "colour", "created"), "table")
    row = capsys.readouterr().out.splitlines()[1].split("  ")
    cells = [c.strip() for c in row if c.strip()]
    assert cells == ["a", MISSING, MISSING, '{"local": true, "n": 2}', "red", "2026-01-02 03:04:05"]


def test_detail_views_render_values_as_tables_do(capsys: pytest.CaptureFixture[str]) -> None:
    emit_one(RECORD, "table")
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        "name        a",
        "note        -",
        "tags        -",
        'attributes  {"local": true, "n": 2}',
        "colour      red",
        "created     2026-01-02 03:04:05",
    ]
    echo_fields([("limit", None), ("rank", 0), ("fair", False)])
    assert capsys.readouterr().out.splitlines() == ["limit  -", "rank   0", "fair   False"]


def test_a_page_past_the_end_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    emit([], ("name",), "table", title="Things", total=2)
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["Things", "NAME", "No records on this page: 2 in all; use a lower --page."]
    emit([RECORD], ("name",), "table", total=2)  # a page that shows some: as before
    assert capsys.readouterr().out.splitlines()[-1] == "1 of 2 shown; use --page/--size for more."


def test_an_empty_list_says_none_yet_unless_a_filter_emptied_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    emit([], ("name",), "table", total=0, noun="pools", hint="`wharf pool create` makes one.")
    assert capsys.readouterr().err == "No pools yet: `wharf pool create` makes one.\n"
    emit([], ("name",), "table", title="Things", total=0)
    assert capsys.readouterr().err == "No things yet.\n"
    emit([], ("name",), "table", title="Things", total=0, filtered=True, hint="unused")
    assert capsys.readouterr().err == "No things match.\n"
