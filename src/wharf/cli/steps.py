"""``wharf steps list --run RUN``."""

from __future__ import annotations

import click

from wharf.cli.output import OUTPUT_OPTION, emit, paged

STEP_COLUMNS = ("name", "status", "attempt", "start_time", "end_time", "id")


@click.group()
def steps() -> None:
    """Inspect the step runs of a run."""


@steps.command("list")
@click.option("--run", "run", required=True, help="Run id or name.")
@paged
@OUTPUT_OPTION
def list_steps(run: str, page: int, size: int, output: str) -> None:
    """List the step runs of a run, in the order they started."""
    from wharf.cli.reads import read

    result = read(lambda r: r.list_run_steps(run, page=page, size=size))
    emit(result.items, STEP_COLUMNS, output, title="Step runs", total=result.total)


@steps.command("logs")
@click.argument("step_run_id")
def step_logs(step_run_id: str) -> None:
    """Print the captured stdout/stderr of a step run."""
    from wharf.sdk.client import Client

    with Client() as client:
        text = client.step_logs(step_run_id)
    click.echo(text, nl=not text.endswith("\n"))
