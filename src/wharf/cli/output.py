"""Rendering records as a plain-text table or JSON for every list/show command (:func:`emit`,
:func:`emit_one`, :func:`echo_fields`, :func:`format_table`), and the paging options and
messages every list shares (:func:`paged`, :func:`page_note`, :func:`page_slice`).

Invariants: one record is one line, never truncated or wrapped, so tables read the same on a
terminal, in a pipe and under ``grep``/``awk``; a missing value is :data:`MISSING` (``-``) in
every table and detail view. Rendering stays cheap: listing commands are judged by their
start-up time (``bench/cli_startup.py``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from pydantic import BaseModel

OUTPUT_OPTION = click.option(
    "--output",
    "-o",
    type=click.Choice(["table", "json"]),
    default="table",
    show_default=True,
    help="Output format.",
)

MAX_PAGE = 1_000_000
"""The last page a list asks for: the store's ``MAX_PAGE_INDEX`` (not imported: it would load
pydantic for every list's options), so that a larger ``--page`` is refused naming the option."""

PAGE_OPTIONS = (
    click.option(
        "--page",
        type=click.IntRange(1, MAX_PAGE),
        default=1,
        show_default=True,
        help="Which page of results to show (from 1).",
    ),
    click.option(
        "--size",
        type=click.IntRange(1, 1000),
        default=50,
        show_default=True,
        help="Records per page (1-1000).",
    ),
)

COLUMN_GAP = "  "


def paged(func: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(PAGE_OPTIONS):
        func = option(func)
    return func


MISSING = "-"
"""How every table and detail view shows a value that is not there (None, empty)."""


def _cell(value: Any) -> str:
    """One value as table or detail text: :data:`MISSING` for None and empty values, times to
    the second, enums by value, mappings and lists as compact JSON."""
    if value is None or (isinstance(value, str | dict | list | tuple) and not value):
        return MISSING
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(value, dict | list | tuple):
        return json.dumps(value, default=_json_default, separators=(", ", ": "))
    if hasattr(value, "value"):
        return str(value.value)
    return str(value)


def _json_default(value: Any) -> Any:
    return getattr(value, "value", None) or str(value)


def echo_fields(pairs: Iterable[tuple[str, Any]]) -> None:
    """A detail view: one ``key  value`` line per pair, keys aligned, values as :func:`_cell`
    renders them (so ``-`` for anything missing, as in tables)."""
    items = list(pairs)
    width = max((len(key) for key, _ in items), default=0)
    for key, value in items:
        click.echo(f"{key.ljust(width)}  {_one_line(_cell(value))}".rstrip())


def _one_line(text: str) -> str:
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else " " for c in text)


def _width(text: str) -> int:
    if text.isascii():  # one cell per character: no need to import rich's width tables
        return len(text)
    from rich.cells import cell_len

    return cell_len(text)


def format_table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """The lines of a plain table: the header (``columns`` upper-cased), then one per row.

    Aligned columns separated by two spaces (as ``kubectl`` and ``docker`` print them), widths
    measured in terminal cells (``rich.cells``) so wide characters keep the columns aligned.
    Cell text is shown literally: no markup is interpreted, and line breaks and other control
    characters become spaces.
    """
    header = [c.upper() for c in columns]
    cells = [[(t := _one_line(text), _width(t)) for text in row] for row in (header, *rows)]
    widths = [max(width for _, width in column) for column in zip(*cells, strict=True)]
    return [
        COLUMN_GAP.join(
            text + " " * (widths[i] - width) for i, (text, width) in enumerate(row)
        ).rstrip()
        for row in cells
    ]


def emit(
    records: Sequence[BaseModel],
    columns: Sequence[str],
    output: str,
    *,
    title: str | None = None,
    total: int | None = None,
    derived: Mapping[str, Callable[[Any], Any]] | None = None,
    filtered: bool = False,
    hint: str | None = None,
    noun: str | None = None,
) -> None:
    """``records`` as JSON, or as a table of ``columns``: attributes of the records, or columns
    ``derived`` computes from a record. A table of nothing at all (``total`` 0) is followed on
    stderr (stdout keeps the bare header, for scripts) by :func:`empty_note`: ``No <noun>
    match.`` when the list was ``filtered``, else ``No <noun> yet.`` and the ``hint`` (how to
    make one); ``noun`` defaults to the title in lower case."""
    if output == "json":
        click.echo(json.dumps([r.model_dump(mode="json") for r in records], indent=2))
        return
    compute = derived or {}
    rows = [
        [_cell(compute[c](record) if c in compute else getattr(record, c)) for c in columns]
        for record in records
    ]
    lines = format_table(columns, rows)
    if title:
        lines.insert(0, title)
    note = None if total is None else page_note(len(records), total)
    if note is not None:
        lines.append(note)
    click.echo("\n".join(lines))
    if total == 0:  # else an empty list looks like a table that failed to load
        what = noun or (title.lower() if title else "records")
        click.echo(empty_note(what, filtered=filtered, hint=hint), err=True)


def empty_note(noun: str, *, filtered: bool, hint: str | None = None) -> str:
    """The line under an empty list of ``noun``: a filtered list says nothing matches it; an
    unfiltered one says there are none yet, and ``hint`` (if any) how to make one."""
    if filtered:
        return f"No {noun} match."
    return f"No {noun} yet." if hint is None else f"No {noun} yet: {hint}"


def page_note(shown: int, total: int) -> str | None:
    """The line under a table of ``shown`` records out of ``total`` (None if all are shown):
    the one message of every paged list."""
    if total > 0 and not shown:
        return f"No records on this page: {total} in all; use a lower --page."
    if total > shown:
        return f"{shown} of {total} shown; use --page/--size for more."
    return None


def page_slice(items: Sequence[Any], page: int, size: int) -> list[Any]:
    """Page ``page`` of ``size`` of ``items``, for lists a server returns whole (pools and
    policies: the Resource Manager does not page them)."""
    start = (page - 1) * size
    return list(items[start : start + size])


def emit_one(record: BaseModel, output: str, fields: Sequence[str] | None = None) -> None:
    if output == "json":
        click.echo(json.dumps(record.model_dump(mode="json"), indent=2))
        return
    data = record.model_dump()
    echo_fields((key, data[key]) for key in fields or data)
