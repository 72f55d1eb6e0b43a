"""``wharf pipelines list``."""

from __future__ import annotations

import click

from wharf.cli.output import OUTPUT_OPTION, emit, paged


@click.group()
def pipelines() -> None:
    """List pipelines."""


@pipelines.command("list")
@paged
@OUTPUT_OPTION
def list_pipelines(page: int, size: int, output: str) -> None:
    """List pipelines of the project, newest first."""
    from wharf.cli.reads import read

    result = read(lambda r: r.list_pipelines(page=page, size=size))
    emit(
        result.items,
        ("name", "created", "id"),
        output,
        title="Pipelines",
        total=result.total,
        hint="running a pipeline (python my_pipeline.py) records it.",
    )
