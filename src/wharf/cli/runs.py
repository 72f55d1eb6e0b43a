"""``wharf runs list | show RUN | stop RUN``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from wharf.cli.output import OUTPUT_OPTION, emit, emit_one, paged
from wharf.core.enums import ExecutionStatus

if TYPE_CHECKING:
    from wharf.store.models import PipelineRunRecord, StepRunRecord

RUN_COLUMNS = ("name", "status", "created", "end_time", "id")


@click.group()
def runs() -> None:
    """Inspect and stop pipeline runs."""


@runs.command("list")
@click.option("--pipeline", help="Only runs of this pipeline (name or id).")
@click.option("--status", type=click.Choice([s.value for s in ExecutionStatus]))
@paged
@OUTPUT_OPTION
def list_runs(pipeline: str | None, status: str | None, page: int, size: int, output: str) -> None:
    """List pipeline runs, newest first."""
    from wharf.cli.reads import read

    result = read(
        lambda r: r.list_pipeline_runs(pipeline=pipeline, status=status, page=page, size=size)
    )
    emit(result.items, RUN_COLUMNS, output, title="Pipeline runs", total=result.total)


@runs.command("show")
@click.argument("run")
@OUTPUT_OPTION
def show_run(run: str, output: str) -> None:
    """Show one run (by id or name) and its steps."""
    from wharf.cli.reads import Reads, read

    def query(reads: Reads) -> tuple[PipelineRunRecord, list[StepRunRecord]]:
        record = reads.get_pipeline_run(run)
        return record, reads.list_run_steps(record.id, size=1000).items

    record, steps = read(query)
    if output == "json":
        import json

        data = record.model_dump(mode="json")
        data["steps"] = [s.model_dump(mode="json") for s in steps]
        click.echo(json.dumps(data, indent=2))
        return
    emit_one(record, output)
    click.echo("")
    emit(
        steps,
        ("name", "status", "attempt", "start_time", "end_time", "status_reason"),
        output,
        title="Steps",
    )


@runs.command("stop")
@click.argument("run")
@click.option("--force", is_flag=True, help="Also kill the run's isolated step processes now.")
def stop_run(run: str, force: bool) -> None:
    """Stop a run: no new steps start; running steps are interrupted and end stopped."""
    from wharf.sdk.client import Client

    with Client() as client:
        record = client.stop_run(run, force=force)
    click.echo(f"Run '{record.name}' is {record.status.value}.")
