"""Rendering records as a table (rich) or JSON for every list/show command."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import click
from pydantic import BaseModel

OUTPUT_OPTION = click.option(
    "--output",
    "-o",
    type=click.Choice(["table", "json"]),
    default="table",
    show_default=True,
    help="Output format.",
)

PAGE_OPTIONS = (
    click.option("--page", type=click.IntRange(min=1), default=1, show_default=True),
    click.option("--size", type=click.IntRange(1, 1000), default=50, show_default=True),
)


def paged(func: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(PAGE_OPTIONS):
        func = option(func)
    return func


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    if hasattr(value, "value"):
        return str(value.value)
    return str(value)


def emit(
    records: Sequence[BaseModel],
    columns: Sequence[str],
    output: str,
    *,
    title: str | None = None,
    total: int | None = None,
) -> None:
    if output == "json":
        click.echo(json.dumps([r.model_dump(mode="json") for r in records], indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(column.upper(), no_wrap=True)
    for record in records:
        table.add_row(*(_cell(getattr(record, c)) for c in columns))
    # Piped output is read by programs and people with wide windows: never truncate it.
    console = Console(width=None if sys.stdout.isatty() else 250)
    console.print(table)
    if total is not None and total > len(records):
        console.print(f"{len(records)} of {total} shown; use --page/--size for more.")


def emit_one(record: BaseModel, output: str, fields: Sequence[str] | None = None) -> None:
    data = record.model_dump(mode="json")
    if output == "json":
        click.echo(json.dumps(data, indent=2))
        return
    width = max(len(k) for k in data)
    for key in fields or data:
        value = data[key]
        text = json.dumps(value) if isinstance(value, dict | list) else _cell(value)
        click.echo(f"{key.ljust(width)}  {text}")
