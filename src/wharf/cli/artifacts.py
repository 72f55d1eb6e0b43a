"""``wharf artifacts list [--versions]``."""

from __future__ import annotations

import click

from wharf.cli.output import OUTPUT_OPTION, emit, paged


@click.group()
def artifacts() -> None:
    """List artifacts and their versions."""


@artifacts.command("list")
@click.option("--name", help="Only this artifact.")
@click.option("--versions", is_flag=True, help="List artifact versions instead of artifacts.")
@paged
@OUTPUT_OPTION
def list_artifacts(name: str | None, versions: bool, page: int, size: int, output: str) -> None:
    """List artifacts (or artifact versions), newest first."""
    from wharf.cli.reads import read

    if versions:
        vresult = read(lambda r: r.list_artifact_versions(name=name, page=page, size=size))
        emit(
            vresult.items,
            ("name", "version", "data_type", "uri", "id"),
            output,
            title="Artifact versions",
            total=vresult.total,
        )
        return
    result = read(lambda r: r.list_artifacts(name=name, page=page, size=size))
    emit(result.items, ("name", "created", "id"), output, title="Artifacts", total=result.total)
